// Decode GEMV kernels alone: gemv.cu's CUDA-core kernels against gemv_tc.cu's tensor-core ones
// at Qwen3-8B's and GLM-4.7-Flash's shapes, 1 and 8 rows, as read rates against a plain copy.
// Weights rotate over copies larger than L2, so every launch reads DRAM. The CUDA-core kernel
// launches as the backend does; the tensor-core one over its tiles a warp and warps a block.
// Outputs are compared between the two kernels.
//
// Build and run on the GPU machine: tests/device/run.sh gemvk (nvcc -O3 -arch=sm_90a).
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <vector>

#include "../../engine/kernels/cu/gemv.cu"
#include "gemv_tc_experiment.cu"

#include "check.cuh"

// The backend's choice of features a block (kernels/gemv.rs) for the CUDA-core kernel.
static int scalar_r(int n, int m) { return n >= 4096 ? (m >= 2 ? 8 : 4) : n >= 2048 ? 2 : 1; }

typedef void (*ScalarFn)(const bf16*, const float*, const float*, const float*, float*, int, int,
                         int);
typedef void (*TcFn)(const bf16*, const float*, const float*, float*, int, int, int, int);

int main() {
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    struct Shape { const char* name; int n, k; } shapes[] = {
        {"qwen3 o-proj", 4096, 4096}, {"qwen3 qkv", 6144, 4096}, {"qwen3 down", 4096, 12288},
        {"qwen3 gate+up", 24576, 4096}, {"glm o-proj", 2048, 5120}, {"glm q_a+kv_a", 1344, 2048},
        {"glm q_b", 5120, 768}, {"head 151936", 151936, 4096}};
    const double rate = copy_rate();
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float ms;
    printf("copy rate %.2f TB/s, %d SMs\n", rate / 1e12, sms);

    float *x, *y0, *y1;
    CK(cudaMalloc(&x, 8 * 151936 * 4));
    CK(cudaMalloc(&y0, 8 * 151936 * 4));
    CK(cudaMalloc(&y1, 8 * 151936 * 4));
    {
        std::vector<float> h(8 * 12288);
        for (size_t i = 0; i < h.size(); i++) h[i] = sinf(i * 0.37f);
        CK(cudaMemcpy(x, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    }
    ScalarFn scalar1[4] = {gemv_bf16_1_1, gemv_bf16_1_2, gemv_bf16_1_4, gemv_bf16_1_8};
    ScalarFn scalar8[4] = {gemv_bf16_8_1, gemv_bf16_8_2, gemv_bf16_8_4, gemv_bf16_8_8};
    TcFn tc[3] = {gemv_tc_1, gemv_tc_2, gemv_tc_4};
    for (auto& s : shapes) {
        const size_t bytes = (size_t)s.n * s.k * 2;
        const int copies = (int)std::max<size_t>(2, (200ull << 20) / bytes + 1);
        std::vector<bf16*> w(copies);
        for (int i = 0; i < copies; i++) {
            CK(cudaMalloc(&w[i], bytes));
            fill_bf16<<<1024, 256>>>(w[i], bytes / 2, 17u);
        }
        auto time = [&](auto&& launch) {
            for (int i = 0; i < copies; i++) launch(i);
            CK(cudaEventRecord(e0));
            const int reps = 20 * copies;
            for (int i = 0; i < reps; i++) launch(i);
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            CK(cudaEventElapsedTime(&ms, e0, e1));
            CK(cudaGetLastError());
            return ms * 1e3 / reps;
        };
        auto pct = [&](double us) { return 100.0 * bytes / (us * 1e-6) / rate; };
        for (int m : {1, 8}) {
            const int r = scalar_r(s.n, m), ri = r == 1 ? 0 : r == 2 ? 1 : r == 4 ? 2 : 3;
            const double us0 = time([&](int i) {
                (m == 1 ? scalar1 : scalar8)[ri]<<<(s.n + r - 1) / r, 128>>>(
                    w[i % copies], nullptr, x, nullptr, y0, s.n, s.k, 0);
            });
            printf("%-14s m=%d  cuda cores R=%d %7.1f us %5.1f%%  | tensor cores (T, warps):", s.name, m,
                   r, us0, pct(us0));
            double best = 1e30;
            for (int ti = 0; ti < 3; ti++) {
                if (s.n % (8 << ti)) continue;
                for (int warps : {1, 2, 4, 8}) {
                    if (warps << ti > 8 || warps > s.k / 32) continue;
                    const int blocks = s.n / (8 << ti);
                    const int smem = warps * (1 << ti) * 2 * 8 * (4 * 64 + 64);
                    const double us = time([&](int i) {
                        tc[ti]<<<blocks, 32 * warps, smem>>>(w[i % copies], x, nullptr, y1, m, s.n,
                                                             s.k, 0);
                    });
                    best = std::min(best, us);
                    printf(" %d,%d %.1f%%", 1 << ti, warps, pct(us));
                }
            }
            std::vector<float> a((size_t)m * s.n), b((size_t)m * s.n);
            CK(cudaMemcpy(a.data(), y0, a.size() * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(b.data(), y1, b.size() * 4, cudaMemcpyDeviceToHost));
            double dmax = 0, amax = 1e-6;
            for (size_t i = 0; i < a.size(); i++) {
                dmax = fmax(dmax, fabs(a[i] - b[i]));
                amax = fmax(amax, fabs(a[i]));
            }
            printf(" | best %.1f%% (x%.2f)  max diff %.1e\n", pct(best), us0 / best, dmax / amax);
        }
        for (auto p : w) CK(cudaFree(p));
    }
    return 0;
}
