// Paged attention for decode rows and short prefill chunks on the tensor cores: one block per
// (query row, KV head, split of the row's keys). The G query heads that share the KV head (GQA,
// G <= 16) are the rows of one m16 tile, so every key is read once for all of them; K and V
// tiles of 16 keys are copied from the paged cache into shared memory with cp.async, two tiles
// per warp in flight, and S = Q K^T and O += P V run as mma.sync with f32 accumulators. The four
// warps of a block take every fourth tile of the split, each with its own online softmax, and
// are merged at the end; rows with several splits are merged by attn_decode_merge.
//
// bf16 caches use bf16 mma (Q and P rounded to bf16, as the prefill kernel). fp8 e4m3 caches use
// f16 mma (Q and P in f16): K is widened to f16 exactly in registers, each lane reading 8
// consecutive bytes of a key (dims 32p + 8t ..) for two mmas, with Q's fragments taken in the
// same permutation of the dims; V is widened into shared memory for ldmatrix's transpose.
//
// The split count depends only on the row's own number of visible keys, the warps' share of the
// keys is fixed, and every reduction runs in a fixed order: a row's numerics do not depend on
// what else is in the step. A padded row (context_len 0) gets zeros.
// Grid: (rows, n_kv_heads, DEC_MAX_SPLITS), DTC_WARPS * 32 threads, DtcSmem<HD, T>::BYTES of
// dynamic shared memory (the launcher computes the same). head_dim is HD (64 or 128).
#include <math.h>
#include "mma.cuh"

#define DTC_WARPS 4
#define DTC_BK 16            // keys per warp tile
#define DTC_SPLIT_MIN 128    // keys per split at least
#define DTC_MAX_GROUP 16     // query heads per KV head

// Per-warp shared memory: two stages of K and V tiles as the cache stores them (bf16 tiles with
// padded rows, read by ldmatrix directly; fp8 tiles raw, rows padded by 32 bytes so that a half
// warp's 8-byte reads of rows g = 0..3 hit a quarter of the banks each), plus for fp8 one
// widened f16 V tile.
template <int HD, typename T>
struct DtcSmem {
    static constexpr int ROW = HD + 8;  // 16-bit elements per padded tile row
    static constexpr int RAW_ROW = HD + 32;  // bytes per fp8 tile row
    static constexpr bool FP8 = std::is_same<T, fp8>::value;
    static constexpr int STAGE_BYTES = FP8 ? 2 * DTC_BK * RAW_ROW : 2 * DTC_BK * ROW * 2;
    static constexpr int WIDE_BYTES = FP8 ? DTC_BK * ROW * 2 : 0;
    static constexpr int WARP_BYTES = 2 * STAGE_BYTES + WIDE_BYTES;
    static constexpr int MERGE_BYTES = DTC_WARPS * 16 * (HD + 2) * 4;
    static constexpr int BYTES =
        DTC_WARPS * WARP_BYTES > MERGE_BYTES ? DTC_WARPS * WARP_BYTES : MERGE_BYTES;
};

// Copies keys k0 .. k0 + DTC_BK - 1 of one KV head into a stage (K rows then V rows); keys past
// last repeat the last one (their scores are masked).
template <int HD, typename T>
__device__ __forceinline__ void dtc_load(unsigned char* stage, const T* __restrict__ kc,
                                         const T* __restrict__ vc, const uint32_t* table, int k0,
                                         int last, int block_size, size_t kv_dim, int kvh,
                                         int lane) {
    using S = DtcSmem<HD, T>;
    constexpr int EB = sizeof(T);          // bytes per element
    constexpr int VEC = 16 / EB;           // elements per 16-byte copy
    constexpr int VECS = HD / VEC;         // copies per key row
    constexpr int DST_ROW = S::FP8 ? S::RAW_ROW : S::ROW * 2;  // bytes per tile row in the stage
#pragma unroll
    for (int x = lane; x < DTC_BK * VECS; x += 32) {
        const int j = x / VECS, c = x % VECS;
        const int key = min(k0 + j, last);
        const size_t slot = (size_t)table[key / block_size] * block_size + key % block_size;
        const size_t at = slot * kv_dim + (size_t)kvh * HD + c * VEC;
        cp_async16(stage + j * DST_ROW + c * 16, kc + at);
        cp_async16(stage + (DTC_BK + j) * DST_ROW + c * 16, vc + at);
    }
}

