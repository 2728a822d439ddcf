// MLA (absorbed form) on the tensor cores, for decode rows and prefill chunks alike, at the
// latent shape of DeepSeek-V3 and GLM-4.7-Flash (rank 512, rope 64: a 576-wide cached row).
//
// Every head attends to the same latent rows, so a block takes a tile of M = 16 MT query rows,
// (token, head) pairs of one sequence, and streams the sequence's latent rows through shared
// memory once for all of them, 32 keys at a time (cp.async, two stages; fp8 rows use one stage
// and are widened to f16 exactly in shared memory and use f16 mma, bf16 rows bf16 mma):
//   1. S = Q K^T, the 576 dims split in four quarters over the warps (warp w: m-tile w % MT,
//      quarter w / MT), partial scores summed in a fixed order by
//   2. the online softmax, 8 threads per row (P to shared memory in the mma type), then
//   3. O += P V, the 512 value dims split in four slices over the warps (f32 accumulators).
// A tile holds QT = M / HG tokens of HG = min(n_heads, M) heads each (head groups of M when a
// token has more heads: gridDim.y of them). Grid x covers token rows row0 .. row0 + gridDim.x
// - 1 (the rows of the sequences the launch is for); the block of row t works only if t starts
// a tile of its sequence (every QT-th query of it) and the sequence's query count is in
// [q_min, q_max), so one launch per tile size covers any step without extra metadata.
//
// Splits (gridDim.z): a sequence of context C takes n = min(gridDim.z, ceil(C / MTC_SPLIT_MIN))
// equal shares of its keys; with n = 1 the block writes the output, otherwise its rows' (max in
// log2 units, sum, unnormalised output) to `part` for mla_tc_merge. A row's numerics depend only
// on its own sequence and gridDim.z; a padded row (no context) gets zeros.
#include <math.h>
#include "mma.cuh"

#define MTC_RANK 512
#define MTC_ROPE 64
#define MTC_W (MTC_RANK + MTC_ROPE)  // latent row width
#define MTC_ROW (MTC_W + 8)          // 16-bit elements per padded shared-memory row
#define MTC_BK 32                    // keys per tile
#define MTC_PROW (MTC_BK + 8)        // 16-bit elements per padded P row
#define MTC_SPLIT_MIN 32             // keys per split at least (one tile)

template <int MT, typename T>
struct MtcSmem {
    static constexpr int M = 16 * MT;
    static constexpr bool FP8 = std::is_same<T, fp8>::value;
    static constexpr int Q = M * MTC_ROW * 2;
    static constexpr int TILE = MTC_BK * MTC_ROW * 2;
    static constexpr int STAGE = FP8 ? MTC_BK * MTC_W : TILE;
    static constexpr int WIDE = FP8 ? TILE : 0;
    static constexpr int S = 4 * M * MTC_BK * 4;
    static constexpr int P = M * MTC_PROW * 2;
    // fp8 tiles are widened out of their stage right away, so one stage is enough (the next
    // tile loads while the widened one is used); bf16 tiles are used in place, from two.
    static constexpr int STAGES = FP8 ? 1 : 2;
    static constexpr int STAGES_AT = Q;
    static constexpr int WIDE_AT = STAGES_AT + STAGES * STAGE;
    static constexpr int S_AT = WIDE_AT + WIDE;
    static constexpr int P_AT = S_AT + S;
    static constexpr int ROWS_AT = P_AT + P;  // alpha, then the final max and sum, per row
    static constexpr int BYTES = ROWS_AT + 3 * M * 4;
};

// Splits of a sequence with `ctx` keys.
__device__ __forceinline__ int mtc_splits(int ctx) {
    return min((int)gridDim.z, max(1, (ctx + MTC_SPLIT_MIN - 1) / MTC_SPLIT_MIN));
}

