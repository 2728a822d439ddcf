// Paged attention for decode rows and short prefill chunks: one block per (query row, group of
// HB query heads sharing one KV head, split of the row's keys). Each key is read once per block
// and used for all HB heads (GQA), and long contexts are cut into up to DEC_MAX_SPLITS splits so
// a few rows still fill the GPU; a second kernel merges the splits' partial softmaxes.
//
// The split count depends only on the row's own number of visible keys (never on the batch), and
// every reduction runs in a fixed order, so a row's numerics do not depend on what else is in the
// step. A padded row (context_len 0: no visible key) gets zeros.
//
// Layout: lanes_per_key (LPK) lanes hold one key, 8 dimensions each (one 16-byte load of K and
// one of V); a warp holds 32 / LPK keys at once. head_dim % 8 == 0 and head_dim <= 8 * LPK.
#include <math.h>
#include "common.cuh"

#define DEC_WARPS 8
#define DEC_MAX_SPLITS 32
#define DEC_SPLIT_MIN 64  // keys per split at least

// Splits for a row that sees `keys` keys, each of at least `split_min` keys: a function of
// `keys` alone (for a given kernel).
__device__ __forceinline__ int dec_splits(int keys, int split_min) {
    return max(1, min(DEC_MAX_SPLITS, (keys + split_min - 1) / split_min));
}

// Visible keys of token row t (0 for a padded row).
__device__ __forceinline__ int dec_keys(int t, const uint32_t* info) {
    const int q_start = info[0], q_len = info[1], ctx_len = info[2];
    return max(0, ctx_len - q_len + (t - q_start) + 1);
}

