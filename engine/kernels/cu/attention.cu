// Paged KV cache writes and causal paged attention over it (prefill chunks with a cached prefix
// and decode rows in one launch). The cache is bf16, per layer [blocks, block_size, kv_heads,
// head_dim] for K and V each.
//
// Step metadata (uploaded once per step): tok_seq[t] is the sequence of query token t;
// seq_info[4 s ..] = (query_start, query_len, context_len, block_table_offset) of sequence s;
// block_tables holds all sequences' physical block ids back to back.
#include <math.h>
#include "common.cuh"

// Grid: tokens.
extern "C" __global__ void write_kv(const float* __restrict__ k, const float* __restrict__ v,
                                    const uint32_t* __restrict__ slots, bf16* __restrict__ kc,
                                    bf16* __restrict__ vc, int kv_dim) {
    const size_t slot = slots[blockIdx.x];
    const float* kr = k + (size_t)blockIdx.x * kv_dim;
    const float* vr = v + (size_t)blockIdx.x * kv_dim;
    for (int i = threadIdx.x; i < kv_dim; i += blockDim.x) {
        kc[slot * kv_dim + i] = __float2bfloat16(kr[i]);
        vc[slot * kv_dim + i] = __float2bfloat16(vr[i]);
    }
}

#define ATTN_WARPS 8
#define ATTN_GROUPS (ATTN_WARPS * 4)  // 8-lane groups per block, each its own key stream
#define ATTN_MAX_DPL 32               // head_dim / 8 per lane: head_dim <= 256

// Decode rows (and short chunks): one block per (query row, head), 8 warps. Each 8-lane group
// takes one key at a time (lanes split head_dim), so a warp has 4 keys' loads in flight and a
// block 32; each group keeps its own online softmax, merged at the end. head_dim % 8 == 0.
// Grid: (rows, n_heads), 256 threads; rows[i] is the token index of the i-th row.
extern "C" __global__ void __launch_bounds__(256) attention(
    const float* __restrict__ q, const bf16* __restrict__ kc, const bf16* __restrict__ vc,
    float* __restrict__ out, const uint32_t* __restrict__ rows,
    const uint32_t* __restrict__ tok_seq, const uint32_t* __restrict__ seq_info,
    const uint32_t* __restrict__ block_tables, int n_heads, int n_kv_heads, int head_dim,
    int block_size, float scale) {
    __shared__ float sm_m[ATTN_GROUPS], sm_l[ATTN_GROUPS];
    __shared__ float sm_acc[ATTN_GROUPS][ATTN_MAX_DPL * 8];
    const int t = rows[blockIdx.x], h = blockIdx.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int grp = lane >> 3, gl = lane & 7, g = warp * 4 + grp;
    const uint32_t* info = seq_info + 4 * tok_seq[t];
    const int q_start = info[0], q_len = info[1], ctx_len = info[2];
    const uint32_t* table = block_tables + info[3];
    const int last = ctx_len - q_len + (t - q_start);  // keys 0..=last are visible
    const int kvh = h / (n_heads / n_kv_heads);
    const int kv_dim = n_kv_heads * head_dim;
    const int dpl = head_dim / 8, d0 = gl * dpl;
    const bool vec = (dpl & 7) == 0;

    float qr[ATTN_MAX_DPL], acc[ATTN_MAX_DPL];
    const float* qh = q + ((size_t)t * n_heads + h) * head_dim + d0;
#pragma unroll
    for (int i = 0; i < ATTN_MAX_DPL; i++) {
        qr[i] = i < dpl ? qh[i] * scale : 0.f;
        acc[i] = 0.f;
    }
    float m = -INFINITY, l = 0.f;
    for (int j = warp * 4 + grp; j <= last; j += ATTN_WARPS * 4) {
        const size_t slot = (size_t)table[j / block_size] * block_size + j % block_size;
        const bf16* kp = kc + slot * kv_dim + kvh * head_dim + d0;
        const bf16* vp = vc + slot * kv_dim + kvh * head_dim + d0;
        float kf[ATTN_MAX_DPL], vf[ATTN_MAX_DPL];
        if (vec) {
#pragma unroll
            for (int c = 0; c < ATTN_MAX_DPL / 8; c++)
                if (c < dpl / 8) {
                    bf16x8_to_f32(*reinterpret_cast<const uint4*>(kp + 8 * c), kf + 8 * c);
                    bf16x8_to_f32(*reinterpret_cast<const uint4*>(vp + 8 * c), vf + 8 * c);
                }
        } else {
#pragma unroll
            for (int i = 0; i < ATTN_MAX_DPL; i++)
                if (i < dpl) {
                    kf[i] = __bfloat162float(kp[i]);
                    vf[i] = __bfloat162float(vp[i]);
                }
        }
        float dot = 0.f;
#pragma unroll
        for (int i = 0; i < ATTN_MAX_DPL; i++)
            if (i < dpl) dot += qr[i] * kf[i];
        // The 8 lanes of a group share one key and loop together; groups of one warp may stop
        // at different keys, so each shuffles within its own 8 lanes only.
        dot += __shfl_xor_sync(0xffu << (grp * 8), dot, 1);
        dot += __shfl_xor_sync(0xffu << (grp * 8), dot, 2);
        dot += __shfl_xor_sync(0xffu << (grp * 8), dot, 4);
        const float m_new = fmaxf(m, dot);
        const float corr = expf(m - m_new), p = expf(dot - m_new);
        l = l * corr + p;
#pragma unroll
        for (int i = 0; i < ATTN_MAX_DPL; i++)
            if (i < dpl) acc[i] = acc[i] * corr + p * vf[i];
        m = m_new;
    }
    if (gl == 0) {
        sm_m[g] = m;
        sm_l[g] = l;
    }
#pragma unroll
    for (int i = 0; i < ATTN_MAX_DPL; i++)
        if (i < dpl) sm_acc[g][d0 + i] = acc[i];
    __syncthreads();
    float M = -INFINITY;
    for (int w = 0; w < ATTN_GROUPS; w++) M = fmaxf(M, sm_m[w]);
    float L = 0.f;
    for (int w = 0; w < ATTN_GROUPS; w++)
        if (sm_l[w] > 0.f) L += sm_l[w] * expf(sm_m[w] - M);
    float* oh = out + ((size_t)t * n_heads + h) * head_dim;
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
        float o = 0.f;
        for (int w = 0; w < ATTN_GROUPS; w++)
            if (sm_l[w] > 0.f) o += sm_acc[w][d] * expf(sm_m[w] - M);
        oh[d] = o / L;
    }
}

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
