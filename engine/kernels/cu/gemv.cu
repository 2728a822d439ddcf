// Skinny matmul for decode: y[m, n] = sum_k x[m, k] * W[n, k] (+ bias[n]) for M <= 8 rows, one
// warp per output feature, the bf16 weight row streamed once in 16-byte loads. Each row's sum is
// reduced in the same order whatever M is, so a sequence's numerics do not depend on its batch.
#include "common.cuh"

template <int M>
__device__ __forceinline__ void gemv_body(const bf16* __restrict__ W, const float* __restrict__ x,
                                          const float* __restrict__ bias, float* __restrict__ y,
                                          int N, int K) {
    const int lane = threadIdx.x & 31;
    const int n = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (n >= N) return;
    const bf16* w = W + (size_t)n * K;
    float acc[M];
#pragma unroll
    for (int m = 0; m < M; m++) acc[m] = 0.f;
    if ((K & 7) == 0) {
        const uint4* w4 = reinterpret_cast<const uint4*>(w);
        const int k8n = K >> 3;
#pragma unroll 4
        for (int k8 = lane; k8 < k8n; k8 += 32) {
            float wf[8];
            bf16x8_to_f32(__ldg(w4 + k8), wf);
#pragma unroll
            for (int m = 0; m < M; m++) {
                const float4* xp = reinterpret_cast<const float4*>(x + (size_t)m * K) + 2 * k8;
                const float4 a = __ldg(xp), b = __ldg(xp + 1);
                acc[m] += wf[0] * a.x + wf[1] * a.y + wf[2] * a.z + wf[3] * a.w + wf[4] * b.x +
                          wf[5] * b.y + wf[6] * b.z + wf[7] * b.w;
            }
        }
    } else {
        for (int k = lane; k < K; k += 32) {
            const float wv = __bfloat162float(w[k]);
#pragma unroll
            for (int m = 0; m < M; m++) acc[m] += wv * x[(size_t)m * K + k];
        }
    }
#pragma unroll
    for (int m = 0; m < M; m++) {
        const float v = warp_sum(acc[m]);
        if (lane == 0) y[(size_t)m * N + n] = v + (bias ? bias[n] : 0.f);
    }
}

#define GEMV(M)                                                                                   \
    extern "C" __global__ void gemv_bf16_##M(const bf16* __restrict__ W,                          \
                                             const float* __restrict__ x,                         \
                                             const float* __restrict__ bias,                      \
                                             float* __restrict__ y, int N, int K) {               \
        gemv_body<M>(W, x, bias, y, N, K);                                                        \
    }
GEMV(1)
GEMV(2)
GEMV(3)
GEMV(4)
GEMV(5)
GEMV(6)
GEMV(7)
GEMV(8)