// Where launch row i's split `split` reads: its token, visible keys, split count, key range
// and tiles, and its block table.
struct DtcWork {
    int t, keys, n_split, k_begin, k_end, n_tiles;
    const uint32_t* table;
};
__device__ __forceinline__ DtcWork dtc_work(const uint32_t* __restrict__ rows,
                                            const uint32_t* __restrict__ tok_seq,
                                            const uint32_t* __restrict__ seq_info,
                                            const uint32_t* __restrict__ block_tables, int i,
                                            int split) {
    DtcWork w;
    w.t = rows[i];
    const uint32_t* info = seq_info + 4 * tok_seq[w.t];
    w.keys = dec_keys(w.t, info);
    w.n_split = dec_splits(w.keys, DTC_SPLIT_MIN);
    const int per = (w.keys + w.n_split - 1) / w.n_split;
    w.k_begin = split * per;
    w.k_end = min(w.keys, w.k_begin + per);
    w.n_tiles = (w.k_end - w.k_begin + DTC_BK - 1) / DTC_BK;
    w.table = block_tables + info[3];
    return w;
}

// A warp's first tile of its split (tile `warp`), into its first stage, as one cp.async group.
template <int HD, typename T>
__device__ __forceinline__ void dtc_first_tile(const DtcWork& w, unsigned char* dsm,
                                               const T* __restrict__ kc,
                                               const T* __restrict__ vc, int block_size,
                                               int n_kv_heads, int kvh, int warp, int lane) {
    dtc_load<HD, T>(dsm + warp * DtcSmem<HD, T>::WARP_BYTES, kc, vc, w.table,
                    w.k_begin + warp * DTC_BK, w.k_end - 1, block_size,
                    (size_t)n_kv_heads * HD, kvh, lane);
    cp_async_commit();
}

