// fp8 weight matrices at 16-128 rows, alone: gemm_fp8 (W8A16, mma.sync f16), gemm_fp8_tma (the
// same on wgmma with TMA copies, the engine's on sm_90a, launched as the engine does: the
// parts of a tile in one cluster, split as kernels/gemm_fp8.rs's split_clusters does), against
// the wgmma W8A8 experiment (fp8_wgmma_experiment.cu, with its activation quantization timed
// apart), at Qwen3-8B's shapes, as read rates of the fp8 bytes against a plain copy. Weights
// rotate over copies larger than L2. Each kernel's output is checked against a plain f32 loop
// over the same fp8 (and, for W8A8, quantized) values.
//
// Build and run on the GPU machine: tests/device/run.sh fp8k (nvcc -O3 -arch=sm_90a -lcuda);
// gemm_fp8_tma's bench settings: -DFT_STAGES=N, -DFT_NO_MATH (the copies alone),
// -DFT_TIMELINE (each block's entry, first stage, main loop and epilogue, one launch alone).
#include <cuda.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <algorithm>
#include <vector>

#include "../../engine/kernels/cu/gemm_fp8.cu"
#include "../../engine/kernels/cu/gemm_fp8_tma.cu"
#include "fp8_wgmma_experiment.cu"

#include "check.cuh"

// Random e4m3 bytes (no NaN codes).
__global__ void fill_fp8(uint8_t* w, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const unsigned h = bench_hash(i, seed);
        uint8_t b = ((h ^ h >> 13) >> 8) & 0xff;
        if ((b & 0x7f) == 0x7f) b ^= 1;
        w[i] = b;
    }
}
__global__ void fill_scale(float* s, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        s[i] = 1e-3f * (1 + i % 7);
}

__device__ float e4m3f(uint8_t b) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(b, __NV_E4M3);
    return __half2float(*reinterpret_cast<const __half*>(&h));
}

// ref[m][n] = ws[n] * sum_k w[n][k] * x[m][k], x bf16 (xq null) or fp8 xq times xs[m].
__global__ void ref_gemm(const uint8_t* w, const float* ws, const bf16* x, const uint8_t* xq,
                         const float* xs, float* ref, int M, int N, int K) {
    const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)M * N) return;
    const int m = i / N, n = i % N;
    float s = 0.f;
    for (int k = 0; k < K; k++) {
        const float a = xq ? e4m3f(xq[(size_t)m * K + k]) : __bfloat162float(x[(size_t)m * K + k]);
        s += a * e4m3f(w[(size_t)n * K + k]);
    }
    ref[i] = s * ws[n] * (xq ? xs[m] : 1.f);
}

static float max_rel(const std::vector<float>& a, const std::vector<float>& b) {
    float top = 0.f, d = 0.f;
    for (size_t i = 0; i < a.size(); i++) {
        top = std::max(top, fabsf(b[i]));
        d = std::max(d, fabsf(a[i] - b[i]));
    }
    return d / std::max(top, 1e-30f);
}

// gemm_fp8's K split (kernels/gemm_fp8.rs): (parts, chunks a part).
static void split(int n, int k, int target, int* parts, int* per, int kc, int features) {
    const int blocks = (n + features - 1) / features, chunks = (k + kc - 1) / kc;
    int p = std::min(std::max(target / blocks, 1), chunks);
    *per = (chunks + p - 1) / p;
    *parts = (chunks + *per - 1) / *per;
}

// The W8A8 experiment's K split (gemm_fp8_wg's before its clusters): the parts that finish
// soonest in whole waves of `slots` blocks, the fewest of those.
static void split_waves(int n, int k, int slots, int* parts, int* per, int kc, int features) {
    const int ramp = 1;  // chunks a block's pipeline ramp costs
    const int blocks = (n + features - 1) / features, chunks = (k + kc - 1) / kc;
    long best = -1;
    for (int p = 1; p <= chunks; p++) {
        const int pp = (chunks + p - 1) / p, np = (chunks + pp - 1) / pp;
        const long cost = (long)((blocks * np + slots - 1) / slots) * (pp + ramp);
        if (best < 0 || cost < best) best = cost, *parts = np, *per = pp;
    }
}

