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

#define ATTN_MAX_WARPS 8
#define ATTN_MAX_PER_LANE 8  // head_dim <= 256

// One block per (query token, head); each warp takes every nwarps-th key with an online softmax,
// then the warps' partial results are merged. Grid: (tokens, n_heads).
extern "C" __global__ void attention(const float* __restrict__ q, const bf16* __restrict__ kc,
                                     const bf16* __restrict__ vc, float* __restrict__ out,
                                     const uint32_t* __restrict__ tok_seq,
                                     const uint32_t* __restrict__ seq_info,
                                     const uint32_t* __restrict__ block_tables, int n_heads,
                                     int n_kv_heads, int head_dim, int block_size, float scale) {
    const int t = blockIdx.x, h = blockIdx.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const uint32_t* info = seq_info + 4 * tok_seq[t];
    const int q_start = info[0], q_len = info[1], ctx_len = info[2];
    const uint32_t* table = block_tables + info[3];
    const int last = ctx_len - q_len + (t - q_start);  // keys 0..=last are visible
    const int kvh = h / (n_heads / n_kv_heads);
    const int kv_dim = n_kv_heads * head_dim;
    const int per_lane = (head_dim + 31) / 32;

    float qr[ATTN_MAX_PER_LANE], acc[ATTN_MAX_PER_LANE];
    const float* qh = q + ((size_t)t * n_heads + h) * head_dim;
#pragma unroll
    for (int i = 0; i < ATTN_MAX_PER_LANE; i++) {
        const int d = lane + 32 * i;
        qr[i] = (i < per_lane && d < head_dim) ? qh[d] * scale : 0.f;
        acc[i] = 0.f;
    }
    float m = -INFINITY, l = 0.f;
    for (int j = warp; j <= last; j += nwarps) {
        const size_t slot = (size_t)table[j / block_size] * block_size + j % block_size;
        const bf16* kp = kc + slot * kv_dim + kvh * head_dim;
        const bf16* vp = vc + slot * kv_dim + kvh * head_dim;
        float dot = 0.f;
#pragma unroll
        for (int i = 0; i < ATTN_MAX_PER_LANE; i++) {
            const int d = lane + 32 * i;
            if (i < per_lane && d < head_dim) dot += qr[i] * __bfloat162float(kp[d]);
        }
        dot = warp_sum(dot);
        const float m_new = fmaxf(m, dot);
        const float corr = expf(m - m_new), p = expf(dot - m_new);
        l = l * corr + p;
#pragma unroll
        for (int i = 0; i < ATTN_MAX_PER_LANE; i++) {
            const int d = lane + 32 * i;
            if (i < per_lane && d < head_dim) acc[i] = acc[i] * corr + p * __bfloat162float(vp[d]);
        }
        m = m_new;
    }

    __shared__ float sm_m[ATTN_MAX_WARPS], sm_l[ATTN_MAX_WARPS];
    __shared__ float sm_acc[ATTN_MAX_WARPS][32 * ATTN_MAX_PER_LANE];
    if (lane == 0) {
        sm_m[warp] = m;
        sm_l[warp] = l;
    }
#pragma unroll
    for (int i = 0; i < ATTN_MAX_PER_LANE; i++) sm_acc[warp][lane + 32 * i] = acc[i];
    __syncthreads();
    float M = -INFINITY;
    for (int w = 0; w < nwarps; w++) M = fmaxf(M, sm_m[w]);
    float L = 0.f;
    for (int w = 0; w < nwarps; w++)
        if (sm_l[w] > 0.f) L += sm_l[w] * expf(sm_m[w] - M);
    float* oh = out + ((size_t)t * n_heads + h) * head_dim;
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
        float o = 0.f;
        for (int w = 0; w < nwarps; w++)
            if (sm_l[w] > 0.f) o += sm_acc[w][d] * expf(sm_m[w] - M);
        oh[d] = o / L;
    }
}
