// Skinny matmul for decode: y[m, n] = sum_k x[m, k] * W[n, k] (+ bias[n]) for M <= 8 rows. Each
// block takes R consecutive output features, its GEMV_WARPS warps each a quarter of K, and
// streams their bf16 weight rows once in 16-byte loads, GEMV_UNROLL loads per row in flight per
// lane, reusing each x load for all R rows (R = 4 for wide outputs, 8 when several rows make the
// block's x loads outweigh its weight loads, fewer for narrow outputs so the grid still fills
// the GPU). Each output's sum is reduced in the same order whatever M, R and the
// kernel variant are, so a sequence's numerics do not depend on its batch.
//
// Weights come in bf16 or fp8 e4m3 with an f32 scale a row (gemv_fp8_...: 8-byte loads of 8
// values, the same k8 order, each output's sum times its row's scale).
//
// Variants: one matrix (gemv_bf16_M_R; with `add`, y += x . W^T, a residual stream, summed in
// the same order as the separate add it replaces); up to three matrices sharing x in one launch
// (the Q, K and V projections: gemv3_bf16_M_R); and the SwiGLU pair, gate and up rows of the same features
// read by one block, writing silu(gate) * up (gemv_swiglu_bf16_M_R). The last two can fold in the
// RMS norm before them (GemvNorm).
//
// Each warp's partial sums leave through gemv_warp_sums (warp_sum's tree, scattered over the
// lanes: 62 shuffles for 64 sums, not 320), and thread i of the block writes output i, the SwiGLU
// pairs too (thread 0 wrote them all, with an exp and a division each). At 2-8 rows of
// Qwen3-8B's layer on a lent H200 (tests/device/run.sh gemvrows, the same bits): 118 / 136 / 211
// -> 112 / 122 / 163 us a layer at 2 / 4 / 8 rows with bf16 weights, 77 / 111 / 219 -> 71 / 94
// / 142 with fp8 (8 rows: the SwiGLU pairs at 2 features a block, kernels/gemv.rs).
//
// One-row launches (batch-1 decode) issue their first round of weight loads before they wait for
// the kernel before them (the weights never depend on it), so the loads are in flight while a
// norm finishes or the GEMV before drains: batch-1 decode of the Qwen3-8B shape on an H200
// 211.6 -> 216.3 tok/s (four runs each in one command), on an H100 within the noise (166.3 ->
// 165.9). Launches of more rows wait first: the early loads cost their registers occupancy.
#include "common.cuh"

// 16-byte weight loads in flight per lane: GEMV_UNROLL per row, fewer rows' worth past 2 rows
// (R = 4 takes 2 per row, R = 8 one). A lane visits its k8 values in the same order whatever the
// unroll. One-row launches are built for GEMV_ONE_ROW_BLOCKS blocks an SM (64 registers): a
// Qwen3-8B o-proj or down GEMV (1,024 blocks of 4 features) is then one wave of blocks, each with
// its first loads in flight before the kernel before it ends, where the 5 an SM of 16 loads a
// lane left a second wave to start after the first drained. Batch-1 decode on H100s, one command
// each, two runs a build: Qwen3-8B tg128 177.6 / 177.5 -> 183.6 / 183.7 tok/s (92.8% of the
// 197.8 roofline measured in that command), GLM-4.7-Flash 232.7 / 231.8 -> 235.9 / 236.2; half
// the loads without the bound 177.3 / 177.6, bounds of 6 or 7 blocks 177.4-177.6 (the one wave
// is the lever: shapes of more than 8 x 132 blocks would want more features a block). Launches
// of 2-8 rows took 8 loads a lane too (fewer registers: 2 blocks an SM at 8 rows, 3 at 2-4),
// unbounded (bounding them spilled and lost 2-4% at 4 and 8 rows): in-process serving at 2 / 4 /
// 8 concurrent 300 / 542 / 742 -> 307 / 547 / 764 output tok/s.
#define GEMV_UNROLL 4
#define GEMV_LOADS 8
#define GEMV_WARPS 4  // warps per block, splitting K
#define GEMV_ONE_ROW_BLOCKS 8

