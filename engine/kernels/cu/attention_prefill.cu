// Causal paged attention for prefill chunks on the tensor cores (flash-attention 2 style):
// one block per (64-row query tile, head), four warps of 16 query rows each. Q is held in
// registers as bf16 mma fragments (scaled by softmax_scale * log2(e), so the softmax uses
// exp2); K and V tiles of 64 keys are copied from the paged cache into shared memory with
// cp.async, V's copy overlapping S = Q K^T and the next K's copy overlapping O += P V.
// S and O accumulate in f32 (mma.sync m16n8k16, bf16 inputs); P is rounded to bf16 for P V.
//
// tiles[2 i] = sequence, tiles[2 i + 1] = first token row of tile i. head_dim is HD (64 or 128).
// Grid: (tiles, n_heads), 128 threads.
#include <math.h>
#include "mma.cuh"

#define TC_BQ 64
#define TC_BK 64

// Copies keys k0 .. k0 + TC_BK - 1 of one KV head from the paged cache into shared memory with
// cp.async: a bf16 cache straight into a padded tile (row stride HD + 8), an fp8 one raw (row
// stride HD bytes, widened by `widen_tile` once it has landed). Keys past max_key repeat
// max_key's row: they are masked out of S, and a finite row times p = 0 adds nothing.
template <int HD, typename T>
__device__ __forceinline__ void load_tile(void* dst, const T* __restrict__ cache,
                                          const uint32_t* __restrict__ table, int k0, int max_key,
                                          int block_size, int kv_dim, int kvh) {
    constexpr int VEC = 16 / sizeof(T);  // elements per 16-byte copy
    constexpr int VECS = HD / VEC;
    constexpr int ROW = std::is_same<T, bf16>::value ? (HD + 8) * 2 : HD;  // bytes
    for (int x = threadIdx.x; x < TC_BK * VECS; x += blockDim.x) {
        const int j = x / VECS, c = x % VECS;
        const int key = min(k0 + j, max_key);
        const size_t slot = (size_t)table[key / block_size] * block_size + key % block_size;
        cp_async16(static_cast<unsigned char*>(dst) + j * ROW + c * 16,
                   cache + slot * kv_dim + kvh * HD + c * VEC);
    }
}

// An fp8 tile as it landed (TC_BK rows of HD bytes) widened to f16 into a padded tile.
template <int HD>
__device__ __forceinline__ void widen_tile(uint16_t (*dst)[HD + 8], const unsigned char* raw) {
    for (int x = threadIdx.x; x < TC_BK * HD / 8; x += blockDim.x) {
        const int j = x / (HD / 8), c = x % (HD / 8);
        const uint2 u = *reinterpret_cast<const uint2*>(raw + j * HD + c * 8);
        *reinterpret_cast<uint4*>(&dst[j][c * 8]) = fp8x8_to_f16x8(u);
    }
}

