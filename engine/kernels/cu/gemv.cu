// Skinny matmul for decode: y[m, n] = sum_k x[m, k] * W[n, k] (+ bias[n]) for M <= 8 rows. Each
// warp takes R consecutive output features and streams their bf16 weight rows once in 16-byte
// loads, reusing each x load for all R rows (R = 4 for wide outputs, fewer for narrow ones so
// the grid still fills the GPU). Each output's sum is reduced in the same order whatever M and R
// are, so a sequence's numerics do not depend on its batch.
#include "common.cuh"

template <int M, int R>
__device__ __forceinline__ void gemv_body(const bf16* __restrict__ W, const float* __restrict__ x,
                                          const float* __restrict__ bias, float* __restrict__ y,
                                          int N, int K) {
    const int lane = threadIdx.x & 31;
    const int n0 = (blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)) * R;
    if (n0 >= N) return;
    float acc[M][R];
#pragma unroll
    for (int m = 0; m < M; m++)
#pragma unroll
        for (int r = 0; r < R; r++) acc[m][r] = 0.f;
    if ((K & 7) == 0) {
        const int k8n = K >> 3;
        const uint4* w4[R];
#pragma unroll
        for (int r = 0; r < R; r++)
            w4[r] = reinterpret_cast<const uint4*>(W + (size_t)min(n0 + r, N - 1) * K);
#pragma unroll 2
        for (int k8 = lane; k8 < k8n; k8 += 32) {
            uint4 wv[R];
#pragma unroll
            for (int r = 0; r < R; r++) wv[r] = __ldg(w4[r] + k8);
#pragma unroll
            for (int m = 0; m < M; m++) {
                const float4* xp = reinterpret_cast<const float4*>(x + (size_t)m * K) + 2 * k8;
                const float4 a = __ldg(xp), b = __ldg(xp + 1);
#pragma unroll
                for (int r = 0; r < R; r++) {
                    float wf[8];
                    bf16x8_to_f32(wv[r], wf);
                    acc[m][r] += wf[0] * a.x + wf[1] * a.y + wf[2] * a.z + wf[3] * a.w +
                                 wf[4] * b.x + wf[5] * b.y + wf[6] * b.z + wf[7] * b.w;
                }
            }
        }
    } else {
        for (int k = lane; k < K; k += 32) {
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float wv = __bfloat162float(W[(size_t)min(n0 + r, N - 1) * K + k]);
#pragma unroll
                for (int m = 0; m < M; m++) acc[m][r] += wv * x[(size_t)m * K + k];
            }
        }
    }
#pragma unroll
    for (int m = 0; m < M; m++)
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float v = warp_sum(acc[m][r]);
            const int n = n0 + r;
            if (lane == 0 && n < N) y[(size_t)m * N + n] = v + (bias ? bias[n] : 0.f);
        }
}

#define GEMV(M, R)                                                                                \
    extern "C" __global__ void gemv_bf16_##M##_##R(const bf16* __restrict__ W,                    \
                                                   const float* __restrict__ x,                   \
                                                   const float* __restrict__ bias,                \
                                                   float* __restrict__ y, int N, int K) {         \
        gemv_body<M, R>(W, x, bias, y, N, K);                                                     \
    }
#define GEMV_R(M) GEMV(M, 1) GEMV(M, 2) GEMV(M, 4)
GEMV_R(1)
GEMV_R(2)
GEMV_R(3)
GEMV_R(4)
GEMV_R(5)
GEMV_R(6)
GEMV_R(7)
GEMV_R(8)