// The RMS norm before the Q/K/V and SwiGLU GEMVs (g its weight, f32, K % 8 == 0), as those
// GEMVs define it: output (m, n) = inv_m * sum_k W[n, k] * (x[m, k] * g[k]), inv_m row m's inverse
// RMS with its squares summed in the one-row GEMV's order (GEMV_WARPS warps a quarter of K's
// 8-value units each, a lane every 32nd unit, then the warps in order). A one-row GEMV folds it
// in (`g`: the squares come from its own x loads; one launch less than a norm kernel); launches
// of more rows, where the extra products would cost more than the launch (in-process c=8 670
// -> 615 tok/s), read gemv_norm_stats' x * g and scale by its `inv` instead, with the same bits.
struct GemvNorm {
    const float* __restrict__ g;    // fold the norm in (one-row launches), or null
    float eps;
    const float* __restrict__ inv;  // or scale each row's outputs by inv[m], or null
};

// The norm's arithmetic, spelled out in round-to-nearest intrinsics so that no kernel's compiler
// contracts it differently from another's: s plus the squares of 8 values in order, and x * g.
__device__ __forceinline__ float gemv_squares(float s, float4 a, float4 b) {
    s = __fmaf_rn(a.x, a.x, s);
    s = __fmaf_rn(a.y, a.y, s);
    s = __fmaf_rn(a.z, a.z, s);
    s = __fmaf_rn(a.w, a.w, s);
    s = __fmaf_rn(b.x, b.x, s);
    s = __fmaf_rn(b.y, b.y, s);
    s = __fmaf_rn(b.z, b.z, s);
    return __fmaf_rn(b.w, b.w, s);
}

__device__ __forceinline__ float4 gemv_scaled(float4 a, float4 g) {
    return make_float4(__fmul_rn(a.x, g.x), __fmul_rn(a.y, g.y), __fmul_rn(a.z, g.z),
                       __fmul_rn(a.w, g.w));
}

__device__ __forceinline__ float gemv_inv_rms(float sum_sq, int K, float eps) {
    return __frcp_rn(__fsqrt_rn(__fadd_rn(__fdiv_rn(sum_sq, (float)K), eps)));
}

// A weight element type's 8-value unit: its load (streamed, skipping L1) and its values as f32.
template <typename WT>
struct GemvW;
template <>
struct GemvW<bf16> {
    typedef uint4 Unit;
    static __device__ __forceinline__ Unit load(const bf16* row, int k8) {
        return ldg_stream(reinterpret_cast<const uint4*>(row) + k8);
    }
    static __device__ __forceinline__ void to_f32(Unit u, float* f) { bf16x8_to_f32(u, f); }
    static __device__ __forceinline__ float one(bf16 v) { return __bfloat162float(v); }
};
template <>
struct GemvW<fp8> {
    typedef uint2 Unit;
    static __device__ __forceinline__ Unit load(const fp8* row, int k8) {
        return ldg_stream8(reinterpret_cast<const uint2*>(row) + k8);
    }
    static __device__ __forceinline__ void to_f32(Unit u, float* f) { fp8x8_to_f32(u, f); }
    static __device__ __forceinline__ float one(fp8 v) { return float(v); }
};

// The U rounds of weight loads (8 values each) of R rows a lane makes from k8 index kb on.
template <typename WT, int U, int R>
__device__ __forceinline__ void gemv_load(typename GemvW<WT>::Unit (&wv)[U][R],
                                          const WT* const (&w)[R], int kb, int k_end) {
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
        for (int r = 0; r < R; r++)
            wv[u][r] = kb + 32 * u < k_end ? GemvW<WT>::load(w[r], kb + 32 * u)
                                           : typename GemvW<WT>::Unit{};
}

// The smallest power of two >= n.
__host__ __device__ constexpr int gemv_pow2(int n) {
    return n <= 1 ? 1 : 2 * gemv_pow2((n + 1) / 2);
}

