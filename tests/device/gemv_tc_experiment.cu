// An experiment, not part of the engine (tests/device/gemv_bench.cu times it against gemv.cu):
// decode GEMVs (1-8 rows) on the tensor cores, y[m, n] = x[m, :] . W[n, :] for N a multiple of 8
// and K of 32. Measured on an H100 (2026-11-25), it reads the weights at 1.1-1.3x gemv.cu's rate
// at 8 rows on Qwen3-8B's shapes (1.7x on GLM-4.7-Flash's narrow ones) but 5-6% below it at one
// row (15-33% on GLM's), and a row's result must not depend on its batch, so the engine cannot
// take it for 2-8 rows only: it stays here. In the engine (every decode GEMV of 1-8 rows on it)
// Qwen3-8B tg128 went 164 -> 119-124 tok/s and 8 concurrent sequences 745 -> 772-833 tok/s.
//
// Each mma.sync m16n8k16 takes the activations as A and 8 weight rows (features) as B: lane
// (g = lane / 4, q = lane % 4) reads 16 bytes (k0 + 8q .. k0 + 8q + 7) of weight row g and of
// activation row g, and feeds the first half to one mma and the second to another, so each mma's
// k slots hold a permutation of k0 .. k0 + 31, the same for A and B (as in moe_tc.cu). A's rows
// 0-7 hold the activations rounded to bf16 (hi) and rows 8-15 what that rounding lost (lo =
// x - hi, rounded again), so hi + lo carries x to about 16 bits and the result is as close to
// an f32 product as the CUDA-core kernels' (2^-16 relative per product instead of 2^-24).
//
// The mma's cost does not depend on how many activation rows are live (dead ones are zeros), so
// 8 rows take about as long as 1. A block's warps split K into contiguous runs of 32-value chunks
// and the block adds their sums in warp order; a row's result depends only on its own
// activations, N and K, never on the other rows or their number.
#include "../../engine/kernels/cu/mma.cuh"

#define GT_MAX_WARPS 8  // warps per block, times tiles per warp, at most
#define GT_CHUNKS 4     // 32-value K chunks of each row a stage (256 bytes); two stages

// 16 bytes of activations (L1-cached: every block reads them).
__device__ __forceinline__ float4 gt_acts(const float* p) {
    return __ldg(reinterpret_cast<const float4*>(p));
}

// hi and lo bf16 pairs of 8 activations (zeros unless `use`): hi = bf16(x), lo = bf16(x - hi).
__device__ __forceinline__ void gt_split8(const float4 (&x)[2], bool use, uint32_t (&hi)[4],
                                          uint32_t (&lo)[4]) {
    const float z = use ? 1.f : 0.f;
    const float v[8] = {x[0].x * z, x[0].y * z, x[0].z * z, x[0].w * z,
                        x[1].x * z, x[1].y * z, x[1].z * z, x[1].w * z};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
        const float2 f = __bfloat1622float2(h);
        hi[i] = *reinterpret_cast<const uint32_t*>(&h);
        lo[i] = pack_bf16(v[2 * i] - f.x, v[2 * i + 1] - f.y);
    }
}

