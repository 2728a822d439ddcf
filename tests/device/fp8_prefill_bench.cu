// Matmuls of fp8 weights (a scale a row) through cuBLASLt, Qwen3-8B's shapes at 16-8,192 rows:
// the weights dequantized to bf16 by a pass of their own, then a bf16 x bf16 -> f32 matmul (the
// engine's path past 128 rows where W8A8 is off) against W8A8 (the activations quantized to e4m3
// with a scale a row, an e4m3 x e4m3 matmul on the fp8 tensor cores, the two scales applied
// either by cuBLASLt itself (outer-vector scale modes, where the library has them) or, from
// 1,024 rows, by a pass over the output). Weights rotate over copies larger than L2; up to 256
// rows the heuristic's candidates are timed and the fastest kept, as the engine does. Prints
// each piece's time, the whole path's TFLOP/s and W8A8's difference from the bf16 path (largest
// |diff| over the largest |value|).
//
// Build and run on the GPU machine: tests/device/run.sh fp8pre (nvcc -O3 -arch=sm_90a
// -lcublasLt).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <vector>

#define CK(x)                                                                      \
    do {                                                                           \
        cudaError_t e_ = (x);                                                      \
        if (e_ != cudaSuccess) {                                                   \
            printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));     \
            exit(1);                                                               \
        }                                                                          \
    } while (0)
#define LT(x)                                                                   \
    do {                                                                        \
        cublasStatus_t s_ = (x);                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                      \
            printf("%s:%d cublasLt status %d\n", __FILE__, __LINE__, (int)s_); \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

__device__ unsigned hash(size_t i, unsigned seed) {
    unsigned h = (unsigned)i * 2654435761u ^ seed * 40503u ^ (unsigned)(i >> 32);
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    return h;
}
// Weights: e4m3 values of a roughly normal spread; scales 1e-3 .. 7e-3.
__global__ void fill_w(__nv_fp8_e4m3* w, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float u = (hash(i, 7) & 0xffff) / 65536.f - 0.5f;
        const float v = (hash(i, 9) & 0xffff) / 65536.f - 0.5f;
        w[i] = __nv_fp8_e4m3(200.f * (u + v) * (u + v));
    }
}
// Activations: mostly small, with a few large features per row, as hidden states have.
__global__ void fill_x(__nv_bfloat16* x, size_t n, int k) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float u = (hash(i, 3) & 0xffff) / 65536.f - 0.5f;
        const int f = i % k;
        x[i] = __float2bfloat16(u * ((f % 509 == 0) ? 40.f : 1.f));
    }
}
__global__ void fill_s(float* s, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        s[i] = 1e-3f * (1 + i % 7);
}

// The engine's dequantization: w * its row's scale, rounded to bf16.
__global__ void dequant(const __nv_fp8_e4m3* w, const float* s, __nv_bfloat16* out, int k,
                        size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16(float(w[i]) * s[i / k]);
}

// A block a row: the row's largest |x|, its scale (largest / 448) and the row in e4m3.
__global__ void quantize_rows(const __nv_bfloat16* x, __nv_fp8_e4m3* q, float* sx, int k) {
    const __nv_bfloat16* r = x + (size_t)blockIdx.x * k;
    float mx = 0.f;
    for (int i = threadIdx.x; i < k; i += blockDim.x) mx = fmaxf(mx, fabsf(__bfloat162float(r[i])));
    __shared__ float red[32];
    for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = mx;
    __syncthreads();
    if (threadIdx.x < 32) {
        mx = threadIdx.x < blockDim.x / 32 ? red[threadIdx.x] : 0.f;
        for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, o));
        if (threadIdx.x == 0) red[0] = mx;
    }
    __syncthreads();
    const float s = red[0] > 0.f ? red[0] / 448.f : 1.f;
    const float inv = 1.f / s;
    for (int i = threadIdx.x; i < k; i += blockDim.x)
        q[(size_t)blockIdx.x * k + i] = __nv_fp8_e4m3(__bfloat162float(r[i]) * inv);
    if (threadIdx.x == 0) sx[blockIdx.x] = s;
}

// y[m][n] *= sx[m] * sw[n] (f32 y, 4 values a thread).
__global__ void rescale(float* y, const float* sx, const float* sw, int n, size_t total) {
    for (size_t i = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * 4; i < total;
         i += (size_t)gridDim.x * blockDim.x * 4) {
        float4 v = *reinterpret_cast<float4*>(y + i);
        const float a = sx[i / n];
        const int c = i % n;
        v.x *= a * sw[c];
        v.y *= a * sw[c + 1];
        v.z *= a * sw[c + 2];
        v.w *= a * sw[c + 3];
        *reinterpret_cast<float4*>(y + i) = v;
    }
}