// One block's work after each warp's first tile is on its way (dtc_first_tile, for warps with
// a tile): launch row i, KV head kvh, split `split` of `w`, with `qg` the G query heads of the
// KV group ([G][HD] floats, from global memory, or shared with Q_SMEM), run by the
// DTC_WARPS * 32 threads numbered `tid` that `sync` (a barrier of exactly those threads) joins,
// with `dsm` (S::BYTES) as their shared memory.
template <int HD, typename T, bool Q_SMEM, class Sync>
__device__ __forceinline__ void attn_decode_tc_core(
    const float* qg, const T* __restrict__ kc, const T* __restrict__ vc, float* __restrict__ out,
    float2* __restrict__ part_ml, float* __restrict__ part_acc, const DtcWork& w, int n_heads,
    int n_kv_heads, int block_size, float scale, int i, int kvh, int split, int tid,
    unsigned char* dsm, Sync sync) {
    using S = DtcSmem<HD, T>;
    using Mma = MmaFor<T>;
    constexpr int KC = HD / 16;  // k-chunks of Q K^T
    constexpr int NT = HD / 8;   // n-tiles of O
    const int t = w.t;
    const int G = n_heads / n_kv_heads, h0 = kvh * G;
    const int n_split = w.n_split;
    const int k_begin = w.k_begin, k_end = w.k_end, n_tiles = w.n_tiles;
    const uint32_t* table = w.table;
    const size_t kv_dim = (size_t)n_kv_heads * HD;

    const int lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, tg = lane & 3;
    unsigned char* wsm = dsm + warp * S::WARP_BYTES;
    const int last = k_end - 1;

    // Q fragments of the group's heads (rows g and g + 8 of the tile; rows >= G are zero),
    // scaled by scale * log2(e) so the softmax uses exp2. For fp8 chunks c and c + 1 take the
    // dims as the K fragments do: 16 c + 8 tg + {0, 1 | 2, 3} and {4, 5 | 6, 7}.
    uint32_t qa[KC][4];
    {
        const float qs = scale * 1.4426950408889634f;
        const bool lo_ok = g < G, hi_ok = g + 8 < G;
        const float* q_lo = qg + (lo_ok ? g : 0) * HD;
        const float* q_hi = qg + (hi_ok ? g + 8 : 0) * HD;
        const auto ld = [](const float* p) {
            if constexpr (Q_SMEM) return *reinterpret_cast<const float2*>(p);
            else return __ldcg(reinterpret_cast<const float2*>(p));
        };
#pragma unroll
        for (int c = 0; c < KC; c++) {
            const int d = S::FP8 ? 16 * (c & ~1) + 8 * tg + 4 * (c & 1) : 16 * c + 2 * tg;
            const int d2 = d + (S::FP8 ? 2 : 8);
            const float2 z = make_float2(0.f, 0.f);
            const float2 a0 = lo_ok ? ld(q_lo + d) : z;
            const float2 a1 = hi_ok ? ld(q_hi + d) : z;
            const float2 a2 = lo_ok ? ld(q_lo + d2) : z;
            const float2 a3 = hi_ok ? ld(q_hi + d2) : z;
            qa[c][0] = Mma::pack(a0.x * qs, a0.y * qs);
            qa[c][1] = Mma::pack(a1.x * qs, a1.y * qs);
            qa[c][2] = Mma::pack(a2.x * qs, a2.y * qs);
            qa[c][3] = Mma::pack(a3.x * qs, a3.y * qs);
        }
    }

    float o[NT][4];
#pragma unroll
    for (int n = 0; n < NT; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.f, l_hi = 0.f;

    for (int it = warp, st = 0; it < n_tiles; it += DTC_WARPS, st ^= 1) {
        const int k0 = k_begin + it * DTC_BK;
        if (it + DTC_WARPS < n_tiles) {
            dtc_load<HD, T>(wsm + (st ^ 1) * S::STAGE_BYTES, kc, vc, table,
                            k0 + DTC_WARPS * DTC_BK, last, block_size, kv_dim, kvh, lane);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncwarp();
        // V's 16 rows as 16-bit values (row stride S::ROW): the bf16 tile's rows 16..31, or the
        // fp8 tile's widened.
        const uint16_t(*vt)[S::ROW];
        const unsigned char* raw = wsm + st * S::STAGE_BYTES;
        if constexpr (S::FP8) {
            uint16_t(*wide)[S::ROW] = reinterpret_cast<uint16_t(*)[S::ROW]>(wsm + 2 * S::STAGE_BYTES);
#pragma unroll
            for (int x = lane; x < DTC_BK * HD / 8; x += 32) {
                const int j = x / (HD / 8), c = x % (HD / 8);
                const uint2 u =
                    *reinterpret_cast<const uint2*>(raw + (DTC_BK + j) * S::RAW_ROW + c * 8);
                *reinterpret_cast<uint4*>(&wide[j][c * 8]) = fp8x8_to_f16x8(u);
            }
            __syncwarp();
            vt = wide;
        } else {
            vt = reinterpret_cast<const uint16_t(*)[S::ROW]>(raw) + DTC_BK;
        }

        // S = Q K^T for 16 keys: 2 n-tiles of 8 keys.
        float s[2][4];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
            for (int c = 0; c < KC; c += 2) {
                uint32_t b[4];
                if constexpr (S::FP8) {
                    const uint4 k = fp8x8_to_f16x8(*reinterpret_cast<const uint2*>(
                        raw + (8 * j + g) * S::RAW_ROW + 16 * c + 8 * tg));
                    b[0] = k.x, b[1] = k.y, b[2] = k.z, b[3] = k.w;
                } else {
                    const uint16_t(*kt)[S::ROW] = reinterpret_cast<const uint16_t(*)[S::ROW]>(raw);
                    ldmatrix_x4(b, &kt[8 * j + (lane & 7)][16 * c + 8 * (lane >> 3)]);
                }
                Mma::mma(s[j], qa[c], b[0], b[1]);
                Mma::mma(s[j], qa[c + 1], b[2], b[3]);
            }
        }
        // Keys past the split's end, then the online softmax (rows g and g + 8 in each quad).
        float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const int key = k0 + 8 * j + 2 * tg;
            if (key > last) s[j][0] = s[j][2] = -INFINITY;
            if (key + 1 > last) s[j][1] = s[j][3] = -INFINITY;
            mx_lo = fmaxf(mx_lo, fmaxf(s[j][0], s[j][1]));
            mx_hi = fmaxf(mx_hi, fmaxf(s[j][2], s[j][3]));
        }
#pragma unroll
        for (int x = 1; x < 4; x <<= 1) {
            mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, x));
            mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, x));
        }
        // Every tile has a visible key, so the new maxima are finite.
        const float mn_lo = fmaxf(m_lo, mx_lo), mn_hi = fmaxf(m_hi, mx_hi);
        const float c_lo = exp2f(m_lo - mn_lo), c_hi = exp2f(m_hi - mn_hi);
        m_lo = mn_lo;
        m_hi = mn_hi;
        l_lo *= c_lo;
        l_hi *= c_hi;