// acc[t] += this warp's part of the products of activation row g (at x, read as zeros unless
// `live`) with weight row g of tile t (tile t's 8 rows from w[t]), over the warp's run of K's
// 32-value chunks.
//
// The weights go through shared memory with cp.async, in two stages of GT_CHUNKS chunks of every
// row of the warp's tiles (8T rows x 256 bytes): each copy instruction takes whole 256-byte runs
// of two rows, and the mma fragments are read back from shared memory, so the next stage's copies
// are in flight while this one's mma run. (Loads straight into the fragment registers take 64
// bytes of each of 8 rows an instruction, and ptxas placed each right before its mma, one load in
// flight a lane: Qwen3-8B decoded at 124 tok/s instead of 164.) A chunk past the warp's run copies
// its last one again and counts as zeros.
template <int T>
__device__ __forceinline__ void gt_dots(const bf16* const (&w)[T], const float* x, bool live,
                                        int K, float (&acc)[T][4]) {
    constexpr int ROW = GT_CHUNKS * 64 + 64;  // bytes a staged row takes (padded: no bank conflicts)
    constexpr int PER_ROW = GT_CHUNKS * 4;    // 16-byte copies a row a stage
    constexpr int COPIES = 8 * T * PER_ROW / 32;  // a lane's copies a stage
    extern __shared__ __align__(16) unsigned char gt_stage[];  // [warp][stage][8T rows][ROW]
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    const int warps = blockDim.x >> 5, chunks = K >> 5;
    const int per = (chunks + warps - 1) / warps;
    const int c_lo = warp * per, c_end = min(chunks, c_lo + per);
    if (c_lo >= c_end) return;
    unsigned char* mine = gt_stage + warp * 2 * 8 * T * ROW;
    auto copy = [&](int c, int s) {
#pragma unroll
        for (int j = 0; j < COPIES; j++) {
            const int i = lane + 32 * j, r = i / PER_ROW, part = i % PER_ROW;
            const int k = 32 * min(c + part / 4, c_end - 1) + 8 * (part % 4);
            cp_async16(mine + (s * 8 * T + r) * ROW + 16 * part,
                       w[r / 8] + (size_t)(r % 8) * K + k);
        }
    };
    copy(c_lo, 0);
    cp_async_commit();
    for (int c = c_lo, s = 0; c < c_end; c += GT_CHUNKS, s ^= 1) {
        __syncwarp();  // every lane is done reading the stage about to be refilled
        if (c + GT_CHUNKS < c_end) copy(c + GT_CHUNKS, s ^ 1);
        cp_async_commit();
        float4 xv[GT_CHUNKS][2];
#pragma unroll
        for (int u = 0; u < GT_CHUNKS; u++) {
            const int k = 32 * min(c + u, c_end - 1) + 8 * q;
            xv[u][0] = gt_acts(x + k);
            xv[u][1] = gt_acts(x + k + 4);
        }
        cp_async_wait<1>();
        __syncwarp();  // every lane's copies of this stage are visible
#pragma unroll
        for (int u = 0; u < GT_CHUNKS; u++) {
            uint32_t hi[4], lo[4];
            gt_split8(xv[u], live && c + u < c_end, hi, lo);
            const uint32_t a0[4] = {hi[0], lo[0], hi[1], lo[1]};
            const uint32_t a1[4] = {hi[2], lo[2], hi[3], lo[3]};
#pragma unroll
            for (int t = 0; t < T; t++) {
                const uint4 wv = *reinterpret_cast<const uint4*>(
                    mine + (s * 8 * T + 8 * t + g) * ROW + 64 * u + 16 * q);
                mma_bf16(acc[t], a0, wv.x, wv.y);
                mma_bf16(acc[t], a1, wv.z, wv.w);
            }
        }
    }
}

// Lane (g, q) of warp 0 gets out[t][i] = row g's product with feature 8t + 2q + i of the block
// (every warp's hi + lo, added in warp order); the other warps return false.
template <int T>
__device__ __forceinline__ bool gt_reduce(const float (&acc)[T][4], float (&out)[T][2]) {
    __shared__ float red[GT_MAX_WARPS * 2][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
#pragma unroll
    for (int t = 0; t < T; t++)
#pragma unroll
        for (int i = 0; i < 2; i++) red[(warp * T + t) * 2 + i][lane] = acc[t][i] + acc[t][2 + i];
    __syncthreads();
    if (warp != 0) return false;
#pragma unroll
    for (int t = 0; t < T; t++)
#pragma unroll
        for (int i = 0; i < 2; i++) {
            float v = 0.f;
            for (int w = 0; w < warps; w++) v += red[(w * T + t) * 2 + i][lane];
            out[t][i] = v;
        }
    return true;
}

// Features n0 .. n0 + 8T - 1 of one matrix for rows 0 .. M - 1; with `add`, y += the result.
template <int T>
__device__ __forceinline__ void gt_features(const bf16* __restrict__ W,
                                            const float* __restrict__ x,
                                            const float* __restrict__ bias,
                                            float* __restrict__ y, int M, int N, int K, int n0,
                                            int add) {
    const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const bf16* w[T];
#pragma unroll
    for (int t = 0; t < T; t++) w[t] = W + (size_t)(n0 + 8 * t) * K;
    float acc[T][4] = {};
    gt_dots<T>(w, x + (size_t)min(g, M - 1) * K, g < M, K, acc);
    float out[T][2];
    if (!gt_reduce<T>(acc, out) || g >= M) return;
#pragma unroll
    for (int t = 0; t < T; t++)
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int n = n0 + 8 * t + 2 * q + i;
            const float v = out[t][i] + (bias ? bias[n] : 0.f);
            float* p = y + (size_t)g * N + n;
            *p = add ? *p + v : v;
        }
}