// The warp sums of a lane's P values (P a power of two), each over warp_sum's very tree (xor
// partners 16, 8, .., 1, each sum own + partner's), so each has warp_sum's bits; but scattered:
// while a lane holds C > 1 values, it keeps half of them and sends the other half to its partner,
// so 64 values take 62 shuffles, not 320. At the end a lane holds the sums of slots `slot` ..
// `slot` + max(P / 32, 1) - 1 in v[0 ..] (below 32 values, 32 / P lanes hold each).
template <int O, int C, int P>
__device__ __forceinline__ void gemv_warp_sums(float (&v)[P], int lane, int& slot) {
    if constexpr (O > 0) {
        if constexpr (C > 1) {
            constexpr int H = C / 2;
            const bool up = lane & O;
#pragma unroll
            for (int i = 0; i < H; i++) {
                const float send = up ? v[i] : v[i + H];
                const float keep = up ? v[i + H] : v[i];
                v[i] = keep + __shfl_xor_sync(0xffffffffu, send, O);
            }
            if (up) slot += H;
            gemv_warp_sums<O / 2, H, P>(v, lane, slot);
        } else {
            v[0] += __shfl_xor_sync(0xffffffffu, v[0], O);
            gemv_warp_sums<O / 2, 1, P>(v, lane, slot);
        }
    }
}

// A block's partial sums, in shared memory: each warp's dot products over its quarter of K, and
// with a folded norm each warp's sums of squares of x's rows.
template <int M, int R>
struct GemvParts {
    float dot[GEMV_WARPS][M][R];
    float sq[GEMV_WARPS][M];
};

// Output i = m * R + r of a block: its warps' partials summed in warp order, times row m's
// inverse RMS with a folded norm.
template <int M, int R>
__device__ __forceinline__ float gemv_sum(const GemvParts<M, R>& p, int i, int K, GemvNorm norm) {
    const int m = i / R, r = i % R;
    float v = 0.f;
#pragma unroll
    for (int q = 0; q < GEMV_WARPS; q++) v += p.dot[q][m][r];
    if (M == 1 && norm.g) {
        float ss = 0.f;
#pragma unroll
        for (int q = 0; q < GEMV_WARPS; q++) ss += p.sq[q][m];
        return __fmul_rn(v, gemv_inv_rms(ss, K, norm.eps));
    }
    return norm.inv ? __fmul_rn(v, norm.inv[m]) : v;
}

// Each warp's dot products x[m, :] . w[r][:] over its quarter of K (x * g with a folded norm,
// and the squares of x: gemv_norm_stats mirrors this loop), left in shared memory (returned,
// after a block barrier) for gemv_sum.
// A block owns R features and its warps split K, so a narrow matrix still has 4 warps per
// feature group streaming it. A one-row launch issues its first round of weight loads before
// it waits for the kernel before (the weights never depend on it).
template <typename WT, int M, int R>
__device__ __forceinline__ const GemvParts<M, R>& gemv_partials(const WT* const (&w)[R],
                                                                const float* __restrict__ x, int K,
                                                                GemvNorm norm) {
    __shared__ GemvParts<M, R> parts;
    float acc[M][R], sq[M];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int m = 0; m < M; m++) {
        sq[m] = 0.f;
#pragma unroll
        for (int r = 0; r < R; r++) acc[m][r] = 0.f;
    }
    if ((K & 7) == 0) {
        const int k8n = K >> 3;
        const int per = (k8n + GEMV_WARPS - 1) / GEMV_WARPS;
        const int k_lo = warp * per, k_end = min(k8n, k_lo + per);
        constexpr int PER_ROW = GEMV_LOADS / R > 0 ? GEMV_LOADS / R : 1;
        constexpr int U = PER_ROW < GEMV_UNROLL ? PER_ROW : GEMV_UNROLL;
        const int kb0 = k_lo + lane;
        typename GemvW<WT>::Unit wv[U][R];
        gemv_load<WT, U, R>(wv, w, kb0, k_end);
        if (M == 1) pdl_begin();
        for (int kb = kb0; kb < k_end; kb += 32 * U) {
            if (kb != kb0) gemv_load<WT, U, R>(wv, w, kb, k_end);
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int k8 = kb + 32 * u;
                if (k8 >= k_end) break;
                float4 ga = {}, gb = {};
                if (M == 1 && norm.g) {
                    ga = __ldg(reinterpret_cast<const float4*>(norm.g) + 2 * k8);
                    gb = __ldg(reinterpret_cast<const float4*>(norm.g) + 2 * k8 + 1);
                }
#pragma unroll
                for (int m = 0; m < M; m++) {
                    const float4* xp = reinterpret_cast<const float4*>(x + (size_t)m * K) + 2 * k8;
                    float4 a = __ldg(xp), b = __ldg(xp + 1);
                    if (M == 1 && norm.g) {
                        sq[m] = gemv_squares(sq[m], a, b);
                        a = gemv_scaled(a, ga);
                        b = gemv_scaled(b, gb);
                    }
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        float wf[8];
                        GemvW<WT>::to_f32(wv[u][r], wf);
                        acc[m][r] += wf[0] * a.x + wf[1] * a.y + wf[2] * a.z + wf[3] * a.w +
                                     wf[4] * b.x + wf[5] * b.y + wf[6] * b.z + wf[7] * b.w;
                    }
                }
            }
        }
    } else {
        // (No folded norm here: the host folds one only when K % 8 == 0.)
        if (M == 1) pdl_begin();
        const int per = (K + GEMV_WARPS - 1) / GEMV_WARPS;
        const int k_lo = warp * per, k_end = min(K, k_lo + per);
        for (int k = k_lo + lane; k < k_end; k += 32) {
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float wv = GemvW<WT>::one(w[r][k]);
#pragma unroll
                for (int m = 0; m < M; m++) acc[m][r] += wv * x[(size_t)m * K + k];
            }
        }
    }
    constexpr int P = gemv_pow2(M * R);
    float v[P];
