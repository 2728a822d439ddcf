// Paged KV cache writes, and the CUDA-core prefill attention kernel for head sizes the tensor-core
// one (attention_prefill.cu) does not take. Decode rows: attention_decode.cu. The cache is bf16,
// per layer [blocks, block_size, kv_heads, head_dim] for K and V each.
//
// Step metadata (uploaded once per step): tok_seq[t] is the sequence of query token t;
// seq_info[4 s ..] = (query_start, query_len, context_len, block_table_offset) of sequence s;
// block_tables holds all sequences' physical block ids back to back.
#include <math.h>
#include "common.cuh"

// Grid: tokens. A padded row (slot NO_SLOT) writes nothing.
#define NO_SLOT 0xffffffffu
template <typename T>
__device__ __forceinline__ void write_kv_body(const float* __restrict__ k,
                                              const float* __restrict__ v,
                                              const uint32_t* __restrict__ slots,
                                              T* __restrict__ kc, T* __restrict__ vc, int kv_dim) {
    if (slots[blockIdx.x] == NO_SLOT) return;
    const size_t slot = slots[blockIdx.x];
    const float* kr = k + (size_t)blockIdx.x * kv_dim;
    const float* vr = v + (size_t)blockIdx.x * kv_dim;
    for (int i = threadIdx.x; i < kv_dim; i += blockDim.x) {
        kv_store(kc + slot * kv_dim + i, kr[i]);
        kv_store(vc + slot * kv_dim + i, vr[i]);
    }
}
extern "C" __global__ void write_kv(const float* __restrict__ k, const float* __restrict__ v,
                                    const uint32_t* __restrict__ slots, bf16* __restrict__ kc,
                                    bf16* __restrict__ vc, int kv_dim) {
    pdl_begin();
    write_kv_body(k, v, slots, kc, vc, kv_dim);
}
extern "C" __global__ void write_kv_fp8(const float* __restrict__ k, const float* __restrict__ v,
                                        const uint32_t* __restrict__ slots, fp8* __restrict__ kc,
                                        fp8* __restrict__ vc, int kv_dim) {
    pdl_begin();
    write_kv_body(k, v, slots, kc, vc, kv_dim);
}

// What a layer does between its QKV projections and attention, in one launch: the optional
// per-head RMS norm of q and k (Qwen3's q_norm / k_norm), rotary embedding of both in place,
// then k and v into the cache at the rows' slots. One warp per (row, head of q then of k), four
// heads per block; head_dim <= 256. Same arithmetic as rms_norm, rope and write_kv.
// Grid: (rows, ceil((n_heads + n_kv_heads) / 4)), 128 threads.
#define ROPE_HEADS_PER_BLOCK 4
// One warp's work: head hh (q heads, then k heads) of row `row`, with `sh` (head_dim floats of
// shared memory) its own, which holds the head's result at the end; `write_back` also stores it
// over the input. The weight ring (ring.cu) and batch-1 decode attention
// (attention_decode_tc.cu) run the same function on their warps.
template <typename T>
__device__ __forceinline__ void rope_write_kv_head(
    float* __restrict__ q, float* __restrict__ k, const float* __restrict__ v,
    const float* __restrict__ q_norm, const float* __restrict__ k_norm, float eps,
    const uint32_t* __restrict__ pos, const float* __restrict__ inv_freq,
    const uint32_t* __restrict__ slots, T* __restrict__ kc, T* __restrict__ vc, int n_heads,
    int n_kv_heads, int head_dim, int rotary_dim, int neox, int row, int hh, float* sh,
    bool write_back = true) {
    const int lane = threadIdx.x & 31;
    const bool is_q = hh < n_heads;
    const int h = is_q ? hh : hh - n_heads;
    float* x = is_q ? q + ((size_t)row * n_heads + h) * head_dim
                    : k + ((size_t)row * n_kv_heads + h) * head_dim;
    const float* w = is_q ? q_norm : k_norm;
    const size_t kv_dim = (size_t)n_kv_heads * head_dim;
    const float* vr = v + row * kv_dim + (size_t)h * head_dim;
    const int half = rotary_dim / 2;
    // Every global read up front, unrolled, so a decode row pays one round trip, not one per
    // step: up to 8 values per lane of x, the norm weight and v (head_dim <= 256), up to 4
    // frequencies (rotary_dim <= 256), the position and the cache slot.
    const uint32_t slot = slots[row];
    const float p = (float)pos[row];
    float xv[8], wv[8], vv[8], fr[4];
#pragma unroll
    for (int e = 0; e < 8; e++) {
        const int i = lane + 32 * e;
        // q, k and v from L2: in the ring another block wrote them in this launch.
        xv[e] = i < head_dim ? __ldcg(x + i) : 0.f;
        wv[e] = w && i < head_dim ? w[i] : 1.f;
        vv[e] = !is_q && i < head_dim ? __ldcg(vr + i) : 0.f;
    }
#pragma unroll
    for (int e = 0; e < 4; e++) fr[e] = lane + 32 * e < half ? inv_freq[lane + 32 * e] : 0.f;
    float ss = 0.f;
#pragma unroll
    for (int e = 0; e < 8; e++) ss += xv[e] * xv[e];
    const float inv = w ? 1.f / sqrtf(warp_sum(ss) / head_dim + eps) : 1.f;
#pragma unroll
    for (int e = 0; e < 8; e++) {
        const int i = lane + 32 * e;
        if (i < head_dim) sh[i] = w ? xv[e] * inv * wv[e] : xv[e];
    }
    __syncwarp();
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const int j = lane + 32 * e;
        if (j >= half) break;
        float s, c;
        sincosf(p * fr[e], &s, &c);
        const int a = neox ? j : 2 * j, b = neox ? j + half : 2 * j + 1;
        const float x0 = sh[a], x1 = sh[b];
        sh[a] = x0 * c - x1 * s;
        sh[b] = x1 * c + x0 * s;
    }
    __syncwarp();
