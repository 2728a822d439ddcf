// Paged attention for decode rows and short prefill chunks on the tensor cores: one block per
// (query row, KV head, split of the row's keys). The products run transposed, keys and dims as
// the m16 side: S^T = K Q^T and O^T += V^T P^T, the G query heads that share the KV head (GQA)
// as the n8 side (one tile for G <= 8, two for G <= 16), so every key is read once for all of
// them and a lane keeps O^T's 16 dims x 8 heads a tile in 4 registers (32 for head_dim 128,
// half of what heads as the m16 side took; the registers set how many blocks share an SM). K
// and V tiles of 16 keys are copied from the paged cache into shared memory with cp.async, one
// tile per warp in flight while it works on another, and run through mma.sync with f32
// accumulators; P^T goes from S^T's accumulators to O^T's B fragments by movmatrix. The four
// warps of a block take every fourth tile of the split, each with its own online softmax, and
// are merged at the end; rows with several splits are merged by attn_decode_merge.
//
// bf16 caches use bf16 mma (Q and P rounded to bf16, as the prefill kernel). fp8 e4m3 caches use
// f16 mma (Q and P in f16), the raw bytes read by ldmatrix and widened exactly in registers:
// a K row's 4 bytes a lane are dims 4 tg .. 4 tg + 3 of a 16-dim chunk (Q's fragments take the
// dims in that order); V, transposed as 16-bit pairs, gives a lane two keys of two dims, which
// byte permutes regroup by dim (the A fragment's rows g and g + 8 are dims 2 g and 2 g + 1).
//
// The split count depends only on the row's own number of visible keys, the warps' share of the
// keys is fixed, and every reduction runs in a fixed order: a row's numerics do not depend on
// what else is in the step. A padded row (context_len 0) gets zeros. The output is f32, or bf16
// when the launch asks (out_bf16; attn_decode_merge writes rows of several splits the same way).
// Grid: (rows, n_kv_heads, DEC_MAX_SPLITS), DTC_WARPS * 32 threads, DtcSmem<HD, T>::BYTES of
// dynamic shared memory (the launcher computes the same). head_dim is HD (64 or 128).
#include <math.h>
#include "mma.cuh"

#define DTC_WARPS 4
#define DTC_BK 16            // keys per warp tile
#ifndef DTC_SPLIT_MIN
#define DTC_SPLIT_MIN 384    // keys per split at least
#endif
// DTC_STAGES, DTC_SPLIT_MIN and DTC_MIN_BLOCKS are settings for tests/device/decode_attn_bench.cu
// to vary; the launcher (kernels/attention.rs) assumes these values.
#ifndef DTC_STAGES
#define DTC_STAGES 2         // a warp's tiles in shared memory: one in use, the rest in flight
#endif
#ifndef DTC_MIN_BLOCKS
#define DTC_MIN_BLOCKS 5     // blocks an SM at least (groups of up to 8): 96 registers a thread
#endif
#define DTC_MAX_GROUP 16     // query heads per KV head
// Launch bounds for NQ tiles of query heads: blocks an SM at least (two tiles take more
// registers).
#define DTC_BOUNDS(NQ) __launch_bounds__(DTC_WARPS * 32, (NQ) == 1 ? DTC_MIN_BLOCKS : 3)

// Per-warp shared memory: DTC_STAGES stages of K and V tiles as the cache stores them, rows
// padded by 16 bytes so that ldmatrix's 8 rows of 16 bytes hit every bank once.
template <int HD, typename T>
struct DtcSmem {
    static constexpr int ROW = HD + 8;  // 16-bit elements per padded tile row
    static constexpr int RAW_ROW = HD + 16;  // bytes per fp8 tile row
    static constexpr bool FP8 = std::is_same<T, fp8>::value;
    static constexpr int STAGE_BYTES = FP8 ? 2 * DTC_BK * RAW_ROW : 2 * DTC_BK * ROW * 2;
    static constexpr int WARP_BYTES = DTC_STAGES * STAGE_BYTES;
    static constexpr int MERGE_BYTES = DTC_WARPS * 16 * (HD + 2) * 4;
    static constexpr int BYTES =
        DTC_WARPS * WARP_BYTES > MERGE_BYTES ? DTC_WARPS * WARP_BYTES : MERGE_BYTES;
};

