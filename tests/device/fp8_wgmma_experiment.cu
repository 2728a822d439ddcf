// Experiment: fp8 weights times fp8 activations (W8A8, a scale a weight row and a scale an
// activation row) on Hopper's warpgroup MMA (wgmma m64n64k32 e4m3, sm_90a), for 9-128 rows.
// mma.sync's m16n8k32 e4m3 is not a tensor-core instruction on sm_90 (ptxas lowers it to f16
// HMMAs plus FADDs), so on an H100 fp8 products need wgmma. Timed against gemm_fp8 (W8A16,
// mma.sync f16) by fp8_gemm_bench.cu; not part of the engine.
//
// A block is two warpgroups over 256 weight rows (features) and 64 activation rows; each
// warpgroup multiplies two 64-feature tiles by the 64 rows. K goes in 64-byte chunks through a
// FW_STAGES-deep cp.async pipeline into shared memory laid out as wgmma's canonical K-major
// tiles without swizzling: 8-row x 16-byte core matrices of 128 contiguous bytes, the cores of
// one 16-byte column of K together (row r, byte kb of an R-row tile at
// ((kb / 16) * (R / 8) + r / 8) * 128 + (r % 8) * 16 + kb % 16).
#pragma once
#include <stdint.h>

#define FW_FEATURES 256
#define FW_ROWS 64
#ifndef FW_KC
#define FW_KC 64
#endif
#ifndef FW_STAGES
#define FW_STAGES 4
#endif
#ifndef FW_MIN_BLOCKS
#define FW_MIN_BLOCKS 1
#endif
#define FW_WBYTES (FW_FEATURES * FW_KC)
#define FW_STAGE_BYTES (FW_WBYTES + FW_ROWS * FW_KC)

__device__ __forceinline__ int fw_off(int r, int kb, int rows) {
    return ((kb >> 4) * (rows >> 3) + (r >> 3)) * 128 + (r & 7) * 16 + (kb & 15);
}

// A shared-memory matrix descriptor: start address, leading byte offset (between core matrices
// along K), stride byte offset (between core matrices along M or N), no swizzle.
__device__ __forceinline__ uint64_t fw_desc(const void* p, int lbo, int sbo) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    return (uint64_t)((a & 0x3ffff) >> 4) | ((uint64_t)(lbo >> 4) << 16) |
           ((uint64_t)(sbo >> 4) << 32);
}

__device__ __forceinline__ void fw_mma(float (&d)[32], uint64_t da, uint64_t db) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
        "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, 1, 1, 1;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),
          "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),
          "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
          "+f"(d[31])
        : "l"(da), "l"(db));
}

// Keeps the compiler from moving accumulator registers across the asynchronous MMAs.
__device__ __forceinline__ void fw_fence_regs(float (&d)[32]) {
#pragma unroll
    for (int i = 0; i < 32; i++) asm volatile("" : "+f"(d[i])::"memory");
}

// Starts copying chunk c of the block's weight rows and activation rows into stage st (rows past
// N or M as zeros). K % 16 == 0.
__device__ __forceinline__ void fw_stage(unsigned char* st, const uint8_t* __restrict__ w,
                                         const uint8_t* __restrict__ x, int fb, int row0, int M,
                                         int N, int K, int c) {
    const int k0 = c * FW_KC;
    // Piece p: 8 consecutive lanes take 8 rows' same 16 bytes (one core matrix row each, so a
    // quarter warp writes 128 contiguous bytes of shared memory), the next 8 the next 16 bytes.
    constexpr int PR = FW_KC / 16;  // pieces a row
#pragma unroll
    for (int j = 0; j < FW_FEATURES * PR / 256; j++) {
        const int p = threadIdx.x + 256 * j;
        const int r = p / (8 * PR) * 8 + (p & 7), kb = (p >> 3) % PR * 16;
        unsigned char* dst = st + fw_off(r, kb, FW_FEATURES);
        if (fb + r < N && k0 + kb < K)
            cp_async16(dst, w + (size_t)(fb + r) * K + k0 + kb);
        else
            *reinterpret_cast<uint4*>(dst) = uint4{};
    }
#pragma unroll
    for (int j = 0; j < FW_ROWS * PR / 256; j++) {
        const int p = threadIdx.x + 256 * j;
        const int r = p / (8 * PR) * 8 + (p & 7), kb = (p >> 3) % PR * 16;
        unsigned char* dst = st + FW_WBYTES + fw_off(r, kb, FW_ROWS);
        if (row0 + r < M && k0 + kb < K)
            cp_async16(dst, x + (size_t)(row0 + r) * K + k0 + kb);
        else
            *reinterpret_cast<uint4*>(dst) = uint4{};
    }
}

