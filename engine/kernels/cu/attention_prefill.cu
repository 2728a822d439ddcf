// Causal paged attention for prefill chunks on the tensor cores (flash-attention 2 style):
// one block per (64-row query tile, HPB heads of one KV group), four warps of 16 query rows per
// head (with HPB = 2, the two heads share each K and V tile). Q is held in registers as bf16 mma
// fragments (scaled by softmax_scale * log2(e), so the softmax uses exp2); K and V tiles of 64
// keys are copied from the paged cache into (dynamic) shared memory with cp.async, two stages
// deep for bf16 caches (see prefill_tc_smem). S and O accumulate in f32 (mma.sync m16n8k16,
// bf16 inputs); P is rounded to bf16 for P V. Rows of a warp made only of tile padding may skip
// the causal mask: they are never written. Q's fragments live in shared memory (each warp its own
// 16 rows), not registers, so a thread stays within 128 registers and two blocks share an SM.
//
// tiles[2 i] = sequence, tiles[2 i + 1] = first token row of tile i. head_dim is HD (64 or 128).
// `out` is f32, or bf16 when out_bf16 (it then only feeds the o-projection's GEMM).
// Grid: (tiles, n_heads / HPB), 128 * HPB threads.
#include <math.h>
#include "mma.cuh"

#define TC_BQ 64
#define TC_BK 64

// The cache offset (in elements) of key min(key, max_key)'s row of KV head kvh. Cache blocks are
// usually a power of two: shifts instead of an integer division.
__device__ __forceinline__ size_t key_offset(const uint32_t* __restrict__ table, int key,
                                             int max_key, int block_size, int kv_dim, int kvh,
                                             int hd) {
    key = min(key, max_key);
    const bool pow2 = (block_size & (block_size - 1)) == 0;
    const int shift = __ffs(block_size) - 1;
    const size_t slot = pow2 ? ((size_t)table[key >> shift] << shift) + (key & (block_size - 1))
                             : (size_t)table[key / block_size] * block_size + key % block_size;
    return slot * kv_dim + kvh * hd;
}

// Copies keys k0 .. k0 + TC_BK - 1 of one KV head from the paged cache into shared memory with
// cp.async (NT threads, the whole block): a bf16 cache straight into padded tiles (row stride
// HD + 8), K and V together; an fp8 one raw (row stride HD bytes, widened by `widen_tile` once it
// has landed), one cache at a time (vc null). Keys past max_key repeat max_key's row: they are
// masked out of S, and a finite row times p = 0 adds nothing.
template <int HD, typename T, int NT>
__device__ __forceinline__ void load_tile(void* dk, void* dv, const T* __restrict__ kc,
                                          const T* __restrict__ vc,
                                          const uint32_t* __restrict__ table, int k0, int max_key,
                                          int block_size, int kv_dim, int kvh) {
    constexpr int VEC = 16 / sizeof(T);  // elements per 16-byte copy
    constexpr int VECS = HD / VEC;
    constexpr int ROW = std::is_same<T, bf16>::value ? (HD + 8) * 2 : HD;  // bytes
    static_assert(TC_BK * VECS % NT == 0, "whole copies per thread");
#pragma unroll
    for (int i = 0; i < TC_BK * VECS / NT; i++) {
        const int x = threadIdx.x + i * NT, j = x / VECS, c = x % VECS;
        const size_t off =
            key_offset(table, k0 + j, max_key, block_size, kv_dim, kvh, HD) + c * VEC;
        cp_async16(static_cast<unsigned char*>(dk) + j * ROW + c * 16, kc + off);
        if (vc) cp_async16(static_cast<unsigned char*>(dv) + j * ROW + c * 16, vc + off);
    }
}