struct Mm {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
    bool ok, fp8;
    int count;
    cublasLtMatmulAlgo_t cands[8];
};

static cublasLtHandle_t lt;
static void* ws;
static const size_t WS = 32 << 20;

// y[m, n] (f32) = x[m, k] . w[n, k]^T; fp8 operands when `fp8`, with outer-vector scales when
// `vec` (A = w: a scale a row of w; B = x: a scale a row of x), fast accumulation when `fast`.
static Mm plan(int m, int n, int k, bool fp8, bool vec, bool fast, const float* sw,
               const float* sx) {
    Mm p{};
    p.fp8 = fp8;
    LT(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t t = CUBLAS_OP_T;
    LT(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
    if (fp8) {
        const int8_t f = fast;
        LT(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &f, sizeof f));
    }
    if (vec) {
        const int mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        LT(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode,
                                          sizeof mode));
        LT(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode,
                                          sizeof mode));
        LT(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sw,
                                          sizeof sw));
        LT(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sx,
                                          sizeof sx));
    }
    const cudaDataType_t ty = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    LT(cublasLtMatrixLayoutCreate(&p.a, ty, k, n, k));
    LT(cublasLtMatrixLayoutCreate(&p.b, ty, k, m, k));
    LT(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, n, m, n));
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &WS,
                                            sizeof WS));
    cublasLtMatmulHeuristicResult_t r[8];
    int count = 0;
    const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.a, p.b, p.d, p.d, pref,
                                                            m <= 256 ? 8 : 1, r, &count);
    cublasLtMatmulPreferenceDestroy(pref);
    p.ok = s == CUBLAS_STATUS_SUCCESS && count > 0;
    if (!p.ok) printf("    (no algorithm: status %d, count %d)\n", (int)s, count);
    if (p.ok) p.algo = r[0].algo;
    p.count = count;
    for (int i = 0; i < count; i++) p.cands[i] = r[i].algo;
    return p;
}

// Weights rotate over WCOPIES copies (more than L2 holds) from one call to the next.
static const int WCOPIES = 3;
static size_t wstride;
static int turn;
static void run(const Mm& p, const void* w, const void* x, float* y) {
    const float alpha = 1.f, beta = 0.f;
    const char* wt = (const char*)w + (turn++ % WCOPIES) * wstride * (p.fp8 ? 1 : 2);
    LT(cublasLtMatmul(lt, p.desc, &alpha, wt, p.a, x, p.b, &beta, y, p.d, y, p.d, &p.algo, ws,
                      WS, 0));
}

template <class F>
static float time_us(F f, int reps) {
    f();
    CK(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventRecord(e0));
    for (int i = 0; i < reps; i++) f();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    return ms * 1e3f / reps;
}

static float max_diff(const float* a, const float* b, size_t n) {
    std::vector<float> ha(n), hb(n);
    CK(cudaMemcpy(ha.data(), a, n * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb.data(), b, n * 4, cudaMemcpyDeviceToHost));
    float d = 0.f, big = 0.f;
    for (size_t i = 0; i < n; i++) {
        d = fmaxf(d, fabsf(ha[i] - hb[i]));
        big = fmaxf(big, fabsf(hb[i]));
    }
    return d / big;
}

// The plan's fastest candidate on these buffers (the engine's autotuning for up to 256 rows).
static void tune(Mm& p, const void* w, const void* x, float* y) {
    float best = 1e30f;
    cublasLtMatmulAlgo_t pick = p.algo;
    for (int i = 0; i < p.count; i++) {
        p.algo = p.cands[i];
        const float alpha = 1.f, beta = 0.f;
        if (cublasLtMatmul(lt, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.d, y, p.d, &p.algo, ws,
                           WS, 0) != CUBLAS_STATUS_SUCCESS)
            continue;
        const float t = time_us([&] { run(p, w, x, y); }, 20);
        if (t < best) best = t, pick = p.cands[i];
    }
    p.algo = pick;
}