// A tile's copies: keys k0 .. k0 + MTC_BK - 1 of a sequence's latent rows, 16 bytes a copy,
// copy threadIdx.x + i NT for thread i. Keys past `last` repeat it (their scores are masked).
// mtc_rows reads the block table for a tile's copies (cache rows into `rows`), mtc_issue starts
// them; the loop reads a tile's table entries one tile ahead, so their latency is never on the
// path of a tile's load.
template <typename T, int NT>
struct MtcCopies {
    static constexpr int VEC = 16 / sizeof(T);                        // elements per copy
    static constexpr int CH = MTC_W / VEC;                            // copies per row
    static constexpr int DST = sizeof(T) == 1 ? MTC_W : MTC_ROW * 2;  // stage bytes per row
    static constexpr int N = (MTC_BK * CH + NT - 1) / NT;             // copies per thread
};

// Cache blocks of a power-of-two size (the usual 16) take shifts and masks instead of integer
// divisions: a tile's table reads are a good part of its instructions.
struct MtcBlocks {
    int size, shift;  // shift < 0: size is not a power of two
    __device__ __forceinline__ explicit MtcBlocks(int block_size)
        : size(block_size), shift((block_size & (block_size - 1)) == 0 ? __ffs(block_size) - 1 : -1) {}
    __device__ __forceinline__ int block(int key) const {
        return shift >= 0 ? key >> shift : key / size;
    }
    __device__ __forceinline__ int offset(int key) const {
        return shift >= 0 ? key & (size - 1) : key % size;
    }
};

template <typename T, int NT>
__device__ __forceinline__ void mtc_rows(uint32_t (&rows)[MtcCopies<T, NT>::N],
                                         const uint32_t* table, int k0, int last,
                                         MtcBlocks blocks) {
    using C = MtcCopies<T, NT>;
#pragma unroll
    for (int i = 0; i < C::N; i++) {
        const int x = threadIdx.x + i * NT;
        const int key = min(k0 + min(x, MTC_BK * C::CH - 1) / C::CH, last);
        rows[i] = table[blocks.block(key)] * (uint32_t)blocks.size + blocks.offset(key);
    }
}

template <typename T, int NT>
__device__ __forceinline__ void mtc_issue(unsigned char* stage, const T* __restrict__ cache,
                                          const uint32_t (&rows)[MtcCopies<T, NT>::N]) {
    using C = MtcCopies<T, NT>;
#pragma unroll
    for (int i = 0; i < C::N; i++) {
        const int x = threadIdx.x + i * NT;
        if (x >= MTC_BK * C::CH) break;
        const int j = x / C::CH, c = x % C::CH;
        cp_async16(stage + j * C::DST + c * 16, cache + (size_t)rows[i] * MTC_W + c * C::VEC);
    }
}