#pragma unroll
        for (int n = 0; n < NT; n++) {
            o[n][0] *= c_lo;
            o[n][1] *= c_lo;
            o[n][2] *= c_hi;
            o[n][3] *= c_hi;
        }
        uint32_t pa[4];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const float p0 = exp2f(s[j][0] - mn_lo), p1 = exp2f(s[j][1] - mn_lo);
            const float p2 = exp2f(s[j][2] - mn_hi), p3 = exp2f(s[j][3] - mn_hi);
            l_lo += p0 + p1;
            l_hi += p2 + p3;
            pa[2 * j] = Mma::pack(p0, p1);
            pa[2 * j + 1] = Mma::pack(p2, p3);
        }
        // O += P V: V rows are tile rows 16..31.
#pragma unroll
        for (int n = 0; n < NT; n += 2) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, &vt[8 * ((lane >> 3) & 1) + (lane & 7)][8 * n + 8 * (lane >> 4)]);
            Mma::mma(o[n], pa, b[0], b[1]);
            Mma::mma(o[n + 1], pa, b[2], b[3]);
        }
        __syncwarp();  // every lane is done with this stage before it is refilled
    }
#pragma unroll
    for (int x = 1; x < 4; x <<= 1) {
        l_lo += __shfl_xor_sync(0xffffffffu, l_lo, x);
        l_hi += __shfl_xor_sync(0xffffffffu, l_hi, x);
    }

    // Merge the warps: each writes (max, sum, unnormalised output) of its valid rows.
    sync();  // every warp is done with its tiles
    float* mrg = reinterpret_cast<float*>(dsm);
    float* w_ml = mrg + warp * 16 * (HD + 2);  // [16][2] then [16][HD]
    float* w_o = w_ml + 32;
    if (tg == 0) {
        w_ml[2 * g] = m_lo;
        w_ml[2 * g + 1] = l_lo;
        w_ml[2 * (g + 8)] = m_hi;
        w_ml[2 * (g + 8) + 1] = l_hi;
    }
#pragma unroll
    for (int n = 0; n < NT; n++) {
        const int d = 8 * n + 2 * tg;
        if (g < G) *reinterpret_cast<float2*>(w_o + g * HD + d) = make_float2(o[n][0], o[n][1]);
        if (g + 8 < G)
            *reinterpret_cast<float2*>(w_o + (g + 8) * HD + d) = make_float2(o[n][2], o[n][3]);
    }
    sync();
    for (int x = tid; x < G * HD; x += DTC_WARPS * 32) {
        const int r = x / HD, d = x % HD, h = h0 + r;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < DTC_WARPS; w++) M = fmaxf(M, mrg[w * 16 * (HD + 2) + 2 * r]);
        float L = 0.f, acc = 0.f;
#pragma unroll
        for (int w = 0; w < DTC_WARPS; w++) {
            const float* b = mrg + w * 16 * (HD + 2);
            if (b[2 * r + 1] > 0.f) {
                const float c = exp2f(b[2 * r] - M);
                L += b[2 * r + 1] * c;
                acc += b[32 + r * HD + d] * c;
            }
        }
        const size_t ph = (size_t)i * n_heads + h;
        if (n_split == 1) {
            out[((size_t)t * n_heads + h) * HD + d] = L > 0.f ? acc / L : 0.f;
        } else {
            part_acc[(ph * DEC_MAX_SPLITS + split) * HD + d] = acc;
            // The merge kernel works in natural-log units.
            if (d == 0) part_ml[ph * DEC_MAX_SPLITS + split] = make_float2(M * 0.6931471805599453f, L);
        }
    }
}