// The cache slot of a row's key `key`: the spec's block sizes (8-128) are powers of two, a shift
// and a mask (a division costs ~20 instructions a copy); any other by division.
__device__ __forceinline__ size_t dtc_slot(const uint32_t* table, int key, int block_size) {
    if ((block_size & (block_size - 1)) == 0) {
        const int sh = __ffs(block_size) - 1;
        return ((size_t)table[key >> sh] << sh) + (key & (block_size - 1));
    }
    return (size_t)table[key / block_size] * block_size + key % block_size;
}

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
        const size_t slot = dtc_slot(table, key, block_size);
        const size_t at = slot * kv_dim + (size_t)kvh * HD + c * VEC;
        cp_async16(stage + j * DST_ROW + c * 16, kc + at);
        cp_async16(stage + (DTC_BK + j) * DST_ROW + c * 16, vc + at);
    }
}

// Where launch row i's split `split` reads: its token, visible keys, split count, key range
// and tiles, and its block table.
// `cached`: the row's keys cached before this step (the step writes the rest).
struct DtcWork {
    int t, keys, cached, n_split, k_begin, k_end, n_tiles;
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
    w.cached = (int)info[2] - (int)info[1];
    w.n_split = dec_splits(w.keys, DTC_SPLIT_MIN);
    const int per = (w.keys + w.n_split - 1) / w.n_split;
    w.k_begin = split * per;
    w.k_end = min(w.keys, w.k_begin + per);
    w.n_tiles = (w.k_end - w.k_begin + DTC_BK - 1) / DTC_BK;
    w.table = block_tables + info[3];
    return w;
}

// A warp's first DTC_STAGES - 1 tiles of its split (tiles warp, warp + DTC_WARPS, ..), into
// its first stages, a cp.async group each (empty past the split's tiles).
template <int HD, typename T>
__device__ __forceinline__ void dtc_first_tiles(const DtcWork& w, unsigned char* dsm,
                                                const T* __restrict__ kc,
                                                const T* __restrict__ vc, int block_size,
                                                int n_kv_heads, int kvh, int warp, int lane) {
    using S = DtcSmem<HD, T>;
#pragma unroll
    for (int j = 0; j < DTC_STAGES - 1; j++) {
        const int tile = warp + j * DTC_WARPS;
        if (tile < w.n_tiles)
            dtc_load<HD, T>(dsm + warp * S::WARP_BYTES + j * S::STAGE_BYTES, kc, vc, w.table,
                            w.k_begin + tile * DTC_BK, w.k_end - 1, block_size,
                            (size_t)n_kv_heads * HD, kvh, lane);
        cp_async_commit();
    }
}

// The key past a warp's first tiles (dtc_first_tiles).
__device__ __forceinline__ int dtc_first_tiles_end(const DtcWork& w, int warp) {
    return min(w.k_begin + (warp + (DTC_STAGES - 2) * DTC_WARPS + 1) * DTC_BK, w.k_end);
}