// A thread's two query rows (g and g + 8 of its warp's 16) in an online softmax, base 2, over
// tiles of TC_BK keys; shared with attention_prefill_wg.cu, so both kernels give the same bits.
// A tile takes `update`, then O's rescale by its factors, then `probs`.
struct RowSoftmax {
    float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.f, l_hi = 0.f;
    // What `update` found for a tile: O's factors, the max P is taken against (the running max;
    // 0 for a row with nothing visible yet, a padded row of the tile, whose max stays -inf), and
    // whether one of this thread's rows' max grew (else c is exactly 1, or O is still 0).
    struct Tile {
        float c_lo, c_hi, mu_lo, mu_hi;
        bool grew;
    };
    // The scores s of the tile of keys from k0 (mma's C layout: s[j] holds keys 8 j + 2 tig and
    // + 1 of the rows at positions pos_lo and pos_hi): the causal mask (only for tiles reaching
    // past the warp's first row, pos_lo - g), the new running max, and the sum rescaled by it.
    __device__ __forceinline__ Tile update(float (&s)[8][4], int k0, int pos_lo, int pos_hi, int g,
                                           int tig) {
        if (k0 + TC_BK - 1 > pos_lo - g) {
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const int key = k0 + 8 * j + 2 * tig;
                if (key > pos_lo) s[j][0] = -INFINITY;
                if (key + 1 > pos_lo) s[j][1] = -INFINITY;
                if (key > pos_hi) s[j][2] = -INFINITY;
                if (key + 1 > pos_hi) s[j][3] = -INFINITY;
            }
        }
        // Rows g / g + 8 live in the 4 lanes of a quad.
        float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            mx_lo = fmaxf(mx_lo, fmaxf(s[j][0], s[j][1]));
            mx_hi = fmaxf(mx_hi, fmaxf(s[j][2], s[j][3]));
        }
#pragma unroll
        for (int x = 1; x < 4; x <<= 1) {
            mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, x));
            mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, x));
        }
        const float mn_lo = fmaxf(m_lo, mx_lo), mn_hi = fmaxf(m_hi, mx_hi);
        Tile t;
        t.mu_lo = mn_lo == -INFINITY ? 0.f : mn_lo;
        t.mu_hi = mn_hi == -INFINITY ? 0.f : mn_hi;
        t.c_lo = fast_exp2(m_lo - t.mu_lo);
        t.c_hi = fast_exp2(m_hi - t.mu_hi);
        t.grew = mn_lo > m_lo || mn_hi > m_hi;
        m_lo = mn_lo;
        m_hi = mn_hi;
        l_lo *= t.c_lo;
        l_hi *= t.c_hi;
        return t;
    }
    // P = 2^(s - max) as A fragments (k-chunk kk covers keys 16 kk .. 16 kk + 15) in p, added to
    // the running sums.
    template <typename Mma>
    __device__ __forceinline__ void probs(const float (&s)[8][4], const Tile& t,
                                          uint32_t (&p)[4][4]) {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const float p0 = fast_exp2(s[j][0] - t.mu_lo), p1 = fast_exp2(s[j][1] - t.mu_lo);
            const float p2 = fast_exp2(s[j][2] - t.mu_hi), p3 = fast_exp2(s[j][3] - t.mu_hi);
            l_lo += p0 + p1;
            l_hi += p2 + p3;
            p[j >> 1][(j & 1) * 2] = Mma::pack(p0, p1);
            p[j >> 1][(j & 1) * 2 + 1] = Mma::pack(p2, p3);
        }
    }
    // The row sums over the quad, then their inverses (0 for a row that saw nothing).
    __device__ __forceinline__ void finish(float& inv_lo, float& inv_hi) {
#pragma unroll
        for (int x = 1; x < 4; x <<= 1) {
            l_lo += __shfl_xor_sync(0xffffffffu, l_lo, x);
            l_hi += __shfl_xor_sync(0xffffffffu, l_hi, x);
        }
        inv_lo = l_lo > 0.f ? 1.f / l_lo : 0.f;
        inv_hi = l_hi > 0.f ? 1.f / l_hi : 0.f;
    }
};

// An fp8 tile as it landed (TC_BK rows of HD bytes) widened to f16 into a padded tile.
template <int HD>
__device__ __forceinline__ void widen_tile(uint16_t (*dst)[HD + 8], const unsigned char* raw) {
    for (int x = threadIdx.x; x < TC_BK * HD / 8; x += blockDim.x) {
        const int j = x / (HD / 8), c = x % (HD / 8);
        const uint2 u = *reinterpret_cast<const uint2*>(raw + j * HD + c * 8);
        *reinterpret_cast<uint4*>(&dst[j][c * 8]) = fp8x8_to_f16x8(u);
    }
}

