// Experiment: fp8 weights times fp8 activations (W8A8, a scale a weight row and a scale an
// activation row) on Hopper's warpgroup MMA (wgmma m64nNk32 e4m3, sm_90a), for 9-128 rows.
// mma.sync's m16n8k32 e4m3 is not a tensor-core instruction on sm_90 (ptxas lowers it to f16
// HMMAs plus FADDs), so on an H100 fp8 products need wgmma. Timed against gemm_fp8 and
// the engine's W8A16 kernels by fp8_gemm_bench.cu; not part of the engine.
//
// A block is two warpgroups over 256 weight rows (features) and 64 activation rows; each
// warpgroup multiplies two 64-feature tiles by the rows (wgmma n = 16, 32 or 64 as the rows
// need). K goes in FW_KC = 128-byte chunks (a block-tiled read in 128-byte runs a row reaches
// ~88% of the copy rate, 64-byte runs ~59%: read_pattern_bench.cu) through a cp.async pipeline
// of FW_STAGES stages into wgmma's canonical K-major layout with the 128-byte swizzle: row r's
// 128 bytes at r * 128, its 16-byte piece c at slot c ^ (r % 8), so a row's copies hit every
// bank once and the hardware reads 8-row groups 1024 bytes apart. Both operands come from
// shared memory: no instruction of the block touches a weight. A chunk's products run while
// the next chunk's barrier and copies are issued (wgmma.wait_group 1).
#pragma once
#include <stdint.h>

#define FW_FEATURES 256
#define FW_ROWS 64
#define FW_KC 128
#ifndef FW_STAGES
#define FW_STAGES 5
#endif
#define FW_WBYTES (FW_FEATURES * FW_KC)
#define FW_STAGE_BYTES (FW_WBYTES + FW_ROWS * FW_KC)
// Dynamic shared memory the kernel asks for: the stages plus room to align them to 1024 bytes.
#define FW_SMEM (FW_STAGES * FW_STAGE_BYTES + 1024)

__device__ __forceinline__ int fw_off(int r, int c) { return r * FW_KC + ((c ^ (r & 7)) << 4); }

// A shared-memory matrix descriptor, K-major with the 128-byte swizzle: start address, 8-row
// groups 1024 bytes apart (the leading offset is unused in this layout).
__device__ __forceinline__ uint64_t fw_desc(const void* p) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    return (uint64_t)((a & 0x3ffff) >> 4) | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) |
           (1ull << 62);
}

template <int NT>
__device__ __forceinline__ void fw_mma(float (&d)[NT * 4], uint64_t da, uint64_t db);
#define FW_D4(i) "+f"(d[4 * i]), "+f"(d[4 * i + 1]), "+f"(d[4 * i + 2]), "+f"(d[4 * i + 3])
template <>
__device__ __forceinline__ void fw_mma<2>(float (&d)[8], uint64_t da, uint64_t db) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 "
        "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, 1, 1, 1;\n"
        : FW_D4(0), FW_D4(1)
        : "l"(da), "l"(db));
}
template <>
__device__ __forceinline__ void fw_mma<4>(float (&d)[16], uint64_t da, uint64_t db) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, 1, "
        "1, 1;\n"
        : FW_D4(0), FW_D4(1), FW_D4(2), FW_D4(3)
        : "l"(da), "l"(db));
}
template <>
__device__ __forceinline__ void fw_mma<8>(float (&d)[32], uint64_t da, uint64_t db) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
        "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, 1, 1, 1;\n"
        : FW_D4(0), FW_D4(1), FW_D4(2), FW_D4(3), FW_D4(4), FW_D4(5), FW_D4(6), FW_D4(7)
        : "l"(da), "l"(db));
}
#undef FW_D4

// Keeps the compiler from moving accumulator registers across the asynchronous MMAs.
template <int R>
__device__ __forceinline__ void fw_hold(float (&d)[2][R]) {
#pragma unroll
    for (int t = 0; t < 2; t++)
#pragma unroll
        for (int i = 0; i < R; i++) asm volatile("" : "+f"(d[t][i])::"memory");
}

// Starts copying chunk c of the block's weight rows and activation rows into stage st (rows
// past N or M and bytes past K as zeros). Piece p of a tile: row p / 8, bytes 16 (p % 8) ..,
// so 8 consecutive threads read one row's 128 bytes. K % 16 == 0.
__device__ __forceinline__ void fw_stage(unsigned char* st, const uint8_t* __restrict__ w,
                                         const uint8_t* __restrict__ x, int fb, int row0, int M,
                                         int N, int K, int c) {
    const int k0 = c * FW_KC + (threadIdx.x & 7) * 16;
    const int c16 = threadIdx.x & 7, r0 = threadIdx.x >> 3;
#pragma unroll
    for (int j = 0; j < FW_FEATURES / 32; j++) {
        const int r = r0 + 32 * j;
        unsigned char* dst = st + fw_off(r, c16);
        if (fb + r < N && k0 < K)
            cp_async16(dst, w + (size_t)(fb + r) * K + k0);
        else
            *reinterpret_cast<uint4*>(dst) = uint4{};
    }
#pragma unroll
    for (int j = 0; j < FW_ROWS / 32; j++) {
        const int r = r0 + 32 * j;
        unsigned char* dst = st + FW_WBYTES + fw_off(r, c16);
        if (row0 + r < M && k0 < K)
            cp_async16(dst, x + (size_t)(row0 + r) * K + k0);
        else
            *reinterpret_cast<uint4*>(dst) = uint4{};
    }
}