// One block's work after each warp's first tiles are on their way (dtc_first_tiles, for warps with
// a tile): launch row i, KV head kvh, split `split` of `w`, with `qg` the G query heads of the
// KV group ([G][HD] floats, from global memory, or shared with Q_SMEM), run by the
// DTC_WARPS * 32 threads numbered `tid` that `sync` (a barrier of exactly those threads) joins,
// with `dsm` (S::BYTES) as their shared memory. NQ: the group's tiles of 8 query heads (1 for
// G <= 8, 2 for G <= 16). A row's output (of one split) goes to `out` in f32, or in bf16 when
// out_bf16 (then it only feeds the o-projection's GEMM); partial outputs are f32.
template <int HD, typename T, bool Q_SMEM, int NQ, class Sync>
__device__ __forceinline__ void attn_decode_tc_core(
    const float* qg, const T* __restrict__ kc, const T* __restrict__ vc, void* __restrict__ out,
    int out_bf16, float2* __restrict__ part_ml, float* __restrict__ part_acc, const DtcWork& w,
    int n_heads, int n_kv_heads, int block_size, float scale, int i, int kvh, int split, int tid,
    unsigned char* dsm, Sync sync) {
    using S = DtcSmem<HD, T>;
    using Mma = MmaFor<T>;
    constexpr int KC = HD / 16;  // k-chunks of S^T = K Q^T, m-tiles of O^T = V^T P^T
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

    // B fragments of Q^T: n-tile n is the group's heads 8 n .. 8 n + 7 (heads >= G zero), lane
    // (g, tg) holding head 8 n + g's dims of chunk c that K's A fragment pairs with them: bf16
    // 16 c + 2 tg + {0, 1 | 8, 9}, fp8 16 c + 4 tg + {0, 1 | 2, 3} (the 4 bytes of a K row
    // ldmatrix gives a lane). Scaled by scale * log2(e), so the softmax uses exp2.
    uint32_t qb[NQ][KC][2];
    {
        const float qs = scale * 1.4426950408889634f;
        const auto ld = [](const float* p) {
            if constexpr (Q_SMEM) return *reinterpret_cast<const float2*>(p);
            else return __ldcg(reinterpret_cast<const float2*>(p));
        };
#pragma unroll
        for (int n = 0; n < NQ; n++) {
            const bool ok = 8 * n + g < G;
            const float* qh = qg + (ok ? 8 * n + g : 0) * HD;
#pragma unroll
            for (int c = 0; c < KC; c++) {
                const int d = S::FP8 ? 16 * c + 4 * tg : 16 * c + 2 * tg;
                const float2 z = make_float2(0.f, 0.f);
                const float2 lo = ok ? ld(qh + d) : z;
                const float2 hi = ok ? ld(qh + d + (S::FP8 ? 2 : 8)) : z;
                qb[n][c][0] = Mma::pack(lo.x * qs, lo.y * qs);
                qb[n][c][1] = Mma::pack(hi.x * qs, hi.y * qs);
            }
        }
    }

    // O^T's accumulators: m-tile b, n-tile n holds rows g and g + 8 (dims) of heads 8 n + 2 tg
    // and + 1. Row r of m-tile b is dim 16 b + r (bf16) or 16 b + 2 g + (r >= 8) (fp8: V is
    // widened from byte pairs). m and l: the running max and sum of the lane's two heads.
    float o[NQ][KC][4];
    float m[NQ][2], l[NQ][2];
#pragma unroll
    for (int n = 0; n < NQ; n++) {
#pragma unroll
        for (int b = 0; b < KC; b++) o[n][b][0] = o[n][b][1] = o[n][b][2] = o[n][b][3] = 0.f;
        m[n][0] = m[n][1] = -INFINITY;
        l[n][0] = l[n][1] = 0.f;
    }

    for (int it = warp, st = 0; it < n_tiles; it += DTC_WARPS, st = (st + 1) % DTC_STAGES) {
        const int k0 = k_begin + it * DTC_BK;
        // The tile DTC_STAGES - 1 ahead into the stage the last one left (a group, maybe empty,
        // every tile, so that this tile's group is the oldest but DTC_STAGES - 1).
        if (it + (DTC_STAGES - 1) * DTC_WARPS < n_tiles)
            dtc_load<HD, T>(wsm + (st + DTC_STAGES - 1) % DTC_STAGES * S::STAGE_BYTES, kc, vc,
                            table, k0 + (DTC_STAGES - 1) * DTC_WARPS * DTC_BK, last, block_size,
                            kv_dim, kvh, lane);
        cp_async_commit();
        cp_async_wait<DTC_STAGES - 1>();
        __syncwarp();
        const unsigned char* raw = wsm + st * S::STAGE_BYTES;
        // Row (key) k of the tile for ldmatrix's lanes: matrices of keys 0-7 and 8-15.
        const int ld_row = 8 * ((lane >> 3) & 1) + (lane & 7);

        // S^T = K Q^T: rows g and g + 8 are keys k0 + g and k0 + g + 8.
        float s[NQ][4];
#pragma unroll
        for (int n = 0; n < NQ; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
        if constexpr (S::FP8) {
#pragma unroll
            for (int q = 0; q < HD / 32; q++) {  // keys 0-7 and 8-15 of 16 dims, then the next
                uint32_t r[4];
                ldmatrix_x4(r, raw + ld_row * S::RAW_ROW + 32 * q + 16 * (lane >> 4));
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const uint32_t a[4] = {fp8x2_to_f16x2(r[2 * h]), fp8x2_to_f16x2(r[2 * h + 1]),
                                           fp8x2_to_f16x2(r[2 * h] >> 16),
                                           fp8x2_to_f16x2(r[2 * h + 1] >> 16)};
#pragma unroll
                    for (int n = 0; n < NQ; n++)
                        Mma::mma(s[n], a, qb[n][2 * q + h][0], qb[n][2 * q + h][1]);
                }
            }
        } else {
            const uint16_t(*kt)[S::ROW] = reinterpret_cast<const uint16_t(*)[S::ROW]>(raw);
#pragma unroll
            for (int c = 0; c < KC; c++) {  // keys 0-7 and 8-15 of dims 16 c .. + 7, then + 8 ..
                uint32_t a[4];
                ldmatrix_x4(a, &kt[ld_row][16 * c + 8 * (lane >> 4)]);
#pragma unroll
                for (int n = 0; n < NQ; n++) Mma::mma(s[n], a, qb[n][c][0], qb[n][c][1]);
            }
        }

        // The online softmax per head, over the tile's keys (the lanes of one tg); keys past
        // the split's end masked. Every tile has a visible key, so the new maxima are finite.
        // P^T (keys x heads) becomes the B fragments of O^T += V^T P^T by an in-register
        // transpose.
        uint32_t pb[NQ][2];
#pragma unroll
        for (int n = 0; n < NQ; n++) {
            if (k0 + g > last) s[n][0] = s[n][1] = -INFINITY;
            if (k0 + g + 8 > last) s[n][2] = s[n][3] = -INFINITY;
            float mx[2] = {fmaxf(s[n][0], s[n][2]), fmaxf(s[n][1], s[n][3])};
#pragma unroll
            for (int x = 4; x < 32; x <<= 1) {
                mx[0] = fmaxf(mx[0], __shfl_xor_sync(0xffffffffu, mx[0], x));
                mx[1] = fmaxf(mx[1], __shfl_xor_sync(0xffffffffu, mx[1], x));
            }
            float c[2];
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const float mn = fmaxf(m[n][e], mx[e]);
                c[e] = exp2f(m[n][e] - mn);
                m[n][e] = mn;
                l[n][e] *= c[e];
            }
#pragma unroll
            for (int b = 0; b < KC; b++) {
                o[n][b][0] *= c[0];
                o[n][b][1] *= c[1];
                o[n][b][2] *= c[0];
                o[n][b][3] *= c[1];
            }
            const float p0 = exp2f(s[n][0] - m[n][0]), p1 = exp2f(s[n][1] - m[n][1]);
            const float p2 = exp2f(s[n][2] - m[n][0]), p3 = exp2f(s[n][3] - m[n][1]);
            l[n][0] += p0 + p2;
            l[n][1] += p1 + p3;
            pb[n][0] = movmatrix_trans(Mma::pack(p0, p1));
            pb[n][1] = movmatrix_trans(Mma::pack(p2, p3));
        }

        // O^T += V^T P^T: V rows are tile rows 16..31, transposed by ldmatrix.
        const unsigned char* v_row =
            raw + (DTC_BK + ld_row) * (S::FP8 ? S::RAW_ROW : 2 * S::ROW);
        if constexpr (S::FP8) {
#pragma unroll
            for (int r = 0; r < HD / 32; r++) {
                // Keys 0-7 and 8-15 of 16 dims, then the next 16. A lane's word holds keys
                // 2 tg, 2 tg + 1 of dims 2 g, 2 g + 1 (byte pairs); regrouped by dim and widened,
                // the A fragment's rows g and g + 8 are dims 2 g and 2 g + 1.
                uint32_t b[4];
                ldmatrix_x4_trans(b, v_row + 32 * r + 16 * (lane >> 4));
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const uint32_t lo = __byte_perm(b[2 * h], 0, 0x3120);
                    const uint32_t hi = __byte_perm(b[2 * h + 1], 0, 0x3120);
                    const uint32_t a[4] = {fp8x2_to_f16x2(lo), fp8x2_to_f16x2(lo >> 16),
                                           fp8x2_to_f16x2(hi), fp8x2_to_f16x2(hi >> 16)};
#pragma unroll
                    for (int n = 0; n < NQ; n++) Mma::mma(o[n][2 * r + h], a, pb[n][0], pb[n][1]);
                }
            }
        } else {
#pragma unroll
            for (int b = 0; b < KC; b++) {  // keys 0-7 of dims 16 b .. + 7, + 8 ..; then keys 8-15
                uint32_t a[4];
                ldmatrix_x4_trans(a, raw + (DTC_BK + 8 * (lane >> 4) + (lane & 7)) * 2 * S::ROW +
                                         2 * (16 * b + 8 * ((lane >> 3) & 1)));
#pragma unroll
                for (int n = 0; n < NQ; n++) Mma::mma(o[n][b], a, pb[n][0], pb[n][1]);
            }
        }
        __syncwarp();  // every lane is done with this stage before it is refilled
    }