// y [M, N] f32 = (xq * xscale) . (w * wscale)^T; with gridDim.z > 1, partial sums times xscale
// to parts [gridDim.z, M, N] for gemm_fp8_reduce (which applies wscale). Grid (ceil(M / 64),
// ceil(N / 256), parts), 256 threads, FW_STAGES * FW_STAGE_BYTES of dynamic shared memory.
extern "C" __global__ void __launch_bounds__(256, FW_MIN_BLOCKS)
    fw_gemm(const uint8_t* __restrict__ w, const float* __restrict__ wscale,
            const uint8_t* __restrict__ xq, const float* __restrict__ xscale,
            float* __restrict__ y, float* __restrict__ parts, int M, int N, int K,
            int chunks_per_split) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(128) unsigned char fw_smem[];
    const int wg = threadIdx.x >> 7;
    const int row0 = blockIdx.x * FW_ROWS, fb = blockIdx.y * FW_FEATURES;
    const int chunks = (K + FW_KC - 1) / FW_KC;
    const int c_begin = blockIdx.z * chunks_per_split;
    const int n = max(0, min(c_begin + chunks_per_split, chunks) - c_begin);
    for (int s = 0; s < FW_STAGES - 1; s++) {
        if (s < n) fw_stage(fw_smem + s * FW_STAGE_BYTES, w, xq, fb, row0, M, N, K, c_begin + s);
        cp_async_commit();
    }
    float acc[2][32];
#pragma unroll
    for (int t = 0; t < 2; t++)
#pragma unroll
        for (int i = 0; i < 32; i++) acc[t][i] = 0.f;
    for (int i = 0; i < n; i++) {
        cp_async_wait<FW_STAGES - 2>();
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
        const int next = i + FW_STAGES - 1;
        if (next < n)
            fw_stage(fw_smem + (next % FW_STAGES) * FW_STAGE_BYTES, w, xq, fb, row0, M, N, K,
                     c_begin + next);
        cp_async_commit();
        const unsigned char* st = fw_smem + (i % FW_STAGES) * FW_STAGE_BYTES;
        fw_fence_regs(acc[0]);
        fw_fence_regs(acc[1]);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int s = 0; s < FW_KC / 32; s++) {
            const uint64_t db =
                fw_desc(st + FW_WBYTES + (2 * s) * (FW_ROWS / 8) * 128, (FW_ROWS / 8) * 128, 128);
#pragma unroll
            for (int t = 0; t < 2; t++) {
                const int f = 128 * wg + 64 * t;
                const uint64_t da = fw_desc(st + ((2 * s) * (FW_FEATURES / 8) + f / 8) * 128,
                                            (FW_FEATURES / 8) * 128, 128);
                fw_mma(acc[t], da, db);
            }
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        fw_fence_regs(acc[0]);
        fw_fence_regs(acc[1]);
    }
    // acc[t][4 j + e]: feature fb + 128 wg + 64 t + 16 (warp % 4) + g (+ 8 for e >= 2), row
    // row0 + 8 j + 2 q + e % 2.
    const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3, w4 = (threadIdx.x >> 5) & 3;
    float* out = gridDim.z > 1 ? parts + (size_t)blockIdx.z * M * N : y;
#pragma unroll
    for (int t = 0; t < 2; t++)
#pragma unroll
        for (int i = 0; i < 32; i++) {
            const int j = i >> 2, e = i & 3;
            const int f = fb + 128 * wg + 64 * t + 16 * w4 + g + (e >= 2 ? 8 : 0);
            const int r = row0 + 8 * j + 2 * q + (e & 1);
            if (f < N && r < M) {
                const float v = acc[t][i] * xscale[r];
                out[(size_t)r * N + f] = gridDim.z > 1 ? v : v * wscale[f];
            }
        }
#endif
}

// Each row of x [M, K] bf16 as fp8 e4m3 with a scale of its own, as the engine quantizes fp8
// weights: xscale[r] = max |x[r]| / 448 (1 for a zero row), xq[r] = x[r] * (1 / xscale[r])
// rounded to the nearest e4m3 (ties to even, saturating). One block a row, K % 8 == 0.
extern "C" __global__ void fw_quantize_rows(const bf16* __restrict__ x, uint8_t* __restrict__ xq,
                                            float* __restrict__ xscale, int K) {
    const bf16* row = x + (size_t)blockIdx.x * K;
    float m = 0.f;
    for (int i = threadIdx.x * 8; i < K; i += blockDim.x * 8) {
        float f[8];
        bf16x8_to_f32(*reinterpret_cast<const uint4*>(row + i), f);
#pragma unroll
        for (int j = 0; j < 8; j++) m = fmaxf(m, fabsf(f[j]));
    }
    m = block_max(m);
    const float s = m > 0.f ? m / 448.f : 1.f, inv = 1.f / s;
    if (threadIdx.x == 0) xscale[blockIdx.x] = s;
    for (int i = threadIdx.x * 8; i < K; i += blockDim.x * 8) {
        float f[8];
        bf16x8_to_f32(*reinterpret_cast<const uint4*>(row + i), f);
        uint32_t b[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            uint32_t v = 0;
#pragma unroll
            for (int j = 0; j < 2; j++)
                v |= (uint32_t)__nv_cvt_float2_to_fp8x2(
                         make_float2(f[4 * h + 2 * j] * inv, f[4 * h + 2 * j + 1] * inv),
                         __NV_SATFINITE, __NV_E4M3)
                     << (16 * j);
            b[h] = v;
        }
        *reinterpret_cast<uint2*>(xq + (size_t)blockIdx.x * K + i) = make_uint2(b[0], b[1]);
    }
}