template <int MT, typename T>
__device__ __forceinline__ void mla_tc_body(
    const float* __restrict__ q_lat, const float* __restrict__ q_rope, const T* __restrict__ cache,
    float* __restrict__ out, float* __restrict__ part, const uint32_t* __restrict__ tok_seq,
    const uint32_t* __restrict__ seq_info, const uint32_t* __restrict__ block_tables, int n_heads,
    int block_size, float scale, int row0, int q_min, int q_max) {
    using L = MtcSmem<MT, T>;
    using Mma = MmaFor<T>;
    constexpr int M = L::M;
    extern __shared__ __align__(16) unsigned char dsm[];
    uint16_t(*qs)[MTC_ROW] = reinterpret_cast<uint16_t(*)[MTC_ROW]>(dsm);
    float* sp = reinterpret_cast<float*>(dsm + L::S_AT);  // [4][M][MTC_BK]
    uint16_t(*ps)[MTC_PROW] = reinterpret_cast<uint16_t(*)[MTC_PROW]>(dsm + L::P_AT);
    float* alpha_s = reinterpret_cast<float*>(dsm + L::ROWS_AT);
    float* m_s = alpha_s + M;
    float* l_s = m_s + M;

    const int t = row0 + blockIdx.x;
    const uint32_t* info = seq_info + 4 * tok_seq[t];
    const int q0 = (int)info[0], ql = (int)info[1], ctx = (int)info[2];
    if (ql < q_min || ql >= q_max) return;
    const int hg = min(n_heads, M), qt = M / hg;
    if ((t - q0) % qt != 0) return;
    const int h0 = blockIdx.y * hg;
    if (h0 >= n_heads) return;
    const int n_split = mtc_splits(ctx), z = blockIdx.z;
    if (z >= n_split) return;
    const int nq = min(qt, q0 + ql - t);           // tokens in this tile
    const int first = ctx - ql + (t - q0);         // keys before the tile's first token
    const int share = (ctx + n_split - 1) / n_split;
    const int k_begin = z * share, k_end = min(first + nq, k_begin + share);
    const int n_tiles = k_end > k_begin ? (k_end - k_begin + MTC_BK - 1) / MTC_BK : 0;
    const uint32_t* table = block_tables + info[3];

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, tg = lane & 3;

    // Row r of the tile: token t + r / hg, head h0 + r % hg (when both exist).
    auto row_ok = [&](int r) { return r < qt * hg && r / hg < nq && h0 + r % hg < n_heads; };

    constexpr int NT = 128 * MT;
    const MtcBlocks blocks(block_size);
    uint32_t next_rows[MtcCopies<T, NT>::N];  // the cache rows of the next tile to load
    if (n_tiles > 0) {
        mtc_rows<T, NT>(next_rows, table, k_begin, k_end - 1, blocks);
        mtc_issue<T, NT>(dsm + L::STAGES_AT, cache, next_rows);
        cp_async_commit();
        if (n_tiles > 1)
            mtc_rows<T, NT>(next_rows, table, k_begin + MTC_BK, k_end - 1, blocks);
    }
    // Q, scaled by scale * log2(e) so the softmax uses exp2; zero rows pad the tile. Thread i
    // takes row i / TPR of the tile (its token and head worked out once) and every TPR-th
    // float4 of it, all loads in flight before the stores: per-pair index arithmetic made this
    // prologue most of a short decode context's time.
    {
        constexpr int TPR = NT / M;                  // threads per row
        constexpr int PER = MTC_W / 4 / TPR;         // float4s per thread
        constexpr int LAT = MTC_RANK / 4 / TPR;      // of them from q_lat, the rest from q_rope
        static_assert(MTC_W / 4 % TPR == 0 && MTC_RANK / 4 % TPR == 0, "Q prologue split");
        const float qsc = scale * 1.4426950408889634f;
        const int r = threadIdx.x / TPR, c0 = threadIdx.x % TPR;
        const bool ok = row_ok(r);
        const size_t th = ok ? (size_t)(t + r / hg) * n_heads + h0 + r % hg : 0;
        const float4* lat = reinterpret_cast<const float4*>(q_lat + th * MTC_RANK);
        const float4* rope = reinterpret_cast<const float4*>(q_rope + th * MTC_ROPE);
        // In one batch of loads, or three where registers are held to 128 (the narrow fp8
        // variant, two blocks an SM).
        constexpr int BATCHES = L::FP8 && MT == 2 ? 3 : 1, PER_BATCH = PER / BATCHES;
        static_assert(PER % BATCHES == 0, "Q prologue batches");
#pragma unroll 1
        for (int b = 0; b < BATCHES; b++) {
            float4 v[PER_BATCH];
#pragma unroll
            for (int u = 0; u < PER_BATCH; u++) {
                const int i = b * PER_BATCH + u;
                v[u] = make_float4(0.f, 0.f, 0.f, 0.f);
                if (ok) v[u] = i < LAT ? lat[c0 + TPR * i] : rope[c0 + TPR * (i - LAT)];
            }
#pragma unroll
            for (int u = 0; u < PER_BATCH; u++)
                *reinterpret_cast<uint2*>(&qs[r][4 * (c0 + TPR * (b * PER_BATCH + u))]) =
                    make_uint2(Mma::pack(v[u].x * qsc, v[u].y * qsc),
                               Mma::pack(v[u].z * qsc, v[u].w * qsc));
        }
    }

    // Softmax state of row sr (8 threads per row, keys 4 sj .. 4 sj + 3 of each tile).
    const int sr = threadIdx.x >> 3, sj = threadIdx.x & 7;
    const int s_visible = row_ok(sr) ? first + sr / hg + 1 : 0;
    float m_run = -INFINITY, l_run = 0.f;

    // This warp's share of O: m-tile mt, value dims vs * 128 .. + 127.
    const int mt = warp % MT, quarter = warp / MT;
    float o[16][4];
#pragma unroll
    for (int n = 0; n < 16; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;

    for (int it = 0; it < n_tiles; it++) {
        const int k0 = k_begin + it * MTC_BK;
        unsigned char* stage = dsm + L::STAGES_AT + (L::FP8 ? 0 : (it & 1) * L::STAGE);
        if (!L::FP8 && it + 1 < n_tiles) {
            mtc_issue<T, NT>(dsm + L::STAGES_AT + ((it + 1) & 1) * L::STAGE, cache, next_rows);
            cp_async_commit();
            if (it + 2 < n_tiles)
                mtc_rows<T, NT>(next_rows, table, k0 + 2 * MTC_BK, k_end - 1, blocks);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        uint16_t(*tile)[MTC_ROW];
        if constexpr (L::FP8) {
            tile = reinterpret_cast<uint16_t(*)[MTC_ROW]>(dsm + L::WIDE_AT);
            for (int x = threadIdx.x; x < MTC_BK * MTC_W / 8; x += blockDim.x) {
                const int j = x / (MTC_W / 8), c = x % (MTC_W / 8);
                const uint2 u = *reinterpret_cast<const uint2*>(stage + j * MTC_W + c * 8);
                *reinterpret_cast<uint4*>(&tile[j][c * 8]) = fp8x8_to_f16x8(u);
            }
            __syncthreads();
            // The stage is free again: the next tile loads while this one is used.
            if (it + 1 < n_tiles) {
                mtc_issue<T, NT>(stage, cache, next_rows);
                cp_async_commit();
                if (it + 2 < n_tiles)
                    mtc_rows<T, NT>(next_rows, table, k0 + 2 * MTC_BK, k_end - 1, blocks);
            }
        } else {
            tile = reinterpret_cast<uint16_t(*)[MTC_ROW]>(stage);
        }

        // 1. Partial scores of m-tile mt over dims quarter * 144 .. + 143, all 32 keys.
        {
            float s[4][4];
#pragma unroll
            for (int j = 0; j < 4; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
            for (int ks = 0; ks < MTC_W / 64; ks++) {
                const int kk = quarter * (MTC_W / 4) + 16 * ks;
                uint32_t a[4];
                ldmatrix_x4(a, &qs[16 * mt + (lane & 15)][kk + 8 * (lane >> 4)]);
#pragma unroll
                for (int jp = 0; jp < 2; jp++) {
                    uint32_t b[4];
                    ldmatrix_x4(b, &tile[8 * (2 * jp + (lane >> 4)) + (lane & 7)]
                                        [kk + 8 * ((lane >> 3) & 1)]);
                    Mma::mma(s[2 * jp], a, b[0], b[1]);
                    Mma::mma(s[2 * jp + 1], a, b[2], b[3]);
                }
            }
            float* dst = sp + (size_t)quarter * M * MTC_BK;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int key = 8 * j + 2 * tg;
                *reinterpret_cast<float2*>(dst + (16 * mt + g) * MTC_BK + key) =
                    make_float2(s[j][0], s[j][1]);
                *reinterpret_cast<float2*>(dst + (16 * mt + g + 8) * MTC_BK + key) =
                    make_float2(s[j][2], s[j][3]);
            }
        }
        __syncthreads();

        // 2. Online softmax of row sr over keys 4 sj .. 4 sj + 3.
        {
            float s[4];
#pragma unroll
            for (int i = 0; i < 4; i++) s[i] = 0.f;
#pragma unroll
            for (int qq = 0; qq < 4; qq++) {
                const float4 v = *reinterpret_cast<const float4*>(
                    sp + ((size_t)qq * M + sr) * MTC_BK + 4 * sj);
                s[0] += v.x;
                s[1] += v.y;
                s[2] += v.z;
                s[3] += v.w;
            }
            float mx = -INFINITY;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int key = k0 + 4 * sj + i;
                if (key >= k_end || key >= s_visible) s[i] = -INFINITY;
                mx = fmaxf(mx, s[i]);
            }
#pragma unroll
            for (int x = 1; x < 8; x <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, x));
            const float mn = fmaxf(m_run, mx);
            const float alpha = mn == -INFINITY ? 1.f : exp2f(m_run - mn);
            float p[4], sum = 0.f;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                p[i] = s[i] == -INFINITY ? 0.f : exp2f(s[i] - mn);
                sum += p[i];
            }
#pragma unroll
            for (int x = 1; x < 8; x <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, x);
            l_run = l_run * alpha + sum;
            m_run = mn;
            *reinterpret_cast<uint2*>(&ps[sr][4 * sj]) =
                make_uint2(Mma::pack(p[0], p[1]), Mma::pack(p[2], p[3]));
            if (sj == 0) alpha_s[sr] = alpha;
        }
        __syncthreads();

        // 3. O += P V for m-tile mt, value dims quarter * 128 .. + 127 (V: the tile's first
        // MTC_RANK columns).
        {
            const float a_lo = alpha_s[16 * mt + g], a_hi = alpha_s[16 * mt + g + 8];
#pragma unroll
            for (int n = 0; n < 16; n++) {
                o[n][0] *= a_lo;
                o[n][1] *= a_lo;
                o[n][2] *= a_hi;
                o[n][3] *= a_hi;
            }
#pragma unroll
            for (int kb = 0; kb < MTC_BK / 16; kb++) {
                uint32_t pa[4];
                ldmatrix_x4(pa, &ps[16 * mt + (lane & 15)][16 * kb + 8 * (lane >> 4)]);
#pragma unroll
                for (int n = 0; n < 16; n += 2) {
                    uint32_t b[4];
                    ldmatrix_x4_trans(b, &tile[16 * kb + 8 * ((lane >> 3) & 1) + (lane & 7)]
                                              [quarter * 128 + 8 * n + 8 * (lane >> 4)]);
                    Mma::mma(o[n], pa, b[0], b[1]);
                    Mma::mma(o[n + 1], pa, b[2], b[3]);
                }
            }
        }
        __syncthreads();  // every warp is done with the stage, S and P before they are refilled
    }

    if (sj == 0) {
        m_s[sr] = m_run;
        l_s[sr] = l_run;
    }
    __syncthreads();
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int r = 16 * mt + g + 8 * half;
        if (!row_ok(r)) continue;
        const size_t th = (size_t)(t + r / hg) * n_heads + h0 + r % hg;
        const float l = l_s[r];
        if (n_split == 1) {
            const float inv = l > 0.f ? 1.f / l : 0.f;
            float* dst = out + th * MTC_RANK + quarter * 128 + 2 * tg;
#pragma unroll
            for (int n = 0; n < 16; n++)
                *reinterpret_cast<float2*>(dst + 8 * n) =
                    make_float2(o[n][2 * half] * inv, o[n][2 * half + 1] * inv);
        } else {
            float* pp = part + (th * gridDim.z + z) * (MTC_RANK + 2);
            if (quarter == 0 && tg == 0) {
                pp[0] = m_s[r];
                pp[1] = l;
            }
            float* dst = pp + 2 + quarter * 128 + 2 * tg;
#pragma unroll
            for (int n = 0; n < 16; n++)
                *reinterpret_cast<float2*>(dst + 8 * n) =
                    make_float2(o[n][2 * half], o[n][2 * half + 1]);
        }
    }
}