// The block's n chunks from c_begin, multiplied into acc with wgmma n = 8 NT.
template <int NT>
__device__ __forceinline__ void fw_mainloop(float (&acc)[2][NT * 4], unsigned char* smem,
                                            const uint8_t* __restrict__ w,
                                            const uint8_t* __restrict__ x, int fb, int row0,
                                            int M, int N, int K, int c_begin, int n) {
    const int wg = threadIdx.x >> 7;
    // Chunk i + FW_STAGES - 2 is copied while chunk i's products run and chunk i - 1's may still.
    for (int s = 0; s < FW_STAGES - 2; s++) {
        if (s < n) fw_stage(smem + s * FW_STAGE_BYTES, w, x, fb, row0, M, N, K, c_begin + s);
        cp_async_commit();
    }
    for (int i = 0; i < n; i++) {
        cp_async_wait<FW_STAGES - 3>();  // this thread's copies of chunk i are in
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // for wgmma's reads
        // Every thread's copies of chunk i are in, and every warpgroup is done with chunk i - 2.
        __syncthreads();
        const int next = i + FW_STAGES - 2;
        if (next < n)
            fw_stage(smem + (next % FW_STAGES) * FW_STAGE_BYTES, w, x, fb, row0, M, N, K,
                     c_begin + next);
        cp_async_commit();
        const unsigned char* st = smem + (i % FW_STAGES) * FW_STAGE_BYTES;
        fw_hold(acc);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int s = 0; s < FW_KC / 32; s++) {
            const uint64_t db = fw_desc(st + FW_WBYTES + 32 * s);
#pragma unroll
            for (int t = 0; t < 2; t++)
                fw_mma<NT>(acc[t], fw_desc(st + (128 * wg + 64 * t) * FW_KC + 32 * s), db);
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        fw_hold(acc);
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    fw_hold(acc);
}

// acc[t][4 j + e]: feature fb + 128 wg + 64 t + 16 (warp % 4) + g (+ 8 for e >= 2), row
// row0 + 8 j + 2 q + e % 2.
template <int NT>
__device__ __forceinline__ void fw_write(const float (&acc)[2][NT * 4], const float* wscale,
                                         const float* xscale, float* out, bool partial, int fb,
                                         int row0, int M, int N) {
    const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3, w4 = (threadIdx.x >> 5) & 3;
    const int wg = threadIdx.x >> 7;
#pragma unroll
    for (int t = 0; t < 2; t++)
#pragma unroll
        for (int i = 0; i < NT * 4; i++) {
            const int j = i >> 2, e = i & 3;
            const int f = fb + 128 * wg + 64 * t + 16 * w4 + g + (e >= 2 ? 8 : 0);
            const int r = row0 + 8 * j + 2 * q + (e & 1);
            if (f < N && r < M) {
                const float v = acc[t][i] * xscale[r];
                out[(size_t)r * N + f] = partial ? v : v * wscale[f];
            }
        }
}

// y [M, N] f32 = (xq * xscale) . (w * wscale)^T; with gridDim.z > 1, partial sums times xscale
// to parts [gridDim.z, M, N] for gemm_fp8_reduce (which applies wscale). Grid (ceil(M / 64),
// ceil(N / 256), parts), 256 threads, FW_SMEM bytes of dynamic shared memory.
extern "C" __global__ void __launch_bounds__(256, 1)
    fw_gemm(const uint8_t* __restrict__ w, const float* __restrict__ wscale,
            const uint8_t* __restrict__ xq, const float* __restrict__ xscale,
            float* __restrict__ y, float* __restrict__ parts, int M, int N, int K,
            int chunks_per_split) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(1024) unsigned char fw_raw[];
    unsigned char* smem = fw_raw + ((1024 - (__cvta_generic_to_shared(fw_raw) & 1023)) & 1023);
    const int row0 = blockIdx.x * FW_ROWS, fb = blockIdx.y * FW_FEATURES;
    const int live = min(M - row0, FW_ROWS);
    const int chunks = (K + FW_KC - 1) / FW_KC;
    const int c_begin = blockIdx.z * chunks_per_split;
    const int n = max(0, min(c_begin + chunks_per_split, chunks) - c_begin);
    const bool partial = gridDim.z > 1;
    float* out = partial ? parts + (size_t)blockIdx.z * M * N : y;
    if (live <= 16) {
        float acc[2][8] = {};
        fw_mainloop<2>(acc, smem, w, xq, fb, row0, M, N, K, c_begin, n);
        fw_write<2>(acc, wscale, xscale, out, partial, fb, row0, M, N);
    } else if (live <= 32) {
        float acc[2][16] = {};
        fw_mainloop<4>(acc, smem, w, xq, fb, row0, M, N, K, c_begin, n);
        fw_write<4>(acc, wscale, xscale, out, partial, fb, row0, M, N);
    } else {
        float acc[2][32] = {};
        fw_mainloop<8>(acc, smem, w, xq, fb, row0, M, N, K, c_begin, n);
        fw_write<8>(acc, wscale, xscale, out, partial, fb, row0, M, N);
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