// A 2D TMA descriptor with the 128-byte swizzle, zeros out of bounds (gemm_fp8_tma's maps).
static FtTensorMap tensor_map(const void* p, CUtensorMapDataType type, uint64_t inner,
                              uint64_t outer, uint64_t row_bytes, uint32_t box0, uint32_t box1) {
    static_assert(sizeof(FtTensorMap) == sizeof(CUtensorMap), "a CUtensorMap");
    FtTensorMap m;
    const cuuint64_t dims[2] = {inner, outer}, strides[1] = {row_bytes};
    const cuuint32_t box[2] = {box0, box1}, es[2] = {1, 1};
    const CUresult r = cuTensorMapEncodeTiled(
        reinterpret_cast<CUtensorMap*>(&m), type, 2, const_cast<void*>(p), dims, strides, box, es,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "cuTensorMapEncodeTiled: %d\n", (int)r);
        exit(1);
    }
    return m;
}

// A launch of gemm_fp8_tma's blocks over `grid` whose clusters span the grid's z.
struct ClusterLaunch {
    cudaLaunchAttribute at[1];
    cudaLaunchConfig_t cfg = {};
    ClusterLaunch(dim3 grid, int smem, int threads = FT_THREADS) {
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = 1;
        at[0].val.clusterDim.y = 1;
        at[0].val.clusterDim.z = grid.z;
        cfg.gridDim = grid;
        cfg.blockDim = dim3(threads);
        cfg.dynamicSmemBytes = smem;
        cfg.attrs = at;
        cfg.numAttrs = 1;
    }
    ClusterLaunch(const ClusterLaunch&) = delete;  // cfg points into this object
};

