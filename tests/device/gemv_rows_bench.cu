// Decode GEMVs of 1-8 rows alone (gemv.cu), the way a Qwen3-8B layer launches them (Q/K/V as
// gemv3, o and down as gemv, gate/up as gemv_swiglu; the backend's features a block), bf16 and
// fp8 weights, as microseconds and read rates against a plain copy. Weights rotate over copies
// larger than L2, so every launch reads DRAM. Each launch of M rows is checked bit for bit
// against its rows launched one at a time (a decode row must not depend on its batch), and a
// hash of every output is printed, so that builds of gemv.cu can be compared bit for bit.
//
// Build and run on the GPU machine: tests/device/run.sh gemvrows (GEMV_VARIANTS builds other
// gemv.cu files beside this one: -DGEMV_CU='"dir/gemv.cu"').
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#ifndef GEMV_CU
#define GEMV_CU "../../engine/kernels/cu/gemv.cu"
#endif
#include GEMV_CU

#include "check.cuh"

typedef void (*Gemv)(const void*, const float*, const float*, const float*, float*, int, int,
                     int);
typedef void (*Gemv3)(const void*, const void*, const void*, const float*, const float*,
                      const float*, const float*, const float*, const float*, const float*,
                      float*, float*, float*, int, int, int, int, const float*, float,
                      const float*);
typedef void (*Swiglu)(const void*, const void*, const float*, const float*, const float*, float*,
                       int, int, const float*, float, const float*);