// MINB: blocks per SM to fit (the narrow fp8 variant's ~110 KB of shared memory fits two, so
// its registers are held to 128 a thread: decode rows are latency-bound, not issue-bound).
#define MLA_TC(NAME, T, MT, MINB)                                                                 \
    extern "C" __global__ void __launch_bounds__(128 * MT, MINB) NAME##_##MT(                     \
        const float* __restrict__ q_lat, const float* __restrict__ q_rope,                        \
        const T* __restrict__ cache, float* __restrict__ out, float* __restrict__ part,           \
        const uint32_t* __restrict__ tok_seq, const uint32_t* __restrict__ seq_info,              \
        const uint32_t* __restrict__ block_tables, int n_heads, int block_size, float scale,      \
        int row0, int q_min, int q_max) {                                                         \
        pdl_begin();                                                                              \
        mla_tc_body<MT, T>(q_lat, q_rope, cache, out, part, tok_seq, seq_info, block_tables,      \
                           n_heads, block_size, scale, row0, q_min, q_max);                       \
    }
MLA_TC(mla_tc, bf16, 2, 1)
MLA_TC(mla_tc, bf16, 4, 1)
MLA_TC(mla_tc_fp8, fp8, 2, 2)
MLA_TC(mla_tc_fp8, fp8, 4, 1)