#pragma unroll
    for (int i = 0; i < P; i++) v[i] = i < M * R ? acc[i / R][i % R] : 0.f;
    int slot = 0;
    gemv_warp_sums<16, P, P>(v, lane, slot);
    // P / 32 slots a lane from 32 on; below, every (32 / P)-th lane writes its one slot.
    constexpr int HELD = P >= 32 ? P / 32 : 1;
    if (P >= 32 || (lane & (32 / P - 1)) == 0) {
#pragma unroll
        for (int i = 0; i < HELD; i++)
            if (slot + i < M * R) (&parts.dot[warp][0][0])[slot + i] = v[i];
    }
    if (M == 1 && norm.g) {
        const float q = warp_sum(sq[0]);
        if (lane == 0) parts.sq[warp][0] = q;
    }
    __syncthreads();
    return parts;
}

// For GEMV launches of 2-8 rows after an RMS norm (GemvNorm): xg = x * g and inv[row], the
// squares summed exactly as a one-row GEMV folding the norm sums them, so that a row's outputs
// have the same bits alone and in a batch. Grid: rows; block: GEMV_WARPS warps.
extern "C" __global__ void gemv_norm_stats(const float* __restrict__ x, const float* __restrict__ g,
                                           float* __restrict__ xg, float* __restrict__ inv, int K,
                                           float eps) {
    pdl_begin();
    __shared__ float part[GEMV_WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int k8n = K >> 3, per = (k8n + GEMV_WARPS - 1) / GEMV_WARPS;
    const int k_lo = warp * per, k_end = min(k8n, k_lo + per);
    const float4* xr = reinterpret_cast<const float4*>(x + (size_t)blockIdx.x * K);
    const float4* g4 = reinterpret_cast<const float4*>(g);
    float4* out = reinterpret_cast<float4*>(xg + (size_t)blockIdx.x * K);
    float sq = 0.f;
#pragma unroll 4
    for (int k8 = k_lo + lane; k8 < k_end; k8 += 32) {
        const float4 a = xr[2 * k8], b = xr[2 * k8 + 1];
        sq = gemv_squares(sq, a, b);
        out[2 * k8] = gemv_scaled(a, g4[2 * k8]);
        out[2 * k8 + 1] = gemv_scaled(b, g4[2 * k8 + 1]);
    }
    sq = warp_sum(sq);
    if (lane == 0) part[warp] = sq;
    __syncthreads();
    if (threadIdx.x == 0) {
        float ss = 0.f;
#pragma unroll
        for (int q = 0; q < GEMV_WARPS; q++) ss += part[q];
        inv[blockIdx.x] = gemv_inv_rms(ss, K, eps);
    }
}

// An output's sum times its row's scale (fp8 weights; bf16 ones have none).
template <typename WT>
__device__ __forceinline__ float gemv_scale(float v, const float* __restrict__ scale, int n) {
    return sizeof(WT) == 1 ? __fmul_rn(v, scale[n]) : v;
}

// Features n0 .. n0 + R - 1 of one matrix (`scale`: its rows' scales, fp8); with `add`, y += the
// result (a residual stream). Thread i writes output i, so the bias and residual reads are all
// in flight at once.
template <typename WT, int M, int R>
__device__ __forceinline__ void gemv_features(const WT* __restrict__ W,
                                              const float* __restrict__ scale,
                                              const float* __restrict__ x,
                                              const float* __restrict__ bias,
                                              float* __restrict__ y, int N, int K, int n0,
                                              int add, GemvNorm norm) {
    const WT* w[R];
#pragma unroll
    for (int r = 0; r < R; r++) w[r] = W + (size_t)min(n0 + r, N - 1) * K;
    const GemvParts<M, R>& parts = gemv_partials<WT, M, R>(w, x, K, norm);
    for (int i = threadIdx.x; i < M * R; i += blockDim.x) {
        const int m = i / R, n = n0 + i % R;
        if (n >= N) continue;
        const float v =
            gemv_scale<WT>(gemv_sum<M, R>(parts, i, K, norm), scale, n) + (bias ? bias[n] : 0.f);
        y[(size_t)m * N + n] = add ? y[(size_t)m * N + n] + v : v;
    }
}

// The block's feature group (a block of GEMV_WARPS warps owns R features).
__device__ __forceinline__ int gemv_group() { return blockIdx.x; }

// Launch bounds: GEMV_ONE_ROW_BLOCKS an SM for one row (see GEMV_LOADS), none for more (a bound
// of one block changes their register allocation).
#define GEMV_BOUNDS(M) GEMV_BOUNDS_##M
#define GEMV_BOUNDS_1 __launch_bounds__(GEMV_WARPS * 32, GEMV_ONE_ROW_BLOCKS)
#define GEMV_BOUNDS_2
#define GEMV_BOUNDS_3
#define GEMV_BOUNDS_4
#define GEMV_BOUNDS_5
#define GEMV_BOUNDS_6
#define GEMV_BOUNDS_7
#define GEMV_BOUNDS_8
#define GEMV(T, M, R)                                                                             \
    extern "C" __global__ void GEMV_BOUNDS(M) gemv_##T##_##M##_##R(                              \
        const T* __restrict__ W, const float* __restrict__ scale, const float* __restrict__ x,    \
        const float* __restrict__ bias, float* __restrict__ y, int N, int K, int add) {           \
        if (M > 1) pdl_begin();                                                                   \
        const int n0 = gemv_group() * R;                                                           \
        const GemvNorm none{nullptr, 0.f, nullptr};                                               \
        if (n0 < N) gemv_features<T, M, R>(W, scale, x, bias, y, N, K, n0, add, none);            \
        else if (M == 1) pdl_begin();                                                             \
    }                                                                                             \
    /* Features [0, N0) of matrix 0, then N1 of matrix 1, then N2 of matrix 2; R divides N0, N1 */\
    /* With g or inv, the RMS norm before it (GemvNorm). s_i: matrix i's row scales (fp8). */     \
    extern "C" __global__ void GEMV_BOUNDS(M) gemv3_##T##_##M##_##R(                             \
        const T* __restrict__ W0, const T* __restrict__ W1, const T* __restrict__ W2,             \
        const float* __restrict__ s0, const float* __restrict__ s1, const float* __restrict__ s2, \
        const float* __restrict__ x, const float* __restrict__ b0, const float* __restrict__ b1,  \
        const float* __restrict__ b2, float* __restrict__ y0, float* __restrict__ y1,             \
        float* __restrict__ y2, int N0, int N1, int N2, int K, const float* __restrict__ g,       \
        float eps, const float* __restrict__ inv) {                                               \
        if (M > 1) pdl_begin();                                                                   \
        const GemvNorm nm{g, eps, inv};                                                           \
        int n0 = gemv_group() * R;                                                                 \
        if (n0 < N0) return gemv_features<T, M, R>(W0, s0, x, b0, y0, N0, K, n0, 0, nm);          \
        n0 -= N0;                                                                                 \
        if (n0 < N1) return gemv_features<T, M, R>(W1, s1, x, b1, y1, N1, K, n0, 0, nm);          \
        n0 -= N1;                                                                                 \
        if (n0 < N2) gemv_features<T, M, R>(W2, s2, x, b2, y2, N2, K, n0, 0, nm);                 \
        else if (M == 1) pdl_begin();                                                             \
    }