// Shared memory of one block: a 16-bit tile is TC_BK rows of HD + 8 values. bf16 caches take
// two stages of (K, V) tiles, the next keys landing while this tile's are used; fp8 ones take
// one K and one V tile, widened from a raw tile that the next copy lands in. Then one Q tile
// (TC_BQ rows of HD + 8) per head.
template <int HD, typename T>
__host__ __device__ constexpr int prefill_tc_kv_smem() {
    return std::is_same<T, fp8>::value ? 2 * TC_BK * (HD + 8) * 2 + TC_BK * HD
                                       : 4 * TC_BK * (HD + 8) * 2;
}
template <int HD, typename T, int HPB>
__host__ __device__ constexpr int prefill_tc_smem() {
    return prefill_tc_kv_smem<HD, T>() + HPB * TC_BQ * (HD + 8) * 2;
}

template <int HD, typename T, int HPB>
__device__ __forceinline__ void attn_prefill_tc_body(
    const float* __restrict__ q, const T* __restrict__ kc, const T* __restrict__ vc,
    void* __restrict__ out, const uint32_t* __restrict__ tiles,
    const uint32_t* __restrict__ seq_info, const uint32_t* __restrict__ block_tables, int n_heads,
    int n_kv_heads, int block_size, float scale, int out_bf16) {
    constexpr int KC = HD / 16;  // k-chunks of Q K^T
    constexpr int NDT = HD / 8;  // n-tiles of O
    constexpr bool FP8 = std::is_same<T, fp8>::value;
    using Mma = MmaFor<T>;
    using Tile = uint16_t[TC_BK][HD + 8];
    extern __shared__ __align__(16) unsigned char smem[];
    Tile* tile = reinterpret_cast<Tile*>(smem);

    // Four warps per head; a block takes HPB heads of one KV group, sharing its K / V tiles.
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    const int h = blockIdx.y * HPB + (threadIdx.x >> 7);
    const uint32_t* info = seq_info + 4 * tiles[2 * blockIdx.x];
    const int row0 = tiles[2 * blockIdx.x + 1];
    const int q_start = info[0], q_len = info[1], ctx_len = info[2];
    const uint32_t* table = block_tables + info[3];
    const int tile_rows = min(TC_BQ, q_start + q_len - row0);
    const int base_pos = ctx_len - q_len - q_start;  // position of token row t is base_pos + t
    const int max_pos = base_pos + row0 + tile_rows - 1;
    const int kvh = h / (n_heads / n_kv_heads);
    const int kv_dim = n_kv_heads * HD;

    const int g = lane >> 2, tig = lane & 3;
    // This thread's two query rows (g and g + 8 of the warp's 16), as tile-relative indices.
    const int r_lo = warp * 16 + g, r_hi = r_lo + 8;
    const int pos_lo = base_pos + row0 + r_lo, pos_hi = pos_lo + 8;
    // K / V tiles of keys k0.. into shared memory (cp.async, committed by the caller).
    constexpr int NT = 128 * HPB;
    auto load_k = [&](void* dst, int k0) {  // fp8: one cache at a time
        load_tile<HD, T, NT>(dst, nullptr, kc, nullptr, table, k0, max_pos, block_size, kv_dim,
                             kvh);
    };
    auto load_v = [&](void* dst, int k0) {
        load_tile<HD, T, NT>(dst, nullptr, vc, nullptr, table, k0, max_pos, block_size, kv_dim,
                             kvh);
    };
    auto load_kv = [&](int stage, int k0) {  // bf16: K and V tiles of one stage together
        load_tile<HD, T, NT>(tile[2 * stage], tile[2 * stage + 1], kc, vc, table, k0, max_pos,
                             block_size, kv_dim, kvh);
    };
    unsigned char* raw = smem + 2 * sizeof(Tile);  // fp8 only
    if constexpr (FP8) {
        load_k(raw, 0);
    } else {
        load_kv(0, 0);
    }
    cp_async_commit();

    // Q fragments (a[c] covers dimensions 16c .. 16c + 15 of rows r_lo, r_hi) into this warp's
    // 16 rows of its head's Q tile, read back with ldmatrix by `scores`.
    uint16_t(*qs)[HD + 8] = reinterpret_cast<uint16_t(*)[HD + 8]>(
        smem + prefill_tc_kv_smem<HD, T>() + (threadIdx.x >> 7) * TC_BQ * (HD + 8) * 2);
    {
        const float qscale = scale * 1.4426950408889634f;
        const bool lo_ok = r_lo < tile_rows, hi_ok = r_hi < tile_rows;
        const float* q_lo = q + ((size_t)(row0 + (lo_ok ? r_lo : 0)) * n_heads + h) * HD;
        const float* q_hi = q + ((size_t)(row0 + (hi_ok ? r_hi : 0)) * n_heads + h) * HD;
        const float2 zero = make_float2(0.f, 0.f);
#pragma unroll
        for (int d = 2 * tig; d < HD; d += 8) {
            const float2 lo = lo_ok ? *reinterpret_cast<const float2*>(q_lo + d) : zero;
            const float2 hi = hi_ok ? *reinterpret_cast<const float2*>(q_hi + d) : zero;
            *reinterpret_cast<uint32_t*>(&qs[r_lo][d]) = Mma::pack(lo.x * qscale, lo.y * qscale);
            *reinterpret_cast<uint32_t*>(&qs[r_hi][d]) = Mma::pack(hi.x * qscale, hi.y * qscale);
        }
        __syncwarp();
    }
    // The lane's ldmatrix row of the warp's Q rows: matrices (rows 0-7, dims 0-7), (8-15, 0-7),
    // (0-7, 8-15), (8-15, 8-15) of each 16-dimension chunk, the order of an A fragment.
    const uint16_t* q_row = &qs[warp * 16 + (lane & 7) + 8 * ((lane >> 3) & 1)][8 * (lane >> 4)];

    float o[NDT][4];
#pragma unroll
    for (int n = 0; n < NDT; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    RowSoftmax sm;

    // S = Q K^T for the 64 keys from k0, the causal mask and the online softmax: the running
    // max and sum and O are rescaled, and P comes back as A fragments.
    auto scores = [&](const Tile& Ks, int k0, uint32_t (&pa)[4][4]) {
        float s[8][4];
#pragma unroll
        for (int j = 0; j < 8; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
        for (int c = 0; c < KC; c += 2) {
            uint32_t qa[2][4];
            ldmatrix_x4(qa[0], q_row + 16 * c);
            ldmatrix_x4(qa[1], q_row + 16 * c + 16);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                // Matrices: (keys 8j.., dims 16c), (.., 16c + 8), (.., 16c + 16), (.., 16c + 24).
                uint32_t b[4];
                ldmatrix_x4(b, &Ks[8 * j + (lane & 7)][16 * c + 8 * (lane >> 3)]);
                Mma::mma(s[j], qa[0], b[0], b[1]);
                Mma::mma(s[j], qa[1], b[2], b[3]);
            }
        }
        // O needs rescaling only where a row's max grew; past the first tiles that is the rare
        // case, so the warp skips it when no row's did.
        const RowSoftmax::Tile t = sm.update(s, k0, pos_lo, pos_hi, g, tig);
        if (__any_sync(0xffffffffu, t.grew)) {
#pragma unroll
            for (int n = 0; n < NDT; n++) {
                o[n][0] *= t.c_lo;
                o[n][1] *= t.c_lo;
                o[n][2] *= t.c_hi;
                o[n][3] *= t.c_hi;
            }
        }
        sm.probs<Mma>(s, t, pa);
    };
    // O += P V: for each key chunk kk, dims in pairs of n-tiles.
    auto accumulate = [&](const Tile& Vs, const uint32_t (&pa)[4][4]) {
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
#pragma unroll
            for (int n = 0; n < NDT; n += 2) {
                // Matrices: (keys 16kk.., dims 8n), (keys 16kk + 8.., 8n), (16kk.., 8n + 8),
                // (16kk + 8.., 8n + 8), transposed into B fragments.
                uint32_t b[4];
                ldmatrix_x4_trans(
                    b, &Vs[16 * kk + 8 * ((lane >> 3) & 1) + (lane & 7)][8 * n + 8 * (lane >> 4)]);
                Mma::mma(o[n], pa[kk], b[0], b[1]);
                Mma::mma(o[n + 1], pa[kk], b[2], b[3]);
            }
        }
    };

    if constexpr (FP8) {
        // One K and one V tile: V's copy overlaps S, the next K's copy overlaps P V.
        for (int k0 = 0; k0 <= max_pos; k0 += TC_BK) {
            cp_async_wait_all();  // K(k0)
            __syncthreads();      // K(k0) landed; every warp is done with V(k0 - 64)
            widen_tile<HD>(tile[0], raw);
            __syncthreads();  // K tile complete; `raw` free
            load_v(raw, k0);
            cp_async_commit();
            uint32_t pa[4][4];
            scores(tile[0], k0, pa);
            cp_async_wait_all();  // V(k0)
            __syncthreads();      // V(k0) landed; every warp is done with K(k0)
            widen_tile<HD>(tile[1], raw);
            __syncthreads();  // V tile complete; `raw` free
            if (k0 + TC_BK <= max_pos) {
                load_k(raw, k0 + TC_BK);
                cp_async_commit();
            }
            accumulate(tile[1], pa);
        }
    } else {
        // Two stages: the next K and V land while this tile's are used.
        int st = 0;
        for (int k0 = 0; k0 <= max_pos; k0 += TC_BK) {
            if (k0 + TC_BK <= max_pos) {
                load_kv(st ^ 1, k0 + TC_BK);
                cp_async_commit();
                cp_async_wait<1>();  // this tile's copy is done, the next one's may still run
            } else {
                cp_async_wait_all();
            }
            __syncthreads();  // this stage landed for every thread
            uint32_t pa[4][4];
            scores(tile[2 * st], k0, pa);
            accumulate(tile[2 * st + 1], pa);
            __syncthreads();  // every warp is done with this stage before it is refilled
            st ^= 1;
        }
    }
    // Write the tile's rows.
    float inv_lo, inv_hi;
    sm.finish(inv_lo, inv_hi);
    auto store = [&](int r, int d, float a, float b) {
        const size_t at = ((size_t)(row0 + r) * n_heads + h) * HD + d;
        if (out_bf16)
            *reinterpret_cast<__nv_bfloat162*>(static_cast<bf16*>(out) + at) =
                __floats2bfloat162_rn(a, b);
        else
            *reinterpret_cast<float2*>(static_cast<float*>(out) + at) = make_float2(a, b);
    };
#pragma unroll
    for (int n = 0; n < NDT; n++) {
        const int d = 8 * n + 2 * tig;
        if (r_lo < tile_rows) store(r_lo, d, o[n][0] * inv_lo, o[n][1] * inv_lo);
        if (r_hi < tile_rows) store(r_hi, d, o[n][2] * inv_hi, o[n][3] * inv_hi);
    }
}