// One (row, head)'s value dims d, d + 1 merged from its n_split (2-32) parts at pp, by
// MTC_RANK / 2 threads: every split's values are loaded at once, beside the first warp's turning
// the splits' (max, sum) into one weight each, so the merge is one round trip.
__device__ __forceinline__ float2 mla_merge_dims(const float* __restrict__ pp, int n_split,
                                                 int d) {
    float2 v[32];
#pragma unroll
    for (int z = 0; z < 32; z++)
        v[z] = z < n_split ? *reinterpret_cast<const float2*>(pp + z * (MTC_RANK + 2) + 2 + d)
                           : make_float2(0.f, 0.f);
    __shared__ float w_s[32];
    __shared__ float inv_s;
    if (threadIdx.x < 32) {
        const int z = threadIdx.x;
        const float m = z < n_split ? pp[z * (MTC_RANK + 2)] : -INFINITY;
        const float l = z < n_split ? pp[z * (MTC_RANK + 2) + 1] : 0.f;
        const float m_all = warp_max(l > 0.f ? m : -INFINITY);
        const float w = l > 0.f ? exp2f(m - m_all) : 0.f;
        const float l_all = warp_sum(l * w);
        w_s[z] = w;
        if (z == 0) inv_s = l_all > 0.f ? 1.f / l_all : 0.f;
    }
    __syncthreads();
    float2 acc = make_float2(0.f, 0.f);
#pragma unroll
    for (int z = 0; z < 32; z++)
        if (z < n_split) {
            acc.x += w_s[z] * v[z].x;
            acc.y += w_s[z] * v[z].y;
        }
    return make_float2(acc.x * inv_s, acc.y * inv_s);
}