// The SwiGLU variant reads 2R rows per warp, so it comes in R = 1, 2 and 4.
template <typename WT, int M, int R>
__device__ __forceinline__ void gemv_swiglu_body(const WT* __restrict__ Wg,
                                                 const WT* __restrict__ Wu,
                                                 const float* __restrict__ sg,
                                                 const float* __restrict__ su,
                                                 const float* __restrict__ x,
                                                 float* __restrict__ y, int N, int K,
                                                 GemvNorm norm) {
    const int n0 = gemv_group() * R;
    if (n0 >= N) {
        if (M == 1) pdl_begin();
        return;
    }
    const WT* w[2 * R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        w[r] = Wg + (size_t)min(n0 + r, N - 1) * K;
        w[R + r] = Wu + (size_t)min(n0 + r, N - 1) * K;
    }
    const GemvParts<M, 2 * R>& parts = gemv_partials<WT, M, 2 * R>(w, x, K, norm);
    // Thread i writes output i: row i / R's feature n0 + i % R, from its gate and up sums.
    for (int i = threadIdx.x; i < M * R; i += blockDim.x) {
        const int m = i / R, r = i % R, n = n0 + r;
        if (n >= N) continue;
        const float g = gemv_scale<WT>(gemv_sum<M, 2 * R>(parts, m * 2 * R + r, K, norm), sg, n);
        const float u =
            gemv_scale<WT>(gemv_sum<M, 2 * R>(parts, m * 2 * R + R + r, K, norm), su, n);
        y[(size_t)m * N + n] = g / (1.f + expf(-g)) * u;
    }
}

