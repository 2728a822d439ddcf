// Skinny matmul for decode: y[m, n] = sum_k x[m, k] * W[n, k] (+ bias[n]) for M <= 8 rows. Each
// block takes R consecutive output features, its GEMV_WARPS warps each a quarter of K, and
// streams their bf16 weight rows once in 16-byte loads, GEMV_UNROLL loads per row in flight per
// lane, reusing each x load for all R rows (R = 4 for wide outputs, 8 when several rows make the
// block's x loads outweigh its weight loads, fewer for narrow outputs so the grid still fills
// the GPU). Each output's sum is reduced in the same order whatever M, R and the
// kernel variant are, so a sequence's numerics do not depend on its batch.
//
// Variants: one matrix (gemv_bf16_M_R; with `add`, y += x . W^T, a residual stream, summed in
// the same order as the separate add it replaces); up to three matrices sharing x in one launch (the Q, K
// and V projections: gemv3_bf16_M_R); and the SwiGLU pair, gate and up rows of the same features
// read by one block, writing silu(gate) * up (gemv_swiglu_bf16_M_R).
//
// One-row launches (batch-1 decode) issue their first round of weight loads before they wait for
// the kernel before them (the weights never depend on it), so the loads are in flight while a
// norm finishes or the GEMV before drains: batch-1 decode of the Qwen3-8B shape on an H200
// 211.6 -> 216.3 tok/s (four runs each in one command), on an H100 within the noise (166.3 ->
// 165.9). Launches of more rows wait first: the early loads cost their registers occupancy.
#include "common.cuh"

// 16-byte weight loads in flight per lane: GEMV_UNROLL per row, fewer rows' worth past 4 rows
// (R = 8 takes 2 per row). A lane visits its k8 values in the same order whatever the unroll.
#define GEMV_UNROLL 4
#define GEMV_LOADS 16
#define GEMV_WARPS 4  // warps per block, splitting K

// Each warp's dot products x[m, :] . w[r][:] over its quarter of K, left in shared memory as
// part[warp][m][r] (returned, after a block barrier) for gemv_sum. A block owns R features and
// its warps split K, so a narrow matrix still has 4 warps per feature group streaming it.
template <int M, int R>
__device__ __forceinline__ const float* gemv_partials(const bf16* const (&w)[R],
                                                      const float* __restrict__ x, int K) {
    __shared__ float part[GEMV_WARPS][M][R];
    float acc[M][R];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    // A one-row launch has not waited yet: its first weight loads go out before the wait.
    bool waited = M > 1;
#pragma unroll
    for (int m = 0; m < M; m++)
#pragma unroll
        for (int r = 0; r < R; r++) acc[m][r] = 0.f;
    if ((K & 7) == 0) {
        const int k8n = K >> 3;
        const int per = (k8n + GEMV_WARPS - 1) / GEMV_WARPS;
        const int k_lo = warp * per, k_end = min(k8n, k_lo + per);
        constexpr int U = GEMV_LOADS / R < GEMV_UNROLL ? GEMV_LOADS / R : GEMV_UNROLL;
        for (int kb = k_lo + lane; kb < k_end; kb += 32 * U) {
            uint4 wv[U][R];
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int r = 0; r < R; r++)
                    wv[u][r] = kb + 32 * u < k_end
                                   ? ldg_stream(reinterpret_cast<const uint4*>(w[r]) + kb + 32 * u)
                                   : make_uint4(0, 0, 0, 0);
            if (!waited) {
                pdl_begin();
                waited = true;
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int k8 = kb + 32 * u;
                if (k8 >= k_end) break;
#pragma unroll
                for (int m = 0; m < M; m++) {
                    const float4* xp = reinterpret_cast<const float4*>(x + (size_t)m * K) + 2 * k8;
                    const float4 a = __ldg(xp), b = __ldg(xp + 1);
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        float wf[8];
                        bf16x8_to_f32(wv[u][r], wf);
                        acc[m][r] += wf[0] * a.x + wf[1] * a.y + wf[2] * a.z + wf[3] * a.w +
                                     wf[4] * b.x + wf[5] * b.y + wf[6] * b.z + wf[7] * b.w;
                    }
                }
            }
        }
    } else {
        if (!waited) {
            pdl_begin();
            waited = true;
        }
        const int per = (K + GEMV_WARPS - 1) / GEMV_WARPS;
        const int k_lo = warp * per, k_end = min(K, k_lo + per);
        for (int k = k_lo + lane; k < k_end; k += 32) {
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float wv = __bfloat162float(w[r][k]);
#pragma unroll
                for (int m = 0; m < M; m++) acc[m][r] += wv * x[(size_t)m * K + k];
            }
        }
    }
    if (!waited) pdl_begin();
#pragma unroll
    for (int m = 0; m < M; m++)
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float v = warp_sum(acc[m][r]);
            if (lane == 0) part[warp][m][r] = v;
        }
    __syncthreads();
    return &part[0][0][0];
}

// Output i = m * R + r of a block: its warps' partials summed in warp order.
template <int M, int R>
__device__ __forceinline__ float gemv_sum(const float* part, int i) {
    float v = 0.f;
#pragma unroll
    for (int q = 0; q < GEMV_WARPS; q++) v += part[q * M * R + i];
    return v;
}