#pragma unroll
    for (int n = 0; n < NQ; n++)
#pragma unroll
        for (int x = 4; x < 32; x <<= 1) {
            l[n][0] += __shfl_xor_sync(0xffffffffu, l[n][0], x);
            l[n][1] += __shfl_xor_sync(0xffffffffu, l[n][1], x);
        }

    // Merge the warps: each writes (max, sum, unnormalised output) of its valid heads.
    sync();  // every warp is done with its tiles
    float* mrg = reinterpret_cast<float*>(dsm);
    float* w_ml = mrg + warp * 16 * (HD + 2);  // [16][2] then [16][HD]
    float* w_o = w_ml + 32;
#pragma unroll
    for (int n = 0; n < NQ; n++) {
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int h = 8 * n + 2 * tg + e;
            if (h >= G) continue;
            if (g == 0) {
                w_ml[2 * h] = m[n][e];
                w_ml[2 * h + 1] = l[n][e];
            }
#pragma unroll
            for (int b = 0; b < KC; b++) {
                if constexpr (S::FP8) {
                    *reinterpret_cast<float2*>(w_o + h * HD + 16 * b + 2 * g) =
                        make_float2(o[n][b][e], o[n][b][2 + e]);
                } else {
                    w_o[h * HD + 16 * b + g] = o[n][b][e];
                    w_o[h * HD + 16 * b + 8 + g] = o[n][b][2 + e];
                }
            }
        }
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
            store_act(out, ((size_t)t * n_heads + h) * HD + d, L > 0.f ? acc / L : 0.f, out_bf16);
        } else {
            part_acc[(ph * DEC_MAX_SPLITS + split) * HD + d] = acc;
            // The merge kernel works in natural-log units.
            if (d == 0)
                part_ml[ph * DEC_MAX_SPLITS + split] = make_float2(M * 0.6931471805599453f, L);
        }
    }
}