// Grid: (rows, n_heads / HB, DEC_MAX_SPLITS), DEC_WARPS * 32 threads. rows[i] is the token
// index of launch row i. part_ml[(i * n_heads + h) * DEC_MAX_SPLITS + s] holds (max, sum) and
// part_acc[((i * n_heads + h) * DEC_MAX_SPLITS + s) * head_dim + d] the unnormalised output of
// split s when the row has more than one split; a one-split row writes `out` directly.
template <int LPK, int HB, typename T>
__device__ __forceinline__ void attn_decode_body(
    const float* __restrict__ q, const T* __restrict__ kc, const T* __restrict__ vc,
    float* __restrict__ out, float2* __restrict__ part_ml, float* __restrict__ part_acc,
    const uint32_t* __restrict__ rows, const uint32_t* __restrict__ tok_seq,
    const uint32_t* __restrict__ seq_info, const uint32_t* __restrict__ block_tables, int n_heads,
    int n_kv_heads, int head_dim, int block_size, float scale) {
    constexpr int KPW = 32 / LPK;          // keys per warp at once
    constexpr int G = DEC_WARPS * KPW;     // key groups per block
    constexpr int W = LPK * 8;             // dimensions a key group covers
    __shared__ float sm_m[HB][G], sm_l[HB][G];
    __shared__ float sm_acc[HB][G * W];

    const int i = blockIdx.x, t = rows[i];
    const int h0 = blockIdx.y * HB, split = blockIdx.z;
    const uint32_t* info = seq_info + 4 * tok_seq[t];
    const int keys = dec_keys(t, info);
    const int n_split = dec_splits(keys, DEC_SPLIT_MIN);
    if (split >= n_split) return;
    const int per = (keys + n_split - 1) / n_split;
    const int k_begin = split * per, k_end = min(keys, k_begin + per);
    const uint32_t* table = block_tables + info[3];
    const int kvh = h0 / (n_heads / n_kv_heads);
    const int kv_dim = n_kv_heads * head_dim;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int kig = lane / LPK, kl = lane % LPK, g = warp * KPW + kig;
    const int d0 = kl * 8;
    const bool dims = d0 < head_dim;

    float qr[HB][8], acc[HB][8], m[HB], l[HB];
#pragma unroll
    for (int hb = 0; hb < HB; hb++) {
        const float* qh = q + ((size_t)t * n_heads + h0 + hb) * head_dim + d0;
#pragma unroll
        for (int e = 0; e < 8; e++) {
            qr[hb][e] = dims ? qh[e] * scale : 0.f;
            acc[hb][e] = 0.f;
        }
        m[hb] = -INFINITY;
        l[hb] = 0.f;
    }
    // Every lane of a warp runs the same iterations (keys past the split are skipped, not
    // looped over), so the full-warp shuffles below stay converged.
    for (int jb = k_begin + warp * KPW; jb < k_end; jb += DEC_WARPS * KPW) {
        const int j = jb + kig;
        const bool valid = j < k_end;
        float kf[8], vf[8];
        if (valid && dims) {
            const size_t slot = (size_t)table[j / block_size] * block_size + j % block_size;
            const size_t off = slot * kv_dim + kvh * head_dim + d0;
            kv8_to_f32(kc + off, kf);
            kv8_to_f32(vc + off, vf);
        } else {
#pragma unroll
            for (int e = 0; e < 8; e++) kf[e] = vf[e] = 0.f;
        }
#pragma unroll
        for (int hb = 0; hb < HB; hb++) {
            float dot = 0.f;
#pragma unroll
            for (int e = 0; e < 8; e++) dot += qr[hb][e] * kf[e];
#pragma unroll
            for (int o = LPK / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
            if (valid) {
                const float m_new = fmaxf(m[hb], dot);
                const float corr = __expf(m[hb] - m_new), p = __expf(dot - m_new);
                l[hb] = l[hb] * corr + p;
#pragma unroll
                for (int e = 0; e < 8; e++) acc[hb][e] = acc[hb][e] * corr + p * vf[e];
                m[hb] = m_new;
            }
        }
    }
#pragma unroll
    for (int hb = 0; hb < HB; hb++) {
        if (kl == 0) {
            sm_m[hb][g] = m[hb];
            sm_l[hb][g] = l[hb];
        }
#pragma unroll
        for (int e = 0; e < 8; e++) sm_acc[hb][g * W + d0 + e] = acc[hb][e];
    }
    __syncthreads();
    for (int x = threadIdx.x; x < HB * head_dim; x += blockDim.x) {
        const int hb = x / head_dim, d = x % head_dim, h = h0 + hb;
        float M = -INFINITY;
        for (int k = 0; k < G; k++) M = fmaxf(M, sm_m[hb][k]);
        float L = 0.f, o = 0.f;
        for (int k = 0; k < G; k++) {
            if (sm_l[hb][k] > 0.f) {
                const float c = __expf(sm_m[hb][k] - M);
                L += sm_l[hb][k] * c;
                o += sm_acc[hb][k * W + d] * c;
            }
        }
        const size_t ph = (size_t)i * n_heads + h;
        if (n_split == 1) {
            out[((size_t)t * n_heads + h) * head_dim + d] = L > 0.f ? o / L : 0.f;
        } else {
            part_acc[(ph * DEC_MAX_SPLITS + split) * head_dim + d] = o;
            if (d == 0) part_ml[ph * DEC_MAX_SPLITS + split] = make_float2(M, L);
        }
    }
}

#define ATTN_DECODE(NAME, T, LPK, HB)                                                             \
    extern "C" __global__ void __launch_bounds__(DEC_WARPS * 32) NAME##_##LPK##_##HB(             \
        const float* __restrict__ q, const T* __restrict__ kc, const T* __restrict__ vc,          \
        float* __restrict__ out, float2* __restrict__ part_ml, float* __restrict__ part_acc,      \
        const uint32_t* __restrict__ rows, const uint32_t* __restrict__ tok_seq,                  \
        const uint32_t* __restrict__ seq_info, const uint32_t* __restrict__ block_tables,         \
        int n_heads, int n_kv_heads, int head_dim, int block_size, float scale) {                 \
        pdl_begin();                                                                              \
        attn_decode_body<LPK, HB, T>(q, kc, vc, out, part_ml, part_acc, rows, tok_seq, seq_info,  \
                                     block_tables, n_heads, n_kv_heads, head_dim, block_size,     \
                                     scale);                                                      \
    }
#define ATTN_DECODE_HB(NAME, T, LPK) \
    ATTN_DECODE(NAME, T, LPK, 1) ATTN_DECODE(NAME, T, LPK, 2) ATTN_DECODE(NAME, T, LPK, 4)
#define ATTN_DECODE_ALL(NAME, T) \
    ATTN_DECODE_HB(NAME, T, 8) ATTN_DECODE_HB(NAME, T, 16) ATTN_DECODE_HB(NAME, T, 32)
ATTN_DECODE_ALL(attn_decode, bf16)
ATTN_DECODE_ALL(attn_decode_fp8, fp8)