#pragma unroll
    for (int e = 0; e < 8; e++) {
        const int i = lane + 32 * e;
        if (i >= head_dim) break;
        if (write_back) x[i] = sh[i];
        if (!is_q && slot != NO_SLOT) {
            const size_t at = (size_t)slot * kv_dim + (size_t)h * head_dim + i;
            kv_store(kc + at, sh[i]);
            kv_store(vc + at, vv[e]);
        }
    }
}

#define ROPE_WRITE_KV(NAME, T)                                                                    \
    extern "C" __global__ void NAME(                                                              \
        float* __restrict__ q, float* __restrict__ k, const float* __restrict__ v,                \
        const float* __restrict__ q_norm, const float* __restrict__ k_norm, float eps,            \
        const uint32_t* __restrict__ pos, const float* __restrict__ inv_freq,                     \
        const uint32_t* __restrict__ slots, T* __restrict__ kc, T* __restrict__ vc, int n_heads,  \
        int n_kv_heads, int head_dim, int rotary_dim, int neox) {                                 \
        pdl_begin();                                                                              \
        __shared__ float heads[ROPE_HEADS_PER_BLOCK][256];                                        \
        const int warp = threadIdx.x >> 5, hh = blockIdx.y * ROPE_HEADS_PER_BLOCK + warp;         \
        if (hh >= n_heads + n_kv_heads) return; /* the whole warp; nothing syncs the block */     \
        rope_write_kv_head(q, k, v, q_norm, k_norm, eps, pos, inv_freq, slots, kc, vc, n_heads,   \
                           n_kv_heads, head_dim, rotary_dim, neox, blockIdx.x, hh, heads[warp]);  \
    }
ROPE_WRITE_KV(rope_write_kv, bf16)
ROPE_WRITE_KV(rope_write_kv_fp8, fp8)

#define FA_BQ 64   // query rows per block
#define FA_BK 64   // keys per shared-memory tile
#define FA_CHUNK 16  // keys per online-softmax update
#define FA_MAX_HD 128

