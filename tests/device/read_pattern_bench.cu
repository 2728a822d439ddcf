// How fast a block-tiled GEMM can read a weight matrix W [N, K] of bytes (fp8) at all, with no
// products: blocks of R rows, K in chunks of C bytes split into parts as gemm_fp8 splits it,
// each chunk copied by cp.async through S shared-memory stages (gemm_fp8's pipeline), for the
// row-major layout (a chunk is R runs of C bytes, K bytes apart) against a tiled one (a chunk is
// R * C contiguous bytes). Shape: Qwen3-8B's gate+up in fp8 (24576 x 4096), rotated over copies
// larger than L2. Against a plain copy.
//
// Build and run on the GPU machine: tests/device/run.sh readpat.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <algorithm>
#include <vector>

#include "check.cuh"

__device__ __forceinline__ void rp_cp16(void* smem, const void* gmem) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(a), "l"(gmem));
}
template <int N>
__device__ __forceinline__ void rp_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Grid (N / R, parts), 256 threads, S * (R * C + XR * 2 * C) bytes of dynamic shared memory.
// XR > 0: each chunk also copies XR activation rows of 2 * C bytes (bf16, K values a row apart,
// L2-resident) after the weights, as gemm_fp8_wg (before gemm_fp8_tma) did.
template <int R, int C, int S, bool TILED, int XR = 0>
__global__ void __launch_bounds__(256) read_tiles(const uint8_t* __restrict__ w, int K, int per,
                                                  unsigned* sink, const uint8_t* __restrict__ x) {
    extern __shared__ __align__(16) unsigned char rp_smem[];
    constexpr int PIECES = R * C / 16 / 256;  // a thread's 16-byte pieces a chunk
    constexpr int XPIECES = XR * 2 * C / 16 / 256;
    constexpr int STAGE = R * C + XR * 2 * C;
    const int fb = blockIdx.x * R, chunks = K / C;
    const int c0 = blockIdx.y * per, n = max(0, min(c0 + per, chunks) - c0);
    auto stage = [&](int c, int s) {
#pragma unroll
        for (int j = 0; j < PIECES; j++) {
            const int p = threadIdx.x + 256 * j;
            const uint8_t* src =
                TILED ? w + ((size_t)blockIdx.x * chunks + c) * R * C + p * 16
                      : w + (size_t)(fb + p / (C / 16)) * K + (size_t)c * C + p % (C / 16) * 16;
            rp_cp16(rp_smem + s * STAGE + p * 16, src);
        }
#pragma unroll
        for (int j = 0; j < XPIECES; j++) {
            const int p = threadIdx.x + 256 * j;
            rp_cp16(rp_smem + s * STAGE + R * C + p * 16,
                    x + (size_t)(p / (2 * C / 16)) * K * 2 + (size_t)c * 2 * C + p % (2 * C / 16) * 16);
        }
    };
    for (int s = 0; s < S - 1; s++) {
        if (s < n) stage(c0 + s, s);
        asm volatile("cp.async.commit_group;\n");
    }
    unsigned acc = 0;
    for (int i = 0; i < n; i++) {
        rp_wait<S - 2>();
        __syncthreads();
        if (i + S - 1 < n) stage(c0 + i + S - 1, (i + S - 1) % S);
        asm volatile("cp.async.commit_group;\n");
        acc ^= reinterpret_cast<const unsigned*>(rp_smem + (i % S) * STAGE)[threadIdx.x];
    }
    if (acc == 0x12345678u) sink[0] = acc;
}