// Merges the splits of launch row i's head h (nothing when the row has one split), its
// dimensions striped over `threads` threads numbered `tid`. The partial results come from L2:
// in the weight ring (ring.cu), which runs this too, another block wrote them in this launch.
// WIDE loads every split's values before using any (one round trip instead of one a split, for
// launches of a few rows, whose merge is all latency; the registers it takes cost occupancy
// when there are many rows). Both forms do the same arithmetic in split order, with explicit
// fused multiply-adds (as does dtc_merge_group in attention_decode_tc.cu): same bits.
template <bool WIDE>
__device__ __forceinline__ void attn_merge_head(const float2* __restrict__ part_ml,
                                                const float* __restrict__ part_acc,
                                                void* __restrict__ out, int out_bf16,
                                                const uint32_t* __restrict__ rows,
                                                const uint32_t* __restrict__ tok_seq,
                                                const uint32_t* __restrict__ seq_info,
                                                int n_heads, int head_dim, int split_min, int i,
                                                int h, int tid, int threads) {
    const int t = rows[i];
    const int n_split = dec_splits(dec_keys(t, seq_info + 4 * tok_seq[t]), split_min);
    if (n_split == 1) return;
    const size_t ph = ((size_t)i * n_heads + h) * DEC_MAX_SPLITS;
    if constexpr (WIDE) {
        float2 ml[DEC_MAX_SPLITS];
#pragma unroll
        for (int s = 0; s < DEC_MAX_SPLITS; s++)
            ml[s] = s < n_split ? __ldcg(part_ml + ph + s) : make_float2(-INFINITY, 0.f);
        float M = -INFINITY;
#pragma unroll
        for (int s = 0; s < DEC_MAX_SPLITS; s++)
            if (s < n_split) M = fmaxf(M, ml[s].x);
        float L = 0.f;
#pragma unroll
        for (int s = 0; s < DEC_MAX_SPLITS; s++)
            if (s < n_split && ml[s].y > 0.f) L = __fmaf_rn(ml[s].y, __expf(ml[s].x - M), L);
        for (int d = tid; d < head_dim; d += threads) {
            float a[DEC_MAX_SPLITS];
#pragma unroll
            for (int s = 0; s < DEC_MAX_SPLITS; s++)
                a[s] = s < n_split ? __ldcg(part_acc + (ph + s) * head_dim + d) : 0.f;
            float o = 0.f;
#pragma unroll
            for (int s = 0; s < DEC_MAX_SPLITS; s++)
                if (s < n_split && ml[s].y > 0.f) o = __fmaf_rn(a[s], __expf(ml[s].x - M), o);
            store_act(out, ((size_t)t * n_heads + h) * head_dim + d, L > 0.f ? o / L : 0.f,
                      out_bf16);
        }
    } else {
        float M = -INFINITY;
        for (int s = 0; s < n_split; s++) M = fmaxf(M, __ldcg(part_ml + ph + s).x);
        float L = 0.f;
        for (int s = 0; s < n_split; s++) {
            const float2 ml = __ldcg(part_ml + ph + s);
            if (ml.y > 0.f) L = __fmaf_rn(ml.y, __expf(ml.x - M), L);
        }
        for (int d = tid; d < head_dim; d += threads) {
            float o = 0.f;
            for (int s = 0; s < n_split; s++) {
                const float2 ml = __ldcg(part_ml + ph + s);
                if (ml.y > 0.f)
                    o = __fmaf_rn(__ldcg(part_acc + (ph + s) * head_dim + d), __expf(ml.x - M), o);
            }
            store_act(out, ((size_t)t * n_heads + h) * head_dim + d, L > 0.f ? o / L : 0.f,
                      out_bf16);
        }
    }
}

// Merges the splits of rows with more than one (in split order); split_min is the split kernel's.
// `out` is f32, or bf16 when out_bf16 (rows of the tensor-core split kernel only).
// Grid: (rows, n_heads). The _wide form is for launches of few rows (attn_merge_head).
#define ATTN_DECODE_MERGE(NAME, WIDE)                                                             \
    extern "C" __global__ void NAME(const float2* __restrict__ part_ml,                           \
                                    const float* __restrict__ part_acc, void* __restrict__ out,   \
                                    const uint32_t* __restrict__ rows,                            \
                                    const uint32_t* __restrict__ tok_seq,                         \
                                    const uint32_t* __restrict__ seq_info, int n_heads,           \
                                    int head_dim, int split_min, int out_bf16) {                  \
        pdl_begin();                                                                              \
        attn_merge_head<WIDE>(part_ml, part_acc, out, out_bf16, rows, tok_seq, seq_info, n_heads, \
                              head_dim, split_min, blockIdx.x, blockIdx.y, threadIdx.x,           \
                              blockDim.x);                                                        \
    }
ATTN_DECODE_MERGE(attn_decode_merge, false)
ATTN_DECODE_MERGE(attn_decode_merge_wide, true)