int main() {
    LT(cublasLtCreate(&lt));
    CK(cudaMalloc(&ws, WS));
    printf("cuBLASLt version %zu\n", cublasLtGetVersion());
    const int shapes[4][2] = {{6144, 4096}, {4096, 4096}, {24576, 4096}, {4096, 12288}};
    const char* names[4] = {"qkv", "o", "gate+up", "down"};
    const int rows[6] = {16, 64, 128, 256, 1024, 8192};
    const int M = 8192;
    const size_t maxw = 24576ull * 4096, maxx = (size_t)M * 12288, maxy = (size_t)M * 24576;
    wstride = maxw;
    __nv_fp8_e4m3 *w, *xq;
    __nv_bfloat16 *wb, *x;
    float *sw, *sx, *y0, *y1;
    CK(cudaMalloc(&w, maxw * WCOPIES));
    CK(cudaMalloc(&wb, maxw * 2 * WCOPIES));
    CK(cudaMalloc(&x, maxx * 2));
    CK(cudaMalloc(&xq, maxx));
    CK(cudaMalloc(&sw, 24576 * 4));
    CK(cudaMalloc(&sx, M * 4));
    CK(cudaMalloc(&y0, maxy * 4));
    CK(cudaMalloc(&y1, maxy * 4));
    fill_w<<<1024, 256>>>(w, maxw * WCOPIES);
    fill_s<<<96, 256>>>(sw, 24576);
    CK(cudaDeviceSynchronize());
    for (int si = 0; si < 4; si++) {
        const int n = shapes[si][0], k = shapes[si][1];
        fill_x<<<1024, 256>>>(x, maxx, k);
        for (int c = 0; c < WCOPIES; c++)
            dequant<<<1024, 256>>>(w + c * maxw, sw, wb + c * maxw, k, (size_t)n * k);
        for (int m : rows) {
            const double flop = 2.0 * m * n * k;
            const size_t ny = (size_t)m * n;
            const double wbytes = (double)n * k;
            printf("%s %dx%d, %d rows:\n", names[si], n, k, m);
            const float t_deq =
                time_us([&] { dequant<<<1024, 256>>>(w, sw, wb, k, (size_t)n * k); }, 10);
            Mm bf = plan(m, n, k, false, false, false, nullptr, nullptr);
            if (m <= 256) tune(bf, wb, x, y0);
            const float t_bf = time_us([&] { run(bf, wb, x, y0); }, 20);
            printf("  bf16 (today past 128 rows): dequant %.1f us + matmul %.1f us = %.0f TFLOP/s\n",
                   t_deq, t_bf, flop / (t_deq + t_bf) / 1e6);
            const float t_q = time_us([&] { quantize_rows<<<m, 256>>>(x, xq, sx, k); }, 10);
            const float t_rs = time_us([&] { rescale<<<2048, 256>>>(y1, sx, sw, n, ny); }, 10);
            for (int fast = 1; fast >= 0; fast--) {
                if (m >= 1024) {
                    Mm f8 = plan(m, n, k, true, false, fast, nullptr, nullptr);
                    if (f8.ok) {
                        const float t_f8 = time_us([&] { run(f8, w, xq, y1); }, 10);
                        turn = 0;
                        run(f8, w, xq, y1);
                        rescale<<<2048, 256>>>(y1, sx, sw, n, ny);
                        turn = 0;
                        run(bf, wb, x, y0);
                        printf("  fp8%s + pass: quantize %.1f + matmul %.1f (%.0f TFLOP/s alone) + "
                               "rescale %.1f us = %.0f TFLOP/s; diff %.2e\n",
                               fast ? " fast" : "", t_q, t_f8, flop / t_f8 / 1e6, t_rs,
                               flop / (t_q + t_f8 + t_rs) / 1e6, max_diff(y1, y0, ny));
                    }
                }
                Mm fv = plan(m, n, k, true, true, fast, sw, sx);
                if (!fv.ok) continue;
                if (m <= 256) tune(fv, w, xq, y1);
                const float t_fv = time_us([&] { run(fv, w, xq, y1); }, 20);
                turn = 0;
                run(fv, w, xq, y1);
                turn = 0;
                run(bf, wb, x, y0);
                printf("  fp8%s outer-vector scales: quantize %.1f + matmul %.1f us = %.0f "
                       "TFLOP/s, weights at %.2f TB/s; diff %.2e\n",
                       fast ? " fast" : "", t_q, t_fv, flop / (t_q + t_fv) / 1e6,
                       wbytes / t_fv / 1e6, max_diff(y1, y0, ny));
            }
        }
    }
    return 0;
}