// gemv_tc_T: one matrix, 8T features a block (N a multiple of 8T); with `add`, y += x . W^T.
// gemv3_tc_T: features [0, N0) of matrix 0, then N1 of matrix 1, then N2 of matrix 2, each a
// multiple of 8T. gemv_swiglu_tc_F: y = silu(x . Wg^T) * (x . Wu^T), 8F features a block, each
// warp reading their gate and up rows (2F tiles).
#define GEMV_TC(T)                                                                                 \
    extern "C" __global__ void __launch_bounds__(GT_MAX_WARPS * 32)                               \
        gemv_tc_##T(const bf16* __restrict__ W, const float* __restrict__ x,                      \
                    const float* __restrict__ bias, float* __restrict__ y, int M, int N, int K,   \
                    int add) {                                                                    \
        pdl_begin();                                                                              \
        gt_features<T>(W, x, bias, y, M, N, K, blockIdx.x * 8 * T, add);                          \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(GT_MAX_WARPS * 32) gemv3_tc_##T(                 \
        const bf16* __restrict__ W0, const bf16* __restrict__ W1, const bf16* __restrict__ W2,    \
        const float* __restrict__ x, const float* __restrict__ b0, const float* __restrict__ b1,  \
        const float* __restrict__ b2, float* __restrict__ y0, float* __restrict__ y1,             \
        float* __restrict__ y2, int M, int N0, int N1, int N2, int K) {                           \
        pdl_begin();                                                                              \
        int n0 = blockIdx.x * 8 * T;                                                              \
        if (n0 < N0) return gt_features<T>(W0, x, b0, y0, M, N0, K, n0, 0);                       \
        n0 -= N0;                                                                                 \
        if (n0 < N1) return gt_features<T>(W1, x, b1, y1, M, N1, K, n0, 0);                       \
        n0 -= N1;                                                                                 \
        if (n0 < N2) gt_features<T>(W2, x, b2, y2, M, N2, K, n0, 0);                              \
    }
GEMV_TC(1)
GEMV_TC(2)
GEMV_TC(4)

template <int F>
__device__ __forceinline__ void gt_swiglu(const bf16* __restrict__ Wg, const bf16* __restrict__ Wu,
                                          const float* __restrict__ x, float* __restrict__ y,
                                          int M, int N, int K) {
    const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int n0 = blockIdx.x * 8 * F;
    const bf16* w[2 * F];
#pragma unroll
    for (int f = 0; f < F; f++) {
        w[2 * f] = Wg + (size_t)(n0 + 8 * f) * K;
        w[2 * f + 1] = Wu + (size_t)(n0 + 8 * f) * K;
    }
    float acc[2 * F][4] = {};
    gt_dots<2 * F>(w, x + (size_t)min(g, M - 1) * K, g < M, K, acc);
    float out[2 * F][2];
    if (!gt_reduce<2 * F>(acc, out) || g >= M) return;
#pragma unroll
    for (int f = 0; f < F; f++)
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const float gate = out[2 * f][i];
            y[(size_t)g * N + n0 + 8 * f + 2 * q + i] = gate / (1.f + expf(-gate)) * out[2 * f + 1][i];
        }
}

#define GEMV_SWIGLU_TC(F)                                                                          \
    extern "C" __global__ void __launch_bounds__(GT_MAX_WARPS * 32) gemv_swiglu_tc_##F(           \
        const bf16* __restrict__ Wg, const bf16* __restrict__ Wu, const float* __restrict__ x,    \
        float* __restrict__ y, int M, int N, int K) {                                             \
        pdl_begin();                                                                              \
        gt_swiglu<F>(Wg, Wu, x, y, M, N, K);                                                      \
    }
GEMV_SWIGLU_TC(1)
GEMV_SWIGLU_TC(2)