// One block's work from the start: launch row i, KV head kvh, split `split`, its query heads
// read from q. The kernel below is one such block; the weight ring (ring.cu) runs the same body
// on four of its warps, so both give the same bits. With PDL (the kernel), the step's metadata
// (copied before the graph) is read and the first tiles of keys cached by earlier steps are on
// their way before the wait for the kernel before, which writes Q and this step's keys; split
// 0's blocks always wait, so the launch still ends after that kernel.
template <int HD, typename T, int NQ, bool PDL, class Sync>
__device__ __forceinline__ void attn_decode_tc_body(
    const float* __restrict__ q, const T* __restrict__ kc, const T* __restrict__ vc,
    void* __restrict__ out, int out_bf16, float2* __restrict__ part_ml,
    float* __restrict__ part_acc, const uint32_t* __restrict__ rows,
    const uint32_t* __restrict__ tok_seq, const uint32_t* __restrict__ seq_info,
    const uint32_t* __restrict__ block_tables, int n_heads, int n_kv_heads, int block_size,
    float scale, int i, int kvh, int split, int tid, unsigned char* dsm, Sync sync) {
    const DtcWork w = dtc_work(rows, tok_seq, seq_info, block_tables, i, split);
    if (split >= w.n_split) return;
    const int warp = tid >> 5;
    // The warp's first tiles are on their way while Q is read.
    const bool early = !PDL || dtc_first_tiles_end(w, warp) <= w.cached;
    if (warp < w.n_tiles && early)
        dtc_first_tiles<HD, T>(w, dsm, kc, vc, block_size, n_kv_heads, kvh, warp, tid & 31);
    if constexpr (PDL) pdl_begin();
    if (warp < w.n_tiles && !early)
        dtc_first_tiles<HD, T>(w, dsm, kc, vc, block_size, n_kv_heads, kvh, warp, tid & 31);
    const float* qg = q + ((size_t)w.t * n_heads + kvh * (n_heads / n_kv_heads)) * HD;
    attn_decode_tc_core<HD, T, false, NQ>(qg, kc, vc, out, out_bf16, part_ml, part_acc, w,
                                           n_heads, n_kv_heads, block_size, scale, i, kvh, split,
                                           tid, dsm, sync);
}