// One block's work from the start: launch row i, KV head kvh, split `split`, its query heads
// read from q. The kernel below is one such block; the weight ring (ring.cu) runs the same body
// on four of its warps, so both give the same bits.
template <int HD, typename T, class Sync>
__device__ __forceinline__ void attn_decode_tc_body(
    const float* __restrict__ q, const T* __restrict__ kc, const T* __restrict__ vc,
    float* __restrict__ out, float2* __restrict__ part_ml, float* __restrict__ part_acc,
    const uint32_t* __restrict__ rows, const uint32_t* __restrict__ tok_seq,
    const uint32_t* __restrict__ seq_info, const uint32_t* __restrict__ block_tables, int n_heads,
    int n_kv_heads, int block_size, float scale, int i, int kvh, int split, int tid,
    unsigned char* dsm, Sync sync) {
    const DtcWork w = dtc_work(rows, tok_seq, seq_info, block_tables, i, split);
    if (split >= w.n_split) return;
    const int warp = tid >> 5;
    // The warp's first tile is on its way while Q is read.
    if (warp < w.n_tiles)
        dtc_first_tile<HD, T>(w, dsm, kc, vc, block_size, n_kv_heads, kvh, warp, tid & 31);
    const float* qg = q + ((size_t)w.t * n_heads + kvh * (n_heads / n_kv_heads)) * HD;
    attn_decode_tc_core<HD, T, false>(qg, kc, vc, out, part_ml, part_acc, w, n_heads, n_kv_heads,
                                      block_size, scale, i, kvh, split, tid, dsm, sync);
}

#define ATTN_DECODE_TC(NAME, T, HD)                                                               \
    extern "C" __global__ void __launch_bounds__(DTC_WARPS * 32) NAME##_##HD(                     \
        const float* __restrict__ q, const T* __restrict__ kc, const T* __restrict__ vc,          \
        float* __restrict__ out, float2* __restrict__ part_ml, float* __restrict__ part_acc,      \
        const uint32_t* __restrict__ rows, const uint32_t* __restrict__ tok_seq,                  \
        const uint32_t* __restrict__ seq_info, const uint32_t* __restrict__ block_tables,         \
        int n_heads, int n_kv_heads, int block_size, float scale) {                               \
        pdl_begin();                                                                              \
        extern __shared__ __align__(16) unsigned char dsm[];                                      \
        attn_decode_tc_body<HD, T>(q, kc, vc, out, part_ml, part_acc, rows, tok_seq, seq_info,    \
                                   block_tables, n_heads, n_kv_heads, block_size, scale,          \
                                   blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, dsm,          \
                                   [] { __syncthreads(); });                                      \
    }
ATTN_DECODE_TC(attn_decode_tc, bf16, 64)
ATTN_DECODE_TC(attn_decode_tc, bf16, 128)
ATTN_DECODE_TC(attn_decode_tc_fp8, fp8, 64)
ATTN_DECODE_TC(attn_decode_tc_fp8, fp8, 128)