int main() {
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const double rate = copy_rate();
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float ms;
    printf("copy rate %.2f TB/s, %d SMs\n", rate / 1e12, sms);

    const int fg_smem = 3 * FG_STAGE_BYTES, fw_smem = FW_SMEM;
    CK(cudaFuncSetAttribute(gemm_fp8, cudaFuncAttributeMaxDynamicSharedMemorySize, fg_smem));
    CK(cudaFuncSetAttribute(fw_gemm, cudaFuncAttributeMaxDynamicSharedMemorySize, fw_smem));
    CK(cudaFuncSetAttribute(gemm_fp8_tma, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            FT_SMEM_BYTES));
    CK(cudaFuncSetAttribute(gemm_fp8_tma, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    printf("gemm_fp8_tma: %d features, %d threads, %d stages, %d bytes of shared memory\n",
           FT_FEATURES, FT_THREADS, FT_STAGES, FT_SMEM_BYTES);
    int fg_per_sm, fw_per_sm;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fg_per_sm, gemm_fp8, 256, fg_smem));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fw_per_sm, fw_gemm, 256, fw_smem));
    printf("blocks an SM: gemm_fp8 %d, fw_gemm %d\n", fg_per_sm, fw_per_sm);
    int cluster_slots[9] = {0, sms};
    for (int p = 2; p <= 8; p++) {
        ClusterLaunch cl(dim3(1, 1, p), FT_SMEM_BYTES);
        CK(cudaOccupancyMaxActiveClusters(&cluster_slots[p], gemm_fp8_tma, &cl.cfg));
        printf("gemm_fp8_tma clusters of %d at once: %d (%d blocks)\n", p, cluster_slots[p],
               p * cluster_slots[p]);
    }

    struct Shape { const char* name; int n, k; } shapes[] = {
        {"qkv 6144x4096", 6144, 4096}, {"o 4096x4096", 4096, 4096},
        {"gate+up 24576x4096", 24576, 4096}, {"down 4096x12288", 4096, 12288}};
    const int rows[] = {16, 32, 64, 128};
    const int max_m = 128, max_n = 24576, max_k = 12288;
    bf16* x;
    uint8_t* xq;
    float *xs, *y, *ref, *parts;
    CK(cudaMalloc(&x, (size_t)max_m * max_k * 2));
    CK(cudaMalloc(&xq, (size_t)max_m * max_k));
    CK(cudaMalloc(&xs, max_m * 4));
    CK(cudaMalloc(&y, (size_t)max_m * max_n * 4));
    CK(cudaMalloc(&ref, (size_t)max_m * max_n * 4));
    CK(cudaMalloc(&parts, (size_t)64 * max_m * max_n * 4));
    fill_bf16<<<1024, 256>>>(x, (size_t)max_m * max_k, 5u);
    // FP8K_SHAPE / FP8K_ROWS: only shapes whose name holds the one, rows equal to the other.
    const char* only_shape = getenv("FP8K_SHAPE");
    const int only_rows = getenv("FP8K_ROWS") ? atoi(getenv("FP8K_ROWS")) : 0;
    for (auto& s : shapes) {
        if (only_shape && !strstr(s.name, only_shape)) continue;
        const size_t bytes = (size_t)s.n * s.k;
        const int copies = (int)std::max<size_t>(2, (200ull << 20) / bytes + 1);
        std::vector<uint8_t*> w(copies);
        float* ws;
        CK(cudaMalloc(&ws, s.n * 4));
        fill_scale<<<64, 256>>>(ws, s.n);
        for (int i = 0; i < copies; i++) {
            CK(cudaMalloc(&w[i], bytes));
            fill_fp8<<<1024, 256>>>(w[i], bytes, 17u);
        }
        for (int m : rows) {
            if (only_rows && m != only_rows) continue;
            int fg_parts, fg_per, fw_parts, fw_per;
            split(s.n, s.k, sms * fg_per_sm, &fg_parts, &fg_per, FG_KC, FG_FEATURES);
            split_waves(s.n, s.k, sms * fw_per_sm, &fw_parts, &fw_per, FW_KC, FW_FEATURES);
            const dim3 fg_grid((m + 63) / 64, (s.n + FG_FEATURES - 1) / FG_FEATURES, fg_parts);
            const int red_blocks = std::min((m * s.n + 255) / 256, 4 * sms);
            // gemm_fp8_tma's split (split_clusters): the parts (a cluster a tile, at most 8)
            // whose tiles finish soonest in whole waves of the clusters that fit at once, the
            // fewest of those.
            int cl_parts = 1, cl_per = 0;
            {
                const int tiles = (s.n + FT_FEATURES - 1) / FT_FEATURES;
                const int chunks = (s.k + FT_KC - 1) / FT_KC;
                long best = -1;
                for (int p = 1; p <= 8 && p <= chunks; p++) {
                    if (cluster_slots[p] == 0) continue;
                    const int pp = (chunks + p - 1) / p, np = (chunks + pp - 1) / pp;
                    const long cost =
                        (long)((tiles + cluster_slots[np] - 1) / cluster_slots[np]) * (pp + 1);
                    if (best < 0 || cost < best) best = cost, cl_parts = np, cl_per = pp;
                }
            }
            const dim3 cl_grid((m + 63) / 64, (s.n + FT_FEATURES - 1) / FT_FEATURES, cl_parts);
            // Its copies are described by tensor maps, one for each copy of the weights.
            std::vector<FtTensorMap> wmaps;
            for (auto p : w)
                wmaps.push_back(tensor_map(p, CU_TENSOR_MAP_DATA_TYPE_UINT8, s.k, s.n, s.k,
                                           FT_KC, FT_FEATURES));
            const FtTensorMap xmap =
                tensor_map(x, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, s.k, m, 2 * s.k, 64, 64);
            auto run_ft = [&](int wi) {
                ClusterLaunch cl(cl_grid, FT_SMEM_BYTES);
                CK(cudaLaunchKernelEx(&cl.cfg, gemm_fp8_tma, wmaps[wi], xmap, (const float*)ws,
                                      (void*)y, m, s.n, s.k, cl_per, 0, FtQkv{}));
            };
            const dim3 fw_grid((m + 63) / 64, (s.n + 255) / 256, fw_parts);
            auto run_fg = [&](const uint8_t* wi) {
                gemm_fp8<<<fg_grid, 256, fg_smem>>>(wi, ws, x, y, parts, m, s.n, s.k, fg_per, 3, 0);
                if (fg_parts > 1)
                    gemm_fp8_reduce<<<red_blocks, 256>>>(parts, ws, y, m, s.n, fg_parts, 0);
            };
            auto run_q = [&]() { fw_quantize_rows<<<m, 256>>>(x, xq, xs, s.k); };
            auto run_fw = [&](const uint8_t* wi) {
                fw_gemm<<<fw_grid, 256, fw_smem>>>(wi, ws, xq, xs, y, parts, m, s.n, s.k, fw_per);
                if (fw_parts > 1)
                    gemm_fp8_reduce<<<red_blocks, 256>>>(parts, ws, y, m, s.n, fw_parts, 0);
            };
            std::vector<float> hy((size_t)m * s.n), hr((size_t)m * s.n);
            const int ref_blocks = (int)(((size_t)m * s.n + 255) / 256);
            // Checks.
            run_fg(w[0]);
            CK(cudaGetLastError());
            ref_gemm<<<ref_blocks, 256>>>(w[0], ws, x, nullptr, nullptr, ref, m, s.n, s.k);
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(hy.data(), y, hy.size() * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(hr.data(), ref, hr.size() * 4, cudaMemcpyDeviceToHost));
            const float d16 = max_rel(hy, hr);
            CK(cudaMemset(y, 0, hy.size() * 4));
            run_ft(0);
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize());
            std::vector<float> ht((size_t)m * s.n);
            CK(cudaMemcpy(ht.data(), y, ht.size() * 4, cudaMemcpyDeviceToHost));
            const float dt = max_rel(ht, hr);
            run_q();
            run_fw(w[0]);
            CK(cudaGetLastError());
            ref_gemm<<<ref_blocks, 256>>>(w[0], ws, x, xq, xs, ref, m, s.n, s.k);
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(hy.data(), y, hy.size() * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(hr.data(), ref, hr.size() * 4, cudaMemcpyDeviceToHost));
            const float d8 = max_rel(hy, hr);
            // W8A8 against W8A16's reference: what quantizing the activations costs.
            std::vector<float> h16((size_t)m * s.n);
            ref_gemm<<<ref_blocks, 256>>>(w[0], ws, x, nullptr, nullptr, ref, m, s.n, s.k);
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(h16.data(), ref, h16.size() * 4, cudaMemcpyDeviceToHost));
            const float dq = max_rel(hr, h16);
            // Timing.
            const int reps = 40;
            auto time = [&](auto f) {
                for (int i = 0; i < 4; i++) f(i);
                CK(cudaEventRecord(e0));
                for (int i = 0; i < reps; i++) f(i);
                CK(cudaEventRecord(e1));
                CK(cudaEventSynchronize(e1));
                CK(cudaEventElapsedTime(&ms, e0, e1));
                return ms * 1e3 / reps;
            };
            const double t16 = time([&](int i) { run_fg(w[i % copies]); });
            const double t16k = time([&](int i) {
                gemm_fp8<<<fg_grid, 256, fg_smem>>>(w[i % copies], ws, x, y, parts, m, s.n, s.k,
                                                    fg_per, 3, 0);
            });
            const double tt = time([&](int i) { run_ft(i % copies); });
            const double tq = time([&](int) { run_q(); });
            const double t8 = time([&](int i) { run_fw(w[i % copies]); });
            const double ideal = bytes / rate * 1e6;
            printf("%-20s m=%3d  gemm_fp8 %7.1f us (%4.1f%%, %d parts, err %.1e; %.1f us without "
                   "the reduce)  wgmma a8 %7.1f us (%4.1f%%, %d parts, err %.1e) + quantize %5.1f us; "
                   "a8 vs a16 values %.1e\n",
                   s.name, m, t16, 100 * ideal / t16, fg_parts, d16, t16k, t8, 100 * ideal / t8,
                   fw_parts, d8, tq, dq);
            printf("%-20s m=%3d  gemm_fp8_tma %7.1f us (%4.1f%%, %d parts, err %.1e)\n", s.name, m,
                   tt, 100 * ideal / tt, cl_parts, dt);