template <int HD, typename T>
__device__ __forceinline__ void attn_prefill_tc_body(
    const float* __restrict__ q, const T* __restrict__ kc, const T* __restrict__ vc,
    float* __restrict__ out, const uint32_t* __restrict__ tiles,
    const uint32_t* __restrict__ seq_info, const uint32_t* __restrict__ block_tables, int n_heads,
    int n_kv_heads, int block_size, float scale) {
    constexpr int KC = HD / 16;  // k-chunks of Q K^T
    constexpr int NT = HD / 8;   // n-tiles of O
    constexpr bool FP8 = std::is_same<T, fp8>::value;
    using Mma = MmaFor<T>;
    // K and V tiles of 16-bit values (bf16, or f16 widened from fp8), and for fp8 the raw tile
    // the next K or V lands in.
    __shared__ __align__(16) uint16_t Ks[TC_BK][HD + 8];
    __shared__ __align__(16) uint16_t Vs[TC_BK][HD + 8];
    __shared__ __align__(16) unsigned char raw[FP8 ? TC_BK * HD : 16];
    // Where K / V tiles land: straight into Ks / Vs for bf16, into `raw` for fp8.
    void* k_dst = FP8 ? static_cast<void*>(raw) : static_cast<void*>(Ks);
    void* v_dst = FP8 ? static_cast<void*>(raw) : static_cast<void*>(Vs);

    const int h = blockIdx.y;
    const uint32_t* info = seq_info + 4 * tiles[2 * blockIdx.x];
    const int row0 = tiles[2 * blockIdx.x + 1];
    const int q_start = info[0], q_len = info[1], ctx_len = info[2];
    const uint32_t* table = block_tables + info[3];
    const int tile_rows = min(TC_BQ, q_start + q_len - row0);
    const int base_pos = ctx_len - q_len - q_start;  // position of token row t is base_pos + t
    const int max_pos = base_pos + row0 + tile_rows - 1;
    const int kvh = h / (n_heads / n_kv_heads);
    const int kv_dim = n_kv_heads * HD;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, tig = lane & 3;
    // This thread's two query rows (g and g + 8 of the warp's 16), as tile-relative indices.
    const int r_lo = warp * 16 + g, r_hi = r_lo + 8;
    const int pos_lo = base_pos + row0 + r_lo, pos_hi = pos_lo + 8;

    load_tile<HD, T>(k_dst, kc, table, 0, max_pos, block_size, kv_dim, kvh);
    cp_async_commit();

    // Q fragments: a[c] covers dimensions 16c .. 16c + 15 of rows r_lo, r_hi.
    uint32_t qa[KC][4];
    {
        const float qs = scale * 1.4426950408889634f;
        const bool lo_ok = r_lo < tile_rows, hi_ok = r_hi < tile_rows;
        const float* q_lo = q + ((size_t)(row0 + (lo_ok ? r_lo : 0)) * n_heads + h) * HD;
        const float* q_hi = q + ((size_t)(row0 + (hi_ok ? r_hi : 0)) * n_heads + h) * HD;
#pragma unroll
        for (int c = 0; c < KC; c++) {
            const int d = 16 * c + 2 * tig;
            const float2 a0 = lo_ok ? *reinterpret_cast<const float2*>(q_lo + d) : make_float2(0, 0);
            const float2 a1 = hi_ok ? *reinterpret_cast<const float2*>(q_hi + d) : make_float2(0, 0);
            const float2 a2 =
                lo_ok ? *reinterpret_cast<const float2*>(q_lo + d + 8) : make_float2(0, 0);
            const float2 a3 =
                hi_ok ? *reinterpret_cast<const float2*>(q_hi + d + 8) : make_float2(0, 0);
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

    for (int k0 = 0; k0 <= max_pos; k0 += TC_BK) {
        cp_async_wait_all();  // K(k0)
        __syncthreads();      // K(k0) visible to all; every warp is done with V(k0 - 64)
        if constexpr (FP8) {
            widen_tile<HD>(Ks, raw);
            __syncthreads();  // Ks complete; `raw` free
        }
        load_tile<HD, T>(v_dst, vc, table, k0, max_pos, block_size, kv_dim, kvh);
        cp_async_commit();

        // S = Q K^T for 64 keys: 8 n-tiles of 8 keys.
        float s[8][4];
#pragma unroll
        for (int j = 0; j < 8; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
        for (int j = 0; j < 8; j++) {
#pragma unroll
            for (int c = 0; c < KC; c += 2) {
                // Matrices: (keys 8j.., dims 16c), (.., 16c + 8), (.., 16c + 16), (.., 16c + 24).
                uint32_t b[4];
                ldmatrix_x4(b, &Ks[8 * j + (lane & 7)][16 * c + 8 * (lane >> 3)]);
                Mma::mma(s[j], qa[c], b[0], b[1]);
                Mma::mma(s[j], qa[c + 1], b[2], b[3]);
            }
        }
        // Causal mask and online softmax (base 2). Rows g / g + 8 live in the 4 lanes of a quad.
        float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int key = k0 + 8 * j + 2 * tig;
            if (key > pos_lo) s[j][0] = -INFINITY;
            if (key + 1 > pos_lo) s[j][1] = -INFINITY;
            if (key > pos_hi) s[j][2] = -INFINITY;
            if (key + 1 > pos_hi) s[j][3] = -INFINITY;
            mx_lo = fmaxf(mx_lo, fmaxf(s[j][0], s[j][1]));
            mx_hi = fmaxf(mx_hi, fmaxf(s[j][2], s[j][3]));
        }
#pragma unroll
        for (int x = 1; x < 4; x <<= 1) {
            mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, x));
            mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, x));
        }
        const float mn_lo = fmaxf(m_lo, mx_lo), mn_hi = fmaxf(m_hi, mx_hi);
        // A row with nothing visible yet (a padded row of the tile) keeps m = -inf: use 0.
        const float mu_lo = mn_lo == -INFINITY ? 0.f : mn_lo;
        const float mu_hi = mn_hi == -INFINITY ? 0.f : mn_hi;
        const float c_lo = exp2f(m_lo - mu_lo), c_hi = exp2f(m_hi - mu_hi);
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
        // P as A fragments: k-chunk kk covers keys 16kk .. 16kk + 15 = n-tiles 2kk, 2kk + 1.
        uint32_t pa[4][4];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const float p0 = exp2f(s[j][0] - mu_lo), p1 = exp2f(s[j][1] - mu_lo);
            const float p2 = exp2f(s[j][2] - mu_hi), p3 = exp2f(s[j][3] - mu_hi);
            l_lo += p0 + p1;
            l_hi += p2 + p3;
            pa[j >> 1][(j & 1) * 2] = Mma::pack(p0, p1);
            pa[j >> 1][(j & 1) * 2 + 1] = Mma::pack(p2, p3);
        }

        cp_async_wait_all();  // V(k0)
        __syncthreads();      // V(k0) visible; every warp is done with K(k0)
        if constexpr (FP8) {
            widen_tile<HD>(Vs, raw);
            __syncthreads();  // Vs complete; `raw` free
        }
        if (k0 + TC_BK <= max_pos) {
            load_tile<HD, T>(k_dst, kc, table, k0 + TC_BK, max_pos, block_size, kv_dim, kvh);
            cp_async_commit();
        }
        // O += P V: for each key chunk kk, dims in pairs of n-tiles.
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
#pragma unroll
            for (int n = 0; n < NT; n += 2) {
                // Matrices: (keys 16kk.., dims 8n), (keys 16kk + 8.., 8n), (16kk.., 8n + 8),
                // (16kk + 8.., 8n + 8), transposed into B fragments.
                uint32_t b[4];
                ldmatrix_x4_trans(
                    b, &Vs[16 * kk + 8 * ((lane >> 3) & 1) + (lane & 7)][8 * n + 8 * (lane >> 4)]);
                Mma::mma(o[n], pa[kk], b[0], b[1]);
                Mma::mma(o[n + 1], pa[kk], b[2], b[3]);
            }
        }
    }
    // Row sums over the quad, then write the tile's rows.