// The kernels by [fp8][rows - 1][features index], as the backend's tables.
#define G1(T, M)                                                                        \
    {(Gemv)gemv_##T##_##M##_1, (Gemv)gemv_##T##_##M##_2, (Gemv)gemv_##T##_##M##_4, \
     (Gemv)gemv_##T##_##M##_8}
#define G3(T, M)                                                                            \
    {(Gemv3)gemv3_##T##_##M##_1, (Gemv3)gemv3_##T##_##M##_2, (Gemv3)gemv3_##T##_##M##_4, \
     (Gemv3)gemv3_##T##_##M##_8}
#define GS(T, M)                                                                     \
    {(Swiglu)gemv_swiglu_##T##_##M##_1, (Swiglu)gemv_swiglu_##T##_##M##_2, \
     (Swiglu)gemv_swiglu_##T##_##M##_4}
#define ROWS(G, T) {G(T, 1), G(T, 2), G(T, 3), G(T, 4), G(T, 5), G(T, 6), G(T, 7), G(T, 8)}
static const Gemv GEMV_K[2][8][4] = {ROWS(G1, bf16), ROWS(G1, fp8)};
static const Gemv3 GEMV3_K[2][8][4] = {ROWS(G3, bf16), ROWS(G3, fp8)};
static const Swiglu SWIGLU_K[2][8][3] = {ROWS(GS, bf16), ROWS(GS, fp8)};

// The backend's features a block (kernels/gemv.rs), as indices into 1, 2, 4, 8; with `alt`, the
// other of its two choices for wide outputs at every size from 2 rows on (to compare).
static bool alt = false;
static bool wide(bool rule, int m) { return m >= 2 && alt ? !rule : rule; }
static int gemv_ri(int n, int m, int fp8) {
    return n >= 4096 ? (wide(m >= (fp8 ? 2 : 4), m) ? 3 : 2) : n >= 2048 ? 1 : 0;
}
static int gemv3_ri(int n, int m) {
    return n >= 4096 ? (wide(m >= 2, m) ? 3 : 2) : n >= 2048 ? 1 : 0;
}
static int swiglu_ri(int n, int m, int fp8) {
    return n >= 4096 ? (wide(fp8 ? m >= 2 && m < 8 : m == 8, m) ? 2 : 1) : 0;
}

__global__ void fill_u8(unsigned char* p, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        // e4m3 values of magnitude below 2 (exponent field < 8), both signs, no NaN.
        const unsigned h = bench_hash(i, seed);
        p[i] = (unsigned char)((h & 0x80) | ((h >> 8) % 64));
    }
}

static unsigned long long fnv(const std::vector<float>& v) {
    unsigned long long h = 1469598103934665603ull;
    const unsigned char* p = reinterpret_cast<const unsigned char*>(v.data());
    for (size_t i = 0; i < v.size() * 4; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

int main() {
    const double rate = copy_rate();
    printf("copy rate %.2f TB/s\n", rate / 1e12);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int K_MAX = 12288, N_MAX = 24576;
    float *x, *y, *y1, *scale;
    CK(cudaMalloc(&x, 8 * K_MAX * 4));
    CK(cudaMalloc(&y, 8 * N_MAX * 4));
    CK(cudaMalloc(&y1, 8 * N_MAX * 4));
    CK(cudaMalloc(&scale, N_MAX * 4));
    {
        std::vector<float> h(8 * K_MAX), s(N_MAX);
        for (size_t i = 0; i < h.size(); i++) h[i] = sinf(i * 0.37f);
        for (size_t i = 0; i < s.size(); i++) s[i] = 0.01f + 1e-6f * i;
        CK(cudaMemcpy(x, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(scale, s.data(), s.size() * 4, cudaMemcpyHostToDevice));
    }
    // Qwen3-8B's layer: Q/K/V (4096 + 1024 + 1024) x 4096, o 4096 x 4096, gate/up 2 x 12288 x
    // 4096, down 4096 x 12288.
    enum Kind { QKV, O, GATE_UP, DOWN };
    struct Shape { const char* name; Kind kind; int n, k, mats; } shapes[] = {
        {"qkv", QKV, 6144, 4096, 1}, {"o", O, 4096, 4096, 1},
        {"gate+up", GATE_UP, 12288, 4096, 2}, {"down", DOWN, 4096, 12288, 1}};
    double layer_us[2][8] = {};
    for (int pass = 0; pass < 4; pass++) {
        const int fp8 = pass & 1;
        alt = pass >= 2;
        if (pass == 2) printf("the other width from 2 rows on:\n");
        memset(layer_us[fp8], 0, sizeof(layer_us[fp8]));
        for (auto& s : shapes) {
            const size_t elems = (size_t)s.n * s.k * s.mats, bytes = elems * (fp8 ? 1 : 2);
            const int copies = (int)std::max<size_t>(2, (300ull << 20) / bytes + 1);
            std::vector<unsigned char*> w(copies);
            for (int i = 0; i < copies; i++) {
                CK(cudaMalloc(&w[i], bytes));
                if (fp8)
                    fill_u8<<<1024, 256>>>(w[i], bytes, 17u + i);
                else
                    fill_bf16<<<1024, 256>>>((bf16*)w[i], elems, 17u + i);
            }
            auto launch = [&](int i, int m, const float* xr, float* yr) {
                const unsigned char* W = w[i % copies];
                const float* sc = fp8 ? scale : nullptr;
                const size_t half = (size_t)s.n * s.k * (fp8 ? 1 : 2);
                if (s.kind == QKV) {
                    const int ri = gemv3_ri(s.n, m), r = 1 << ri, nq = 4096, nk = 1024;
                    const size_t wk = (size_t)nq * s.k * (fp8 ? 1 : 2);
                    const size_t wv = wk + (size_t)nk * s.k * (fp8 ? 1 : 2);
                    GEMV3_K[fp8][m - 1][ri]<<<s.n / r, 128>>>(
                        W, W + wk, W + wv, sc, sc, sc, xr, nullptr, nullptr, nullptr, yr,
                        yr + (size_t)m * nq, yr + (size_t)m * (nq + nk), nq, nk, nk, s.k, nullptr,
                        0.f, nullptr);
                } else if (s.kind == GATE_UP) {
                    const int ri = swiglu_ri(s.n, m, fp8), r = 1 << ri;
                    SWIGLU_K[fp8][m - 1][ri]<<<s.n / r, 128>>>(W, W + half, sc, sc, xr, yr, s.n,
                                                                s.k, nullptr, 0.f, nullptr);
                } else {
                    const int ri = gemv_ri(s.n, m, fp8), r = 1 << ri;
                    GEMV_K[fp8][m - 1][ri]<<<s.n / r, 128>>>(W, sc, xr, nullptr, yr, s.n, s.k, 0);
                }
            };
            printf("%s %-8s", fp8 ? "fp8 " : "bf16", s.name);
            for (int m = 1; m <= 8; m++) {
                for (int i = 0; i < copies; i++) launch(i, m, x, y);
                CK(cudaEventRecord(e0));
                const int reps = 20 * copies;
                for (int i = 0; i < reps; i++) launch(i, m, x, y);
                CK(cudaEventRecord(e1));
                CK(cudaEventSynchronize(e1));
                float ms;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                CK(cudaGetLastError());
                const double us = ms * 1e3 / reps;
                layer_us[fp8][m - 1] += us;
                // Bits: the M rows' outputs (the last copy's weights) against each row alone.
                const int last = (reps - 1) % copies;
                launch(last, m, x, y);
                std::vector<float> batch((size_t)m * s.n), alone((size_t)m * s.n), one(s.n);
                CK(cudaMemcpy(batch.data(), y, batch.size() * 4, cudaMemcpyDeviceToHost));
                for (int r = 0; r < m; r++) {
                    launch(last, 1, x + (size_t)r * s.k, y1);
                    CK(cudaMemcpy(one.data(), y1, s.n * 4, cudaMemcpyDeviceToHost));
                    // Q/K/V's outputs lie in three arrays of m rows each.
                    if (s.kind == QKV) {
                        memcpy(&alone[(size_t)r * 4096], one.data(), 4096 * 4);
                        memcpy(&alone[(size_t)m * 4096 + r * 1024], &one[4096], 1024 * 4);
                        memcpy(&alone[(size_t)m * 5120 + r * 1024], &one[5120], 1024 * 4);
                    } else {
                        memcpy(&alone[(size_t)r * s.n], one.data(), s.n * 4);
                    }
                }
                const bool same = memcmp(batch.data(), alone.data(), batch.size() * 4) == 0;
                printf(" | m=%d %6.1f us %5.1f%%%s %04llx", m, us,
                       100.0 * bytes / (us * 1e-6) / rate, same ? "" : " DIFFERS",
                       fnv(batch) & 0xffff);
            }
            printf("\n");
            for (auto p : w) CK(cudaFree(p));
        }
        printf("%s layer (4 launches):", fp8 ? "fp8 " : "bf16");
        for (int m = 1; m <= 8; m++) printf(" m=%d %.1f us", m, layer_us[fp8][m - 1]);
        printf("\n");
    }
    return 0;
}