#ifdef FT_TIMELINE
            {
                // One more launch alone: each block's entry, first stage, main loop end and
                // end, relative to the first entry (us).
                CK(cudaDeviceSynchronize());
                run_ft(0);
                CK(cudaDeviceSynchronize());
                static unsigned long long tl[1024][4];
                CK(cudaMemcpyFromSymbol(tl, ft_tl, sizeof(tl)));
                const int blocks = cl_grid.x * cl_grid.y * cl_grid.z;
                unsigned long long t0 = ~0ull, t3 = 0;
                double sum[3] = {}, top[3] = {}, last_start = 0;
                for (int b = 0; b < blocks; b++) t0 = std::min(t0, tl[b][0]), t3 = std::max(t3, tl[b][3]);
                for (int b = 0; b < blocks; b++) {
                    last_start = std::max(last_start, (tl[b][0] - t0) * 1e-3);
                    for (int j = 0; j < 3; j++) {
                        const double d = (tl[b][j + 1] - tl[b][j]) * 1e-3;
                        sum[j] += d, top[j] = std::max(top[j], d);
                    }
                }
                printf("  timeline: %d blocks, whole %.1f us, last entry %.1f us; first stage %.1f "
                       "(max %.1f), main loop %.1f (max %.1f), epilogue %.1f (max %.1f) us\n",
                       blocks, (t3 - t0) * 1e-3, last_start, sum[0] / blocks, top[0],
                       sum[1] / blocks, top[1], sum[2] / blocks, top[2]);
            }
#endif
        }
        for (auto p : w) CK(cudaFree(p));
        CK(cudaFree(ws));
    }
    return 0;
}