#pragma unroll
    for (int x = 1; x < 4; x <<= 1) {
        l_lo += __shfl_xor_sync(0xffffffffu, l_lo, x);
        l_hi += __shfl_xor_sync(0xffffffffu, l_hi, x);
    }
    const float inv_lo = l_lo > 0.f ? 1.f / l_lo : 0.f, inv_hi = l_hi > 0.f ? 1.f / l_hi : 0.f;
#pragma unroll
    for (int n = 0; n < NT; n++) {
        const int d = 8 * n + 2 * tig;
        if (r_lo < tile_rows)
            *reinterpret_cast<float2*>(out + ((size_t)(row0 + r_lo) * n_heads + h) * HD + d) =
                make_float2(o[n][0] * inv_lo, o[n][1] * inv_lo);
        if (r_hi < tile_rows)
            *reinterpret_cast<float2*>(out + ((size_t)(row0 + r_hi) * n_heads + h) * HD + d) =
                make_float2(o[n][2] * inv_hi, o[n][3] * inv_hi);
    }
}

#define ATTN_PREFILL_TC(NAME, T, HD)                                                              \
    extern "C" __global__ void __launch_bounds__(128) NAME##_##HD(                                \
        const float* __restrict__ q, const T* __restrict__ kc, const T* __restrict__ vc,          \
        float* __restrict__ out, const uint32_t* __restrict__ tiles,                              \
        const uint32_t* __restrict__ seq_info, const uint32_t* __restrict__ block_tables,         \
        int n_heads, int n_kv_heads, int block_size, float scale) {                               \
        attn_prefill_tc_body<HD, T>(q, kc, vc, out, tiles, seq_info, block_tables, n_heads,       \
                                    n_kv_heads, block_size, scale);                               \
    }
ATTN_PREFILL_TC(attn_prefill_tc, bf16, 64)
ATTN_PREFILL_TC(attn_prefill_tc, bf16, 128)
ATTN_PREFILL_TC(attn_prefill_tc_fp8, fp8, 64)
ATTN_PREFILL_TC(attn_prefill_tc_fp8, fp8, 128)