// The merge of launch row i's splits for the G heads of one KV group from h0, by one block of
// DTC_WARPS warps: attn_merge_head's arithmetic, split by split in order, so the same bits. The
// partial outputs are staged in shared memory `sm` (sm_bytes) with cp.async, as many heads at a
// time as fit (a round trip each); the (max, sum) pairs go to ml_sm ([G][DEC_MAX_SPLITS]), where
// a thread a head turns each max into its split's weight and sums the head's denominator once.
template <int HD>
__device__ __forceinline__ void dtc_merge_group(const float2* __restrict__ part_ml,
                                                const float* __restrict__ part_acc,
                                                float* __restrict__ out, int t, int i, int n_heads,
                                                int h0, int G, int n_split, int tid,
                                                unsigned char* sm, int sm_bytes, float2* ml_sm) {
    constexpr int THREADS = DTC_WARPS * 32, V = HD / 4;  // 16-byte pieces of a head's row
    __shared__ float den[DTC_MAX_GROUP];
    const size_t ph0 = ((size_t)i * n_heads + h0) * DEC_MAX_SPLITS;
    const int chunk = max(1, min(G, sm_bytes / (n_split * HD * 4)));
    float* acc = reinterpret_cast<float*>(sm);
    for (int r0 = 0; r0 < G; r0 += chunk) {
        const int nr = min(chunk, G - r0);
        for (int x = tid; x < nr * n_split * V; x += THREADS) {
            const int c = x % V, rs = x / V;
            cp_async16(acc + rs * HD + 4 * c,
                       part_acc + (ph0 + (size_t)(r0 + rs / n_split) * DEC_MAX_SPLITS +
                                   rs % n_split) * HD + 4 * c);
        }
        cp_async_commit();
        if (r0 == 0) {  // the pairs and weights while the first copies are in flight
            for (int x = tid; x < G * n_split; x += THREADS)
                ml_sm[(x / n_split) * DEC_MAX_SPLITS + x % n_split] =
                    __ldcg(part_ml + ph0 + (size_t)(x / n_split) * DEC_MAX_SPLITS + x % n_split);
            __syncthreads();
            if (tid < G) {
                float2* ml = ml_sm + tid * DEC_MAX_SPLITS;
                float M = -INFINITY, L = 0.f;
                for (int s = 0; s < n_split; s++) M = fmaxf(M, ml[s].x);
                for (int s = 0; s < n_split; s++) {
                    if (ml[s].y > 0.f) {
                        ml[s].x = __expf(ml[s].x - M);  // the split's weight from here on
                        L = __fmaf_rn(ml[s].y, ml[s].x, L);
                    }
                }
                den[tid] = L;
            }
        }
        cp_async_wait<0>();
        __syncthreads();
        for (int x = tid; x < nr * HD; x += THREADS) {
            const int r = x / HD, d = x % HD;
            const float2* ml = ml_sm + (r0 + r) * DEC_MAX_SPLITS;
            float o = 0.f;
            for (int s = 0; s < n_split; s++)
                if (ml[s].y > 0.f) o = __fmaf_rn(acc[(r * n_split + s) * HD + d], ml[s].x, o);
            const float L = den[r0 + r];
            out[((size_t)t * n_heads + h0 + r0 + r) * HD + d] = L > 0.f ? o / L : 0.f;
        }
        __syncthreads();  // the staged partials are read before the next chunk's copies
    }
}

// Batch-1 decode's attention step in one launch (the one-row decode graph): each block runs
// rope_write_kv's q/k norm and RoPE of its KV group's query heads into shared memory (in the last
// split's block, the warp that reads this step's key also of the key, which it writes with the
// value into the cache), then the block above; of a row's several splits, the block that
// finishes last merges them (dtc_merge_group). Three launches a layer become one, with the bits of rope_write_kv +
// attn_decode_tc + attn_decode_merge_wide, which launches of more rows keep. Keys cached by
// earlier steps never depend on the kernel before, nor does the step's metadata (copied before
// the graph), so a warp whose first tile does not hold this step's key loads it before the wait.
// Grid: (1, n_kv_heads, DEC_MAX_SPLITS), DTC_WARPS * 32 threads, DtcSmem<HD, T>::BYTES +
// DTC_ROPE_SMEM(HD) bytes of dynamic shared memory. arrivals[kvh] is zero before and after.
#define DTC_ROPE_SMEM(HD) ((DTC_MAX_GROUP + 1) * (HD) * 4)
template <int HD, typename T>
__device__ __forceinline__ void attn_decode_tc_rope(
    float* __restrict__ q, float* __restrict__ k, const float* __restrict__ v,
    const float* __restrict__ q_norm, const float* __restrict__ k_norm, float eps,
    const uint32_t* __restrict__ pos, const float* __restrict__ inv_freq,
    const uint32_t* __restrict__ slots, T* __restrict__ kc, T* __restrict__ vc,
    float* __restrict__ out, float2* __restrict__ part_ml, float* __restrict__ part_acc,
    unsigned* __restrict__ arrivals, const uint32_t* __restrict__ rows,
    const uint32_t* __restrict__ tok_seq, const uint32_t* __restrict__ seq_info,
    const uint32_t* __restrict__ block_tables, int n_heads, int n_kv_heads, int block_size,
    float scale, int rotary_dim, int neox, unsigned char* dsm) {
    __shared__ int last_block;
    const int kvh = blockIdx.y, split = blockIdx.z, tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    const DtcWork w = dtc_work(rows, tok_seq, seq_info, block_tables, 0, split);
    // Split 0's blocks always wait below, so the launch still ends after the kernel before it.
    if (split >= w.n_split) return;
    // A tile holds this step's key (keys - 1) when it reaches the row's last key.
    const int k0 = w.k_begin + warp * DTC_BK;
    const bool early = warp < w.n_tiles && min(k0 + DTC_BK, w.k_end) < w.keys;
    if (early) dtc_first_tile<HD, T>(w, dsm, kc, vc, block_size, n_kv_heads, kvh, warp, lane);
    pdl_begin();
    const int G = n_heads / n_kv_heads;
    float* qs = reinterpret_cast<float*>(dsm + DtcSmem<HD, T>::BYTES);  // [G + 1][HD]
    for (int hh = warp; hh < G; hh += DTC_WARPS)
        rope_write_kv_head(q, k, v, q_norm, k_norm, eps, pos, inv_freq, slots, kc, vc, n_heads,
                           n_kv_heads, HD, rotary_dim, neox, w.t, kvh * G + hh, qs + hh * HD,
                           false);
    __syncthreads();  // every warp reads every query head
    // One warp reads this step's key: the one with the last split's last tile. It writes the key
    // and value into the cache (no other block reads them) while the other warps go on.
    if (split == w.n_split - 1 && w.n_tiles > 0 && warp == (w.n_tiles - 1) % DTC_WARPS) {
        rope_write_kv_head(q, k, v, q_norm, k_norm, eps, pos, inv_freq, slots, kc, vc, n_heads,
                           n_kv_heads, HD, rotary_dim, neox, w.t, n_heads + kvh, qs + G * HD,
                           false);
        __syncwarp();  // its lanes' stores before their copies of the tile
    }
    if (warp < w.n_tiles && !early)
        dtc_first_tile<HD, T>(w, dsm, kc, vc, block_size, n_kv_heads, kvh, warp, lane);
    attn_decode_tc_core<HD, T, true>(qs, kc, vc, out, part_ml, part_acc, w, n_heads, n_kv_heads,
                                     block_size, scale, 0, kvh, split, tid, dsm,
                                     [] { __syncthreads(); });
    if (w.n_split == 1) return;
    // Every thread's partial results out before the block counts itself in.
    __threadfence();
    __syncthreads();
    if (tid == 0) {
        last_block = atomicAdd(arrivals + kvh, 1u) == (unsigned)(w.n_split - 1);
        if (last_block) arrivals[kvh] = 0;
    }
    __syncthreads();
    if (!last_block) return;
    __threadfence();
    dtc_merge_group<HD>(part_ml, part_acc, out, w.t, 0, n_heads, kvh * G, G, w.n_split, tid, dsm,
                        DtcSmem<HD, T>::BYTES, reinterpret_cast<float2*>(qs));
}