// acc[m][r] = x[m, :] . w[r][:] in thread 0 (the SwiGLU pairs need a feature's gate and up sums
// in one thread).
template <int M, int R>
__device__ __forceinline__ void gemv_dots(const bf16* const (&w)[R], const float* __restrict__ x,
                                          int K, float (&acc)[M][R]) {
    const float* part = gemv_partials<M, R>(w, x, K);
    if (threadIdx.x != 0) return;
#pragma unroll
    for (int m = 0; m < M; m++)
#pragma unroll
        for (int r = 0; r < R; r++) acc[m][r] = gemv_sum<M, R>(part, m * R + r);
}

// Features n0 .. n0 + R - 1 of one matrix; with `add`, y += the result (a residual stream).
// Thread i writes output i, so the bias and residual reads are all in flight at once.
template <int M, int R>
__device__ __forceinline__ void gemv_features(const bf16* __restrict__ W,
                                              const float* __restrict__ x,
                                              const float* __restrict__ bias,
                                              float* __restrict__ y, int N, int K, int n0,
                                              int add = 0) {
    const bf16* w[R];
#pragma unroll
    for (int r = 0; r < R; r++) w[r] = W + (size_t)min(n0 + r, N - 1) * K;
    const float* part = gemv_partials<M, R>(w, x, K);
    for (int i = threadIdx.x; i < M * R; i += blockDim.x) {
        const int m = i / R, n = n0 + i % R;
        if (n >= N) continue;
        const float v = gemv_sum<M, R>(part, i) + (bias ? bias[n] : 0.f);
        y[(size_t)m * N + n] = add ? y[(size_t)m * N + n] + v : v;
    }
}

// The block's feature group (a block of GEMV_WARPS warps owns R features).
__device__ __forceinline__ int gemv_group() { return blockIdx.x; }

#define GEMV(M, R)                                                                                \
    extern "C" __global__ void gemv_bf16_##M##_##R(const bf16* __restrict__ W,                    \
                                                   const float* __restrict__ x,                   \
                                                   const float* __restrict__ bias,                \
                                                   float* __restrict__ y, int N, int K,           \
                                                   int add) {                                     \
        if (M > 1) pdl_begin();                                                                   \
        const int n0 = gemv_group() * R;                                                           \
        if (n0 < N) gemv_features<M, R>(W, x, bias, y, N, K, n0, add);                            \
        else if (M == 1) pdl_begin();                                                             \
    }                                                                                             \
    /* Features [0, N0) of matrix 0, then N1 of matrix 1, then N2 of matrix 2; R divides N0, N1 */\
    extern "C" __global__ void gemv3_bf16_##M##_##R(                                              \
        const bf16* __restrict__ W0, const bf16* __restrict__ W1, const bf16* __restrict__ W2,    \
        const float* __restrict__ x, const float* __restrict__ b0, const float* __restrict__ b1,  \
        const float* __restrict__ b2, float* __restrict__ y0, float* __restrict__ y1,             \
        float* __restrict__ y2, int N0, int N1, int N2, int K) {                                  \
        if (M > 1) pdl_begin();                                                                   \
        int n0 = gemv_group() * R;                                                                 \
        if (n0 < N0) return gemv_features<M, R>(W0, x, b0, y0, N0, K, n0);                        \
        n0 -= N0;                                                                                 \
        if (n0 < N1) return gemv_features<M, R>(W1, x, b1, y1, N1, K, n0);                        \
        n0 -= N1;                                                                                 \
        if (n0 < N2) gemv_features<M, R>(W2, x, b2, y2, N2, K, n0);                               \
        else if (M == 1) pdl_begin();                                                             \
    }
// The SwiGLU variant reads 2R rows per warp, so it comes in R = 1, 2 and 4.
template <int M, int R>
__device__ __forceinline__ void gemv_swiglu_body(const bf16* __restrict__ Wg,
                                                 const bf16* __restrict__ Wu,
                                                 const float* __restrict__ x,
                                                 float* __restrict__ y, int N, int K) {
    const int n0 = gemv_group() * R;
    if (n0 >= N) {
        if (M == 1) pdl_begin();
        return;
    }
    const bf16* w[2 * R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        w[r] = Wg + (size_t)min(n0 + r, N - 1) * K;
        w[R + r] = Wu + (size_t)min(n0 + r, N - 1) * K;
    }
    float acc[M][2 * R];
    gemv_dots<M, 2 * R>(w, x, K, acc);
    if (threadIdx.x != 0) return;
#pragma unroll
    for (int m = 0; m < M; m++)
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int n = n0 + r;
            const float g = acc[m][r];
            if (n < N) y[(size_t)m * N + n] = g / (1.f + expf(-g)) * acc[m][R + r];
        }
}

#define GEMV_SWIGLU(M, R)                                                                         \
    extern "C" __global__ void gemv_swiglu_bf16_##M##_##R(                                        \
        const bf16* __restrict__ Wg, const bf16* __restrict__ Wu, const float* __restrict__ x,    \
        float* __restrict__ y, int N, int K) {                                                    \
        if (M > 1) pdl_begin();                                                                   \
        gemv_swiglu_body<M, R>(Wg, Wu, x, y, N, K);                                               \
    }
#define GEMV_R(M) \
    GEMV(M, 1) GEMV(M, 2) GEMV(M, 4) GEMV(M, 8) GEMV_SWIGLU(M, 1) GEMV_SWIGLU(M, 2) GEMV_SWIGLU(M, 4)
GEMV_R(1)
GEMV_R(2)
GEMV_R(3)
GEMV_R(4)
GEMV_R(5)
GEMV_R(6)
GEMV_R(7)
GEMV_R(8)