#define ATTN_DECODE_TC(NAME, T, HD, NQ)                                                           \
    extern "C" __global__ void DTC_BOUNDS(NQ) NAME##_##HD(                                         \
        const float* __restrict__ q, const T* __restrict__ kc, const T* __restrict__ vc,          \
        void* __restrict__ out, float2* __restrict__ part_ml, float* __restrict__ part_acc,       \
        const uint32_t* __restrict__ rows, const uint32_t* __restrict__ tok_seq,                  \
        const uint32_t* __restrict__ seq_info, const uint32_t* __restrict__ block_tables,         \
        int n_heads, int n_kv_heads, int block_size, float scale, int out_bf16) {                 \
        extern __shared__ __align__(16) unsigned char dsm[];                                      \
        attn_decode_tc_body<HD, T, NQ, true>(q, kc, vc, out, out_bf16, part_ml, part_acc, rows,   \
                                             tok_seq, seq_info, block_tables, n_heads,            \
                                             n_kv_heads, block_size, scale, blockIdx.x,           \
                                             blockIdx.y, blockIdx.z, threadIdx.x, dsm,            \
                                             [] { __syncthreads(); });                            \
    }
// For KV groups of up to 8 query heads, and (_g16) of 9 to 16.
ATTN_DECODE_TC(attn_decode_tc, bf16, 64, 1)
ATTN_DECODE_TC(attn_decode_tc, bf16, 128, 1)
ATTN_DECODE_TC(attn_decode_tc_fp8, fp8, 64, 1)
ATTN_DECODE_TC(attn_decode_tc_fp8, fp8, 128, 1)
ATTN_DECODE_TC(attn_decode_tc_g16, bf16, 64, 2)
ATTN_DECODE_TC(attn_decode_tc_g16, bf16, 128, 2)
ATTN_DECODE_TC(attn_decode_tc_fp8_g16, fp8, 64, 2)
ATTN_DECODE_TC(attn_decode_tc_fp8_g16, fp8, 128, 2)