#define ATTN_PREFILL_TC(NAME, T, HD, HPB)                                                         \
    extern "C" __global__ void __launch_bounds__(128 * HPB, 2) NAME##_##HD(                       \
        const float* __restrict__ q, const T* __restrict__ kc, const T* __restrict__ vc,          \
        void* __restrict__ out, const uint32_t* __restrict__ tiles,                               \
        const uint32_t* __restrict__ seq_info, const uint32_t* __restrict__ block_tables,         \
        int n_heads, int n_kv_heads, int block_size, float scale, int out_bf16) {                 \
        pdl_begin();                                                                              \
        attn_prefill_tc_body<HD, T, HPB>(q, kc, vc, out, tiles, seq_info, block_tables, n_heads,  \
                                         n_kv_heads, block_size, scale, out_bf16);                \
    }
ATTN_PREFILL_TC(attn_prefill_tc, bf16, 64, 1)
ATTN_PREFILL_TC(attn_prefill_tc, bf16, 128, 1)
ATTN_PREFILL_TC(attn_prefill_tc_fp8, fp8, 64, 1)
ATTN_PREFILL_TC(attn_prefill_tc_fp8, fp8, 128, 1)
ATTN_PREFILL_TC(attn_prefill_tc_h2, bf16, 64, 2)
ATTN_PREFILL_TC(attn_prefill_tc_h2, bf16, 128, 2)
ATTN_PREFILL_TC(attn_prefill_tc_h2_fp8, fp8, 64, 2)
ATTN_PREFILL_TC(attn_prefill_tc_h2_fp8, fp8, 128, 2)