// Prefill chunks (flash-attention style, CUDA cores): one block per (64-row query tile, head),
// two threads per query row, each owning half of head_dim; K and V tiles of 64 keys are staged
// in shared memory from the paged cache and shared by the tile's 64 queries. Every thread runs
// the same loop (masked keys score -inf), so the pair shuffles stay converged.
// tiles[2 i] = sequence, tiles[2 i + 1] = first token row of tile i. head_dim % 16 == 0 and
// head_dim <= 128. Grid: (tiles, n_heads), 128 threads.
extern "C" __global__ void __launch_bounds__(128) attention_prefill(
    const float* __restrict__ q, const bf16* __restrict__ kc, const bf16* __restrict__ vc,
    float* __restrict__ out, const uint32_t* __restrict__ tiles,
    const uint32_t* __restrict__ seq_info, const uint32_t* __restrict__ block_tables, int n_heads,
    int n_kv_heads, int head_dim, int block_size, float scale) {
    pdl_begin();
    __shared__ __align__(16) bf16 Ks[FA_BK][FA_MAX_HD];
    __shared__ __align__(16) bf16 Vs[FA_BK][FA_MAX_HD];
    const int h = blockIdx.y;
    const uint32_t* info = seq_info + 4 * tiles[2 * blockIdx.x];
    const int row0 = tiles[2 * blockIdx.x + 1];
    const int q_start = info[0], q_len = info[1], ctx_len = info[2];
    const uint32_t* table = block_tables + info[3];
    const int q_end = q_start + q_len;
    const int tile_rows = min(FA_BQ, q_end - row0);
    const int base_pos = ctx_len - q_len - q_start;  // position of token row t is base_pos + t
    const int max_pos = base_pos + row0 + tile_rows - 1;
    const int kvh = h / (n_heads / n_kv_heads);
    const int kv_dim = n_kv_heads * head_dim;

    const int qi = threadIdx.x >> 1, half = threadIdx.x & 1;
    const int t = row0 + qi;
    const bool active = qi < tile_rows;
    const int pos = base_pos + t;
    const int hd2 = head_dim / 2, c8n = hd2 / 8;
    float qr[FA_MAX_HD / 2], acc[FA_MAX_HD / 2];
    const float* qh = q + ((size_t)(active ? t : row0) * n_heads + h) * head_dim + half * hd2;
#pragma unroll
    for (int i = 0; i < FA_MAX_HD / 2; i++) {
        qr[i] = (i < hd2 && active) ? qh[i] * scale : 0.f;
        acc[i] = 0.f;
    }
    float m = -INFINITY, l = 0.f;
    const int vecs = head_dim / 8;  // 16-byte vectors per key row
    for (int k0 = 0; k0 <= max_pos; k0 += FA_BK) {
        __syncthreads();
        for (int i = threadIdx.x; i < FA_BK * vecs; i += blockDim.x) {
            const int j = i / vecs, c = i % vecs, key = k0 + j;
            uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
            if (key <= max_pos) {
                const size_t slot = (size_t)table[key / block_size] * block_size + key % block_size;
                const size_t off = slot * kv_dim + kvh * head_dim + c * 8;
                kv = *reinterpret_cast<const uint4*>(kc + off);
                vv = *reinterpret_cast<const uint4*>(vc + off);
            }
            *reinterpret_cast<uint4*>(&Ks[j][c * 8]) = kv;
            *reinterpret_cast<uint4*>(&Vs[j][c * 8]) = vv;
        }
        __syncthreads();
        for (int j0 = 0; j0 < FA_BK; j0 += FA_CHUNK) {
            float sc[FA_CHUNK];
            float cmax = -INFINITY;
#pragma unroll
            for (int jj = 0; jj < FA_CHUNK; jj++) {
                const uint4* kr = reinterpret_cast<const uint4*>(&Ks[j0 + jj][half * hd2]);
                float d = 0.f;
#pragma unroll
                for (int c = 0; c < FA_MAX_HD / 16; c++) {
                    if (c < c8n) {
                        float f[8];
                        bf16x8_to_f32(kr[c], f);
#pragma unroll
                        for (int e = 0; e < 8; e++) d += qr[c * 8 + e] * f[e];
                    }
                }
                d += __shfl_xor_sync(0xffffffffu, d, 1);
                const int key = k0 + j0 + jj;
                sc[jj] = (active && key <= pos) ? d : -INFINITY;
                cmax = fmaxf(cmax, sc[jj]);
            }
            // No branch on fully masked chunks: the pair shuffles above must stay converged.
            const float m_new = fmaxf(m, cmax);
            const float m_use = m_new == -INFINITY ? 0.f : m_new;
            const float corr = expf(m - m_use);
            l *= corr;
#pragma unroll
            for (int i = 0; i < FA_MAX_HD / 2; i++) acc[i] *= corr;
#pragma unroll
            for (int jj = 0; jj < FA_CHUNK; jj++) {
                const float p = expf(sc[jj] - m_use);
                l += p;
                const uint4* vr = reinterpret_cast<const uint4*>(&Vs[j0 + jj][half * hd2]);
#pragma unroll
                for (int c = 0; c < FA_MAX_HD / 16; c++) {
                    if (c < c8n) {
                        float f[8];
                        bf16x8_to_f32(vr[c], f);
#pragma unroll
                        for (int e = 0; e < 8; e++) acc[c * 8 + e] += p * f[e];
                    }
                }
            }
            m = m_new;
        }
    }
    if (active) {
        float* oh = out + ((size_t)t * n_heads + h) * head_dim + half * hd2;
#pragma unroll
        for (int i = 0; i < FA_MAX_HD / 2; i++)
            if (i < hd2) oh[i] = acc[i] / l;
    }
}