// The merge of launch row i's splits for the G heads of one KV group from h0, by one block of
// DTC_WARPS warps: attn_merge_head's arithmetic, split by split in order, so the same bits. The
// partial outputs are staged in shared memory `sm` (sm_bytes) with cp.async, as many heads at a
// time as fit (a round trip each); the (max, sum) pairs go to ml_sm ([G][DEC_MAX_SPLITS]), where
// a thread a head turns each max into its split's weight and sums the head's denominator once.
template <int HD>
__device__ __forceinline__ void dtc_merge_group(const float2* __restrict__ part_ml,
                                                const float* __restrict__ part_acc,
                                                void* __restrict__ out, int out_bf16, int t, int i,
                                                int n_heads,
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
            store_act(out, ((size_t)t * n_heads + h0 + r0 + r) * HD + d, L > 0.f ? o / L : 0.f,
                      out_bf16);
        }
        __syncthreads();  // the staged partials are read before the next chunk's copies
    }
}

// A decode step's attention in one launch (steps whose every row is its sequence's one new
// token): each block runs rope_write_kv's q/k norm and RoPE of its row's KV group's query heads
// into shared memory (in the row's last split's block, the warp that reads this step's key also
// of the key, which it writes with the value into the cache), then the block above; of a row's
// several splits, the block that finishes last merges them (dtc_merge_group). Three launches a
// layer become one, with the bits of rope_write_kv + attn_decode_tc + attn_decode_merge, which
// the steps that do not take it keep (prefill chunks, and the rows the launcher leaves out). Keys cached by earlier steps never depend on the kernel before, nor does
// the step's metadata (copied before the graph), so a warp whose first tile does not hold this
// step's key loads it before the wait. No block reads another row's new key: each row is its
// own sequence's.
// Grid: (rows, n_kv_heads, DEC_MAX_SPLITS), DTC_WARPS * 32 threads, DtcSmem<HD, T>::BYTES +
// DTC_ROPE_SMEM(G, HD) bytes of dynamic shared memory. arrivals[i * n_kv_heads + kvh] is zero
// before and after. The output is f32, or bf16 when out_bf16 (as attn_decode_tc's).
#define DTC_ROPE_SMEM(G, HD) (((G) + 1) * (HD) * 4)
template <int HD, typename T, int NQ>
__device__ __forceinline__ void attn_decode_tc_rope(
    float* __restrict__ q, float* __restrict__ k, const float* __restrict__ v,
    const float* __restrict__ q_norm, const float* __restrict__ k_norm, float eps,
    const uint32_t* __restrict__ pos, const float* __restrict__ inv_freq,
    const uint32_t* __restrict__ slots, T* __restrict__ kc, T* __restrict__ vc,
    void* __restrict__ out, int out_bf16, float2* __restrict__ part_ml,
    float* __restrict__ part_acc, unsigned* __restrict__ arrivals,
    const uint32_t* __restrict__ rows, const uint32_t* __restrict__ tok_seq,
    const uint32_t* __restrict__ seq_info, const uint32_t* __restrict__ block_tables,
    int n_heads, int n_kv_heads, int block_size, float scale, int rotary_dim, int neox,
    unsigned char* dsm) {
    __shared__ int last_block;
    const int i = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z, tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    const DtcWork w = dtc_work(rows, tok_seq, seq_info, block_tables, i, split);
    // Split 0's blocks always wait below, so the launch still ends after the kernel before it.
    if (split >= w.n_split) return;
    // A tile holds this step's key (keys - 1) when it reaches the row's last key.
    const bool early = warp < w.n_tiles && dtc_first_tiles_end(w, warp) < w.keys;
    if (early) dtc_first_tiles<HD, T>(w, dsm, kc, vc, block_size, n_kv_heads, kvh, warp, lane);
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
        dtc_first_tiles<HD, T>(w, dsm, kc, vc, block_size, n_kv_heads, kvh, warp, lane);
    attn_decode_tc_core<HD, T, true, NQ>(qs, kc, vc, out, out_bf16, part_ml, part_acc, w,
                                          n_heads, n_kv_heads, block_size, scale, i, kvh, split,
                                          tid, dsm, [] { __syncthreads(); });
    if (w.n_split == 1) return;
    // Every thread's partial results out before the block counts itself in.
    __threadfence();
    __syncthreads();
    unsigned* arrived = arrivals + (size_t)i * n_kv_heads + kvh;
    if (tid == 0) {
        last_block = atomicAdd(arrived, 1u) == (unsigned)(w.n_split - 1);
        if (last_block) *arrived = 0;
    }
    __syncthreads();
    if (!last_block) return;
    __threadfence();
    dtc_merge_group<HD>(part_ml, part_acc, out, out_bf16, w.t, i, n_heads, kvh * G, G, w.n_split,
                        tid, dsm, DtcSmem<HD, T>::BYTES, reinterpret_cast<float2*>(qs));
}