// The splits a row of sequence `info` took (mla_tc's mtc_splits for n_parts), or 1 where the
// row is not mla_tc's (q_max queries or more: the GEMM path wrote it whole).
__device__ __forceinline__ int mla_row_splits(const uint32_t* info, int n_parts, int q_max) {
    if ((int)info[1] >= q_max) return 1;
    return min(n_parts, max(1, ((int)info[2] + MTC_SPLIT_MIN - 1) / MTC_SPLIT_MIN));
}

// Combines a row's splits (mla_tc's parts, n_parts per (row, head), at most 32) into the
// output, for the sequences with fewer than q_max queries; rows whose sequence took one split
// were written by mla_tc itself. Grid (n_heads, rows), MTC_RANK / 2 threads, two value dims a
// thread.
extern "C" __global__ void __launch_bounds__(MTC_RANK / 2)
    mla_tc_merge(const float* __restrict__ part, float* __restrict__ out,
                 const uint32_t* __restrict__ tok_seq, const uint32_t* __restrict__ seq_info,
                 int n_heads, int n_parts, int q_max) {
    pdl_begin();
    const int h = blockIdx.x, row = blockIdx.y;
    const int n_split = mla_row_splits(seq_info + 4 * tok_seq[row], n_parts, q_max);
    if (n_split <= 1) return;
    const size_t th = (size_t)row * n_heads + h;
    const int d = 2 * threadIdx.x;
    *reinterpret_cast<float2*>(out + th * MTC_RANK + d) =
        mla_merge_dims(part + th * n_parts * (MTC_RANK + 2), n_split, d);
}