#define GEMV_SWIGLU(T, M, R)                                                                      \
    extern "C" __global__ void GEMV_BOUNDS(M) gemv_swiglu_##T##_##M##_##R(                       \
        const T* __restrict__ Wg, const T* __restrict__ Wu, const float* __restrict__ sg,         \
        const float* __restrict__ su, const float* __restrict__ x, float* __restrict__ y, int N,  \
        int K, const float* __restrict__ g, float eps, const float* __restrict__ inv) {           \
        if (M > 1) pdl_begin();                                                                   \
        gemv_swiglu_body<T, M, R>(Wg, Wu, sg, su, x, y, N, K, GemvNorm{g, eps, inv});             \
    }
#define GEMV_R(T, M)                                                                            \
    GEMV(T, M, 1) GEMV(T, M, 2) GEMV(T, M, 4) GEMV(T, M, 8) GEMV_SWIGLU(T, M, 1)                 \
        GEMV_SWIGLU(T, M, 2) GEMV_SWIGLU(T, M, 4)
#define GEMV_TYPES(M) GEMV_R(bf16, M) GEMV_R(fp8, M)
GEMV_TYPES(1)
GEMV_TYPES(2)
GEMV_TYPES(3)
GEMV_TYPES(4)
GEMV_TYPES(5)
GEMV_TYPES(6)
GEMV_TYPES(7)
GEMV_TYPES(8)

// An fp8 matrix [rows, cols] (cols % 8 == 0) as bf16: each value times its row's scale, rounded
// to bf16 (for cuBLASLt past GEMV_MAX_ROWS rows). A thread an 8-value unit.
extern "C" __global__ void fp8_rows_to_bf16(const fp8* __restrict__ w,
                                            const float* __restrict__ scale,
                                            bf16* __restrict__ out, long long units, int cols) {
    pdl_begin();
    const int per_row = cols >> 3;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < units;
         i += (long long)gridDim.x * blockDim.x) {
        float f[8];
        fp8x8_to_f32(ldg_stream8(reinterpret_cast<const uint2*>(w) + i), f);
        const float s = scale[i / per_row];
        uint32_t p[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const __nv_bfloat162 v = __floats2bfloat162_rn(f[2 * j] * s, f[2 * j + 1] * s);
            p[j] = *reinterpret_cast<const uint32_t*>(&v);
        }
        reinterpret_cast<uint4*>(out)[i] = make_uint4(p[0], p[1], p[2], p[3]);
    }
}