#define ATTN_DECODE_TC_ROPE(KERNEL, T, HD)                                                        \
    extern "C" __global__ void __launch_bounds__(DTC_WARPS * 32) KERNEL##_##HD(                   \
        float* __restrict__ q, float* __restrict__ k, const float* __restrict__ v,                \
        const float* __restrict__ q_norm, const float* __restrict__ k_norm, float eps,            \
        const uint32_t* __restrict__ pos, const float* __restrict__ inv_freq,                     \
        const uint32_t* __restrict__ slots, T* __restrict__ kc, T* __restrict__ vc,               \
        float* __restrict__ out, float2* __restrict__ part_ml, float* __restrict__ part_acc,      \
        unsigned* __restrict__ arrivals, const uint32_t* __restrict__ rows,                       \
        const uint32_t* __restrict__ tok_seq, const uint32_t* __restrict__ seq_info,              \
        const uint32_t* __restrict__ block_tables, int n_heads, int n_kv_heads, int block_size,   \
        float scale, int rotary_dim, int neox) {                                                  \
        extern __shared__ __align__(16) unsigned char dsm[];                                      \
        attn_decode_tc_rope<HD, T>(q, k, v, q_norm, k_norm, eps, pos, inv_freq, slots, kc, vc,    \
                                   out, part_ml, part_acc, arrivals, rows, tok_seq, seq_info,     \
                                   block_tables, n_heads, n_kv_heads, block_size, scale,          \
                                   rotary_dim, neox, dsm);                                        \
    }
ATTN_DECODE_TC_ROPE(attn_decode_tc_rope, bf16, 64)
ATTN_DECODE_TC_ROPE(attn_decode_tc_rope, bf16, 128)
ATTN_DECODE_TC_ROPE(attn_decode_tc_rope_fp8, fp8, 64)
ATTN_DECODE_TC_ROPE(attn_decode_tc_rope_fp8, fp8, 128)