#define ATTN_DECODE_TC_ROPE(KERNEL, T, HD, NQ)                                                    \
    extern "C" __global__ void DTC_BOUNDS(NQ) KERNEL##_##HD(                                       \
        float* __restrict__ q, float* __restrict__ k, const float* __restrict__ v,                \
        const float* __restrict__ q_norm, const float* __restrict__ k_norm, float eps,            \
        const uint32_t* __restrict__ pos, const float* __restrict__ inv_freq,                     \
        const uint32_t* __restrict__ slots, T* __restrict__ kc, T* __restrict__ vc,               \
        void* __restrict__ out, int out_bf16, float2* __restrict__ part_ml,                       \
        float* __restrict__ part_acc, unsigned* __restrict__ arrivals,                            \
        const uint32_t* __restrict__ rows, const uint32_t* __restrict__ tok_seq,                  \
        const uint32_t* __restrict__ seq_info, const uint32_t* __restrict__ block_tables,         \
        int n_heads, int n_kv_heads, int block_size, float scale, int rotary_dim, int neox) {     \
        extern __shared__ __align__(16) unsigned char dsm[];                                      \
        attn_decode_tc_rope<HD, T, NQ>(q, k, v, q_norm, k_norm, eps, pos, inv_freq, slots, kc,    \
                                       vc, out, out_bf16, part_ml, part_acc, arrivals, rows,      \
                                       tok_seq, seq_info, block_tables, n_heads, n_kv_heads,      \
                                       block_size, scale, rotary_dim, neox, dsm);                 \
    }
ATTN_DECODE_TC_ROPE(attn_decode_tc_rope, bf16, 64, 1)
ATTN_DECODE_TC_ROPE(attn_decode_tc_rope, bf16, 128, 1)
ATTN_DECODE_TC_ROPE(attn_decode_tc_rope_fp8, fp8, 64, 1)
ATTN_DECODE_TC_ROPE(attn_decode_tc_rope_fp8, fp8, 128, 1)
ATTN_DECODE_TC_ROPE(attn_decode_tc_rope_g16, bf16, 64, 2)
ATTN_DECODE_TC_ROPE(attn_decode_tc_rope_g16, bf16, 128, 2)
ATTN_DECODE_TC_ROPE(attn_decode_tc_rope_fp8_g16, fp8, 64, 2)
ATTN_DECODE_TC_ROPE(attn_decode_tc_rope_fp8_g16, fp8, 128, 2)