// mla_tc_merge and linear_heads by W_UV (bf16 [n_heads * n, MTC_RANK]) in one launch, for
// decode rows: a block merges its (row, head)'s splits into shared memory (or takes the row
// mla_tc wrote whole), and its 8 warps take MUV_OUT of the head's n outputs, MUV_OUT / 8 each,
// with linear_heads' arithmetic: the bits of the two launches, one launch and one round trip
// of the merged row fewer. W_UV never depends on the kernels before, so every weight load goes
// out before the wait. Grid (ceil(n / MUV_OUT), rows * n_heads), MTC_RANK / 2 threads.
#define MUV_OUT 32  // MLA_UV_OUT in kernels/moe_mla.rs (32 beat 16 and 64 on an H200)
extern "C" __global__ void __launch_bounds__(MTC_RANK / 2)
    mla_merge_uv(const float* __restrict__ part, const float* __restrict__ attn,
                 const bf16* __restrict__ w, float* __restrict__ out,
                 const uint32_t* __restrict__ tok_seq, const uint32_t* __restrict__ seq_info,
                 int n_heads, int n_parts, int q_max, int n) {
    constexpr int PER_WARP = MUV_OUT / 8;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const size_t rh = blockIdx.y;
    const int h = (int)(rh % n_heads), row = (int)(rh / n_heads);
    uint4 wv[PER_WARP][2];
#pragma unroll
    for (int u = 0; u < PER_WARP; u++) {
        const int j = min((int)blockIdx.x * MUV_OUT + warp + 8 * u, n - 1);
        const bf16* wr = w + ((size_t)h * n + j) * MTC_RANK + lane * 8;
        wv[u][0] = ldg_stream(wr);
        wv[u][1] = ldg_stream(wr + 256);
    }
    pdl_begin();
    __shared__ __align__(16) float x_s[MTC_RANK];
    const int n_split = mla_row_splits(seq_info + 4 * tok_seq[row], n_parts, q_max);
    const int d = 2 * threadIdx.x;
    *reinterpret_cast<float2*>(x_s + d) =
        n_split > 1 ? mla_merge_dims(part + rh * n_parts * (MTC_RANK + 2), n_split, d)
                    : *reinterpret_cast<const float2*>(attn + rh * MTC_RANK + d);
    __syncthreads();
#pragma unroll
    for (int u = 0; u < PER_WARP; u++) {
        const int j = (int)blockIdx.x * MUV_OUT + warp + 8 * u;
        if (j >= n) break;
        float s = 0.f;
#pragma unroll
        for (int c = 0; c < 2; c++) {
            const int i = lane * 8 + 256 * c;
            s += bf16x8_dot(wv[u][c], *reinterpret_cast<const float4*>(x_s + i),
                            *reinterpret_cast<const float4*>(x_s + i + 4));
        }
        s = warp_sum(s);
        if (lane == 0) out[rh * n + j] = s;
    }
}