int main() {
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const double rate = copy_rate();
    printf("copy rate %.2f TB/s, %d SMs\n", rate / 1e12, sms);
    const int N = 24576, K = 4096;
    const size_t bytes = (size_t)N * K;
    const int copies = 3;
    std::vector<uint8_t*> w(copies);
    for (auto& p : w) {
        CK(cudaMalloc(&p, bytes));
        CK(cudaMemset(p, 1, bytes));
    }
    unsigned* sink;
    CK(cudaMalloc(&sink, 4));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    uint8_t* xact;  // 64 activation rows of K bf16
    CK(cudaMalloc(&xact, (size_t)64 * K * 2));
    CK(cudaMemset(xact, 1, (size_t)64 * K * 2));
    // parts_override: K split into that many parts (gemm_fp8_wg's 4 for this shape, before
    // gemm_fp8_tma); xr: the kernel's activation rows.
    auto run = [&](auto kernel, int R, int C, int S, bool tiled, int blocks_per_sm,
                   int parts_override = 0, int xr = 0) {
        // One block an SM asked for: enough shared memory that a second does not fit.
        const int smem = std::max(S * (R * C + xr * 2 * C), blocks_per_sm == 1 ? 120 << 10 : 0);
        CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        int fit;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, kernel, 256, smem));
        const int per_sm = std::min(fit, blocks_per_sm);
        const int fblocks = N / R, chunks = K / C;
        const int parts0 = parts_override
                               ? parts_override
                               : std::min(std::max(sms * per_sm / fblocks, 1), chunks);
        const int per = (chunks + parts0 - 1) / parts0, parts = (chunks + per - 1) / per;
        const dim3 grid(fblocks, parts);
        for (int i = 0; i < 4; i++) kernel<<<grid, 256, smem>>>(w[i % copies], K, per, sink, xact);
        CK(cudaGetLastError());
        const int reps = 30;
        CK(cudaEventRecord(e0));
        for (int i = 0; i < reps; i++) kernel<<<grid, 256, smem>>>(w[i % copies], K, per, sink, xact);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        const double us = ms * 1e3 / reps;
        printf("%-6s R=%3d C=%3d S=%d  x rows %2d  %d blocks (%d an SM fit, %d used)  %6.1f us  "
               "%5.1f%% of the copy rate\n",
               tiled ? "tiled" : "rows", R, C, S, xr, fblocks * parts, fit, per_sm, us,
               100.0 * bytes / rate / (us * 1e-6));
    };
    // gemm_fp8's tiling (256 rows, 64-byte chunks, 3 stages, 2 blocks an SM) and neighbours.
    run(read_tiles<256, 64, 3, false>, 256, 64, 3, false, 2);
    run(read_tiles<256, 64, 3, true>, 256, 64, 3, true, 2);
    run(read_tiles<256, 64, 6, false>, 256, 64, 6, false, 2);
    run(read_tiles<256, 128, 3, false>, 256, 128, 3, false, 2);
    run(read_tiles<256, 128, 3, true>, 256, 128, 3, true, 2);
    run(read_tiles<256, 256, 3, false>, 256, 256, 3, false, 1);
    run(read_tiles<128, 128, 3, false>, 128, 128, 3, false, 4);
    run(read_tiles<128, 256, 3, false>, 128, 256, 3, false, 2);
    run(read_tiles<64, 512, 3, false>, 64, 512, 3, false, 2);
    run(read_tiles<64, 256, 4, false>, 64, 256, 4, false, 4);
    run(read_tiles<256, 64, 3, false>, 256, 64, 3, false, 1);
    // gemm_fp8_wg's shape of work (before gemm_fp8_tma): 128-byte chunks, 3 stages, one block
    // an SM, gate+up in 4 parts (3 waves); then with its 64 activation rows copied beside the
    // weights.
    run(read_tiles<256, 128, 3, false>, 256, 128, 3, false, 1, 4);
    run(read_tiles<256, 128, 3, false, 64>, 256, 128, 3, false, 1, 4, 64);
    run(read_tiles<256, 128, 3, false, 64>, 256, 128, 3, false, 1, 0, 64);
    run(read_tiles<256, 128, 3, false>, 256, 128, 3, false, 2, 4);
    return 0;
}
