// Multi-head latent attention (DeepSeek-V3's MLA, absorbed form) over a paged latent cache:
// each cached row is [c (rank) | k_rope (rope)], bf16 or fp8 e4m3. Plus the per-head matmul
// the absorbed form needs (q_nope . W_UK, o . W_UV^T).
#include "mma.cuh"

#define MLA_WARPS 4
#define MLA_MAX_RANK 512

__device__ __forceinline__ float kv_load(const bf16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ float kv_load(const fp8* p) { return float(*p); }

// Grid: tokens; a padded row (slot NO_SLOT) writes nothing. latent is f32 or bf16.
template <typename T>
__device__ __forceinline__ void write_latent_body(const void* __restrict__ latent, int lat_bf16,
                                                  const float* __restrict__ k_rope,
                                                  const uint32_t* __restrict__ slots,
                                                  T* __restrict__ cache, int rank, int rope,
                                                  size_t row) {
    const uint32_t slot = slots[row];
    if (slot == 0xffffffffu) return;
    const int width = rank + rope;
    T* dst = cache + (size_t)slot * width;
    for (int i = threadIdx.x; i < width; i += blockDim.x) {
        const float v = i < rank ? (lat_bf16 ? __bfloat162float(
                                                   reinterpret_cast<const bf16*>(latent)[row * rank + i])
                                             : reinterpret_cast<const float*>(latent)[row * rank + i])
                                 : k_rope[row * rope + i - rank];
        kv_store(dst + i, v);
    }
}
extern "C" __global__ void write_latent(const void* latent, int lat_bf16, const float* k_rope,
                                        const uint32_t* slots, bf16* cache, int rank, int rope) {
    pdl_begin();
    write_latent_body(latent, lat_bf16, k_rope, slots, cache, rank, rope, blockIdx.x);
}
extern "C" __global__ void write_latent_fp8(const void* latent, int lat_bf16, const float* k_rope,
                                            const uint32_t* slots, fp8* cache, int rank,
                                            int rope) {
    pdl_begin();
    write_latent_body(latent, lat_bf16, k_rope, slots, cache, rank, rope, blockIdx.x);
}

// out[r, h * n + j] = x[r, h * k : (h + 1) * k] . w[h * n + j, :] (w bf16 [n_heads * n, k]) for
// outputs j = bx * 8 + warp of (row, head) rh = r * n_heads + h: a warp per output, 8 warps. x
// rows are 16-byte aligned when k is a multiple of 8 (arena rows). With WAIT the block has not
// waited for the kernel before yet: each lane's first two weight loads (all of a row of k <=
// 512) go out before pdl_begin, as the weights never depend on that kernel.
template <bool WAIT>
__device__ __forceinline__ void linear_heads_body(const float* __restrict__ x,
                                                  const bf16* __restrict__ w,
                                                  float* __restrict__ out, int n_heads, int n,
                                                  int k, int bx, size_t rh) {
    const int lane = threadIdx.x & 31;
    const int j = bx * 8 + (threadIdx.x >> 5);
    if (j >= n) {
        if (WAIT) pdl_begin();
        return;
    }
    const int h = rh % n_heads;
    const float* xr = x + rh * k;
    const bf16* wr = w + ((size_t)h * n + j) * k;
    float s = 0.f;
    if ((k & 7) == 0) {
        // 16-byte weight loads, two float4 of x each.
        const int i0 = lane * 8;
        const uint4 w0 = i0 < k ? ldg_stream(wr + i0) : uint4{};
        const uint4 w1 = i0 + 256 < k ? ldg_stream(wr + i0 + 256) : uint4{};
        if (WAIT) pdl_begin();
        for (int i = i0; i < k; i += 32 * 8) {
            const uint4 w = i == i0 ? w0 : i == i0 + 256 ? w1 : ldg_stream(wr + i);
            s += bf16x8_dot(w, *reinterpret_cast<const float4*>(xr + i),
                            *reinterpret_cast<const float4*>(xr + i + 4));
        }
    } else {
        if (WAIT) pdl_begin();
        for (int i = lane; i < k; i += 32) s += xr[i] * __bfloat162float(wr[i]);
    }
    s = warp_sum(s);
    if (lane == 0) out[rh * n + j] = s;
}

// Grid (ceil(n / 8), rows * n_heads), 256 threads.
extern "C" __global__ void linear_heads(const float* __restrict__ x, const bf16* __restrict__ w,
                                        float* __restrict__ out, int n_heads, int n, int k) {
    linear_heads_body<true>(x, w, out, n_heads, n, k, blockIdx.x, blockIdx.y);
}

// MLA's per-token preparation of row `row` by one block: latent = rms_norm(k) (f32, or bf16
// with lat_bf16), RoPE on the query's rotary heads (in place) and on the rotary key, then both
// written to the cache row at slots[row] (none for NO_SLOT), with the same arithmetic as
// rms_norm, rope and write_latent one after another. Decode rows are latency-bound, so the
// rotary pairs' loads go out beside the latent's before the norm's block sum, and the cache
// row is written from registers, not read back. rank is a multiple of 4 (16-byte rows).
template <typename T>
__device__ __forceinline__ void mla_prep_body(const float* __restrict__ k,
                                              const float* __restrict__ kv_norm,
                                              void* __restrict__ latent, int lat_bf16, float eps,
                                              float* __restrict__ q_rope, float* __restrict__ k_rope,
                                              const uint32_t* __restrict__ pos,
                                              const float* __restrict__ inv_freq, int n_heads,
                                              int head_dim, int rotary_dim, int neox,
                                              const uint32_t* __restrict__ slots,
                                              T* __restrict__ cache, int rank, size_t row) {
    float* kr = const_cast<float*>(k) + row * rank;
    char* lat = static_cast<char*>(latent) + row * rank * (lat_bf16 ? 2 : 4);
    const float p = (float)pos[row];
    const uint32_t slot = slots[row];
    T* dst = slot == 0xffffffffu ? nullptr : cache + (size_t)slot * (rank + head_dim);
    // 1. The latent's sum of squares (norm_row's first pass).
    const int n4 = rank >> 2;
    const float4* r4 = reinterpret_cast<const float4*>(kr);
    float ss = 0.f;
    for (int i = threadIdx.x; i < n4; i += blockDim.x) {
        const float4 a = r4[i];
        ss += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
    }
    // 2. RoPE (rope_row's arithmetic) on the query heads' pairs, then the key's (pair index
    // n_heads * half on), four pairs a thread in flight; the key's also go to the cache.
    const int half = rotary_dim / 2, n_pairs = (n_heads + 1) * half;
    float* qr = q_rope + row * n_heads * head_dim;
    float* kro = k_rope + row * head_dim;
    for (int i0 = threadIdx.x; i0 < n_pairs; i0 += 4 * blockDim.x) {
        float x0[4], x1[4], f[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int i = min(i0 + u * (int)blockDim.x, n_pairs - 1);
            const int h = i / half, j = i % half;
            const float* xh = h < n_heads ? qr + h * head_dim : kro;
            const int a = neox ? j : 2 * j, b = neox ? j + half : 2 * j + 1;
            x0[u] = xh[a];
            x1[u] = xh[b];
            f[u] = inv_freq[j];
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int i = i0 + u * blockDim.x;
            if (i >= n_pairs) continue;
            const int h = i / half, j = i % half;
            float* xh = h < n_heads ? qr + h * head_dim : kro;
            const int a = neox ? j : 2 * j, b = neox ? j + half : 2 * j + 1;
            float s, c;
            sincosf(p * f[u], &s, &c);
            const float ya = x0[u] * c - x1[u] * s, yb = x1[u] * c + x0[u] * s;
            xh[a] = ya;
            xh[b] = yb;
            if (h == n_heads && dst) {
                kv_store(dst + rank + a, ya);
                kv_store(dst + rank + b, yb);
            }
        }
    }
    // The key's dimensions past rotary_dim go to the cache as they are.
    if (dst)
        for (int d = rotary_dim + threadIdx.x; d < head_dim; d += blockDim.x)
            kv_store(dst + rank + d, kro[d]);
    // 3. The normed latent (norm_row's second pass), into `latent` and the cache (as
    // write_latent reads it back: rounded to bf16 first with lat_bf16).
    const float inv = 1.f / sqrtf(block_sum(ss) / rank + eps);
    const float4* w4 = reinterpret_cast<const float4*>(kv_norm);
    for (int i = threadIdx.x; i < n4; i += blockDim.x) {
        const float4 a = r4[i], g = w4[i];
        float v[4] = {a.x * inv * g.x, a.y * inv * g.y, a.z * inv * g.z, a.w * inv * g.w};
        if (lat_bf16) {
            const __nv_bfloat162 lo = __floats2bfloat162_rn(v[0], v[1]);
            const __nv_bfloat162 hi = __floats2bfloat162_rn(v[2], v[3]);
            uint2 u;
            u.x = *reinterpret_cast<const uint32_t*>(&lo);
            u.y = *reinterpret_cast<const uint32_t*>(&hi);
            reinterpret_cast<uint2*>(lat)[i] = u;
            v[0] = __low2float(lo), v[1] = __high2float(lo);
            v[2] = __low2float(hi), v[3] = __high2float(hi);
        } else {
            reinterpret_cast<float4*>(lat)[i] = make_float4(v[0], v[1], v[2], v[3]);
        }
        if (dst)
#pragma unroll
            for (int c = 0; c < 4; c++) kv_store(dst + 4 * i + c, v[c]);
    }
}

// Without the absorbed query (q_nope null), a block per row (grid rows) of as many threads as
// the latent's RMS norm takes alone. With it (decode rows: the two are independent, and the
// preparation is a latency chain the dot products run beside), grid (ceil(rank / 8), rows +
// rows * n_heads) of 256 threads: blocks (0, r < rows) prepare row r (the rest of those rows
// exit), blocks (x, rows + rh) compute linear_heads' outputs x * 8 .. of q_nope's (row, head)
// rh by W_UK into q_lat.
#define MLA_PREP(NAME, T)                                                                        \
    extern "C" __global__ void NAME(                                                             \
        const float* k, const float* kv_norm, void* latent, int lat_bf16, float eps,             \
        float* q_rope, float* k_rope, const uint32_t* pos, const float* inv_freq, int n_heads,   \
        int head_dim, int rotary_dim, int neox, const uint32_t* slots, T* cache, int rank,       \
        const float* q_nope, const bf16* w_uk, float* q_lat, int nope, int rows) {              \
        if (q_nope && (int)blockIdx.y >= rows) /* W_UK's loads go out before the wait */         \
            return linear_heads_body<true>(q_nope, w_uk, q_lat, n_heads, rank, nope, blockIdx.x,  \
                                           blockIdx.y - rows);                                   \
        pdl_begin();                                                                             \
        if (!q_nope) {                                                                           \
            mla_prep_body(k, kv_norm, latent, lat_bf16, eps, q_rope, k_rope, pos, inv_freq,      \
                          n_heads, head_dim, rotary_dim, neox, slots, cache, rank, blockIdx.x);  \
            return;                                                                              \
        }                                                                                        \
        if ((int)blockIdx.y < rows) {                                                            \
            if (blockIdx.x == 0)                                                                 \
                mla_prep_body(k, kv_norm, latent, lat_bf16, eps, q_rope, k_rope, pos, inv_freq,  \
                              n_heads, head_dim, rotary_dim, neox, slots, cache, rank,           \
                              blockIdx.y);                                                       \
            return;                                                                              \
        }                                                                                        \
    }
MLA_PREP(mla_prep, bf16)
MLA_PREP(mla_prep_fp8, fp8)

// One block of MLA_WARPS warps per (head, row, split), heads varying fastest so that a row's
// heads read its latent rows from L2 together: split z of gridDim.z takes the z-th share of the
// row's causal context, its warps every MLA_WARPS-th key of it with their own online softmax
// (lanes own latent dims lane + 32 i), then merge. With one split the block writes the output
// (zeros for a padded row, which has no context); with several it writes its (max, sum,
// unnormalized output) to `part` for mla_merge. rank is a multiple of 32, at most MLA_MAX_RANK.
template <typename T>
__device__ __forceinline__ void mla_body(const float* __restrict__ q_lat,
                                         const float* __restrict__ q_rope,
                                         const T* __restrict__ cache, float* __restrict__ out,
                                         const uint32_t* __restrict__ tok_seq,
                                         const uint32_t* __restrict__ seq_info,
                                         const uint32_t* __restrict__ block_tables, int n_heads,
                                         int rank, int rope, int block_size, float scale,
                                         int gemm_min_queries, float* __restrict__ part) {
    constexpr int PER = MLA_MAX_RANK / 32;
    __shared__ float m_s[MLA_WARPS], l_s[MLA_WARPS];
    __shared__ float acc_s[MLA_WARPS][MLA_MAX_RANK];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int h = blockIdx.x, row = blockIdx.y;
    const uint32_t* info = seq_info + 4 * tok_seq[row];
    if ((int)info[1] >= gemm_min_queries) return;  // the GEMM path's
    const int n_keys = (int)info[2] - (int)info[1] + (row - (int)info[0]) + 1;
    const int share = (max(n_keys, 0) + gridDim.z - 1) / gridDim.z;
    const int k_lo = blockIdx.z * share, k_hi = min(n_keys, k_lo + share);
    const uint32_t* table = block_tables + info[3];
    const int width = rank + rope, per = rank / 32;
    const float* ql = q_lat + ((size_t)row * n_heads + h) * rank;
    const float* qr = q_rope + ((size_t)row * n_heads + h) * rope;
    float q[PER], acc[PER];
#pragma unroll
    for (int i = 0; i < PER; i++) {
        q[i] = i < per ? ql[lane + 32 * i] : 0.f;
        acc[i] = 0.f;
    }
    float m = -INFINITY, l = 0.f;
    for (int t = k_lo + warp; t < k_hi; t += MLA_WARPS) {
        const size_t slot = (size_t)table[t / block_size] * block_size + t % block_size;
        const T* kr = cache + slot * width;
        float c[PER], s = 0.f;
#pragma unroll
        for (int i = 0; i < PER; i++) {
            c[i] = i < per ? kv_load(kr + lane + 32 * i) : 0.f;
            s += q[i] * c[i];
        }
        for (int d = lane; d < rope; d += 32) s += qr[d] * kv_load(kr + rank + d);
        s = warp_sum(s) * scale;
        const float m_new = fmaxf(m, s);
        const float corr = expf(m - m_new), p = expf(s - m_new);
        l = l * corr + p;
#pragma unroll
        for (int i = 0; i < PER; i++) acc[i] = acc[i] * corr + p * c[i];
        m = m_new;
    }
    if (lane == 0) {
        m_s[warp] = m;
        l_s[warp] = l;
    }
#pragma unroll
    for (int i = 0; i < PER; i++)
        if (i < per) acc_s[warp][lane + 32 * i] = acc[i];
    __syncthreads();
    float m_all = -INFINITY;
    for (int w = 0; w < MLA_WARPS; w++) m_all = fmaxf(m_all, m_s[w]);
    float l_all = 0.f;
    for (int w = 0; w < MLA_WARPS; w++)
        if (l_s[w] > 0.f) l_all += l_s[w] * expf(m_s[w] - m_all);
    if (gridDim.z == 1) {
        float* o = out + ((size_t)row * n_heads + h) * rank;
        for (int d = threadIdx.x; d < rank; d += blockDim.x) {
            float v = 0.f;
            for (int w = 0; w < MLA_WARPS; w++)
                if (l_s[w] > 0.f) v += acc_s[w][d] * expf(m_s[w] - m_all);
            o[d] = l_all > 0.f ? v / l_all : 0.f;
        }
        return;
    }
    float* pp = part + (((size_t)row * n_heads + h) * gridDim.z + blockIdx.z) * (rank + 2);
    if (threadIdx.x == 0) {
        pp[0] = m_all;
        pp[1] = l_all;
    }
    for (int d = threadIdx.x; d < rank; d += blockDim.x) {
        float v = 0.f;
        for (int w = 0; w < MLA_WARPS; w++)
            if (l_s[w] > 0.f) v += acc_s[w][d] * expf(m_s[w] - m_all);
        pp[2 + d] = v;
    }
}

// Combines the splits' partials of each (head, row) into the output (zeros for rows without
// context); rows left to the GEMM path are skipped. Grid (n_heads, rows).
extern "C" __global__ void mla_merge(const float* __restrict__ part, float* __restrict__ out,
                                     const uint32_t* __restrict__ tok_seq,
                                     const uint32_t* __restrict__ seq_info, int n_heads, int rank,
                                     int n_splits, int gemm_min_queries) {
    pdl_begin();
    const int h = blockIdx.x, row = blockIdx.y;
    if ((int)seq_info[4 * tok_seq[row] + 1] >= gemm_min_queries) return;
    const float* pp = part + ((size_t)row * n_heads + h) * n_splits * (rank + 2);
    float m_all = -INFINITY;
    for (int z = 0; z < n_splits; z++)
        if (pp[z * (rank + 2) + 1] > 0.f) m_all = fmaxf(m_all, pp[z * (rank + 2)]);
    float l_all = 0.f;
    for (int z = 0; z < n_splits; z++) {
        const float* q = pp + z * (rank + 2);
        if (q[1] > 0.f) l_all += q[1] * expf(q[0] - m_all);
    }
    float* o = out + ((size_t)row * n_heads + h) * rank;
    for (int d = threadIdx.x; d < rank; d += blockDim.x) {
        float v = 0.f;
        for (int z = 0; z < n_splits; z++) {
            const float* q = pp + z * (rank + 2);
            if (q[1] > 0.f) v += q[2 + d] * expf(q[0] - m_all);
        }
        o[d] = l_all > 0.f ? v / l_all : 0.f;
    }
}
extern "C" __global__ void mla_attention(const float* q_lat, const float* q_rope,
                                         const bf16* cache, float* out, const uint32_t* tok_seq,
                                         const uint32_t* seq_info, const uint32_t* block_tables,
                                         int n_heads, int rank, int rope, int block_size,
                                         float scale, int gemm_min_queries, float* part) {
    pdl_begin();
    mla_body(q_lat, q_rope, cache, out, tok_seq, seq_info, block_tables, n_heads, rank, rope,
             block_size, scale, gemm_min_queries, part);
}
extern "C" __global__ void mla_attention_fp8(const float* q_lat, const float* q_rope,
                                             const fp8* cache, float* out,
                                             const uint32_t* tok_seq, const uint32_t* seq_info,
                                             const uint32_t* block_tables, int n_heads, int rank,
                                             int rope, int block_size, float scale,
                                             int gemm_min_queries, float* part) {
    pdl_begin();
    mla_body(q_lat, q_rope, cache, out, tok_seq, seq_info, block_tables, n_heads, rank, rope,
             block_size, scale, gemm_min_queries, part);
}

// The GEMM path for long prefill chunks (cuBLASLt does Q K^T and P V on tensor cores):
// a sequence's latent rows gathered as K [ctx_pad, rank + rope] and V^T [rank, ctx_pad] in
// bf16 (zero past ctx). Grid ctx_pad.
template <typename T>
__device__ __forceinline__ void mla_gather_body(const T* __restrict__ cache,
                                                const uint32_t* __restrict__ seq_info,
                                                const uint32_t* __restrict__ block_tables,
                                                int seq, int ctx, int ctx_pad, int rank, int rope,
                                                int block_size, bf16* __restrict__ K,
                                                bf16* __restrict__ Vt) {
    const int t = blockIdx.x, width = rank + rope;
    const uint32_t* table = block_tables + seq_info[4 * seq + 3];
    const T* src = t < ctx ? cache + ((size_t)table[t / block_size] * block_size + t % block_size) *
                                         width
                           : nullptr;
    for (int i = threadIdx.x; i < width; i += blockDim.x) {
        const bf16 v = __float2bfloat16(src ? kv_load(src + i) : 0.f);
        K[(size_t)t * width + i] = v;
        if (i < rank) Vt[(size_t)i * ctx_pad + t] = v;
    }
}
extern "C" __global__ void mla_gather(const bf16* cache, const uint32_t* seq_info,
                                      const uint32_t* block_tables, int seq, int ctx, int ctx_pad,
                                      int rank, int rope, int block_size, bf16* K, bf16* Vt) {
    pdl_begin();
    mla_gather_body(cache, seq_info, block_tables, seq, ctx, ctx_pad, rank, rope, block_size, K,
                    Vt);
}
extern "C" __global__ void mla_gather_fp8(const fp8* cache, const uint32_t* seq_info,
                                          const uint32_t* block_tables, int seq, int ctx,
                                          int ctx_pad, int rank, int rope, int block_size, bf16* K,
                                          bf16* Vt) {
    pdl_begin();
    mla_gather_body(cache, seq_info, block_tables, seq, ctx, ctx_pad, rank, rope, block_size, K,
                    Vt);
}

// Q [rows * n_heads, rank + rope] bf16 = [q_lat | q_rope] of rows row0.. Grid rows * n_heads.
extern "C" __global__ void mla_q_pack(const float* __restrict__ q_lat,
                                      const float* __restrict__ q_rope, int row0, int n_heads,
                                      int rank, int rope, bf16* __restrict__ Q) {
    pdl_begin();
    const size_t rh = (size_t)row0 * n_heads + blockIdx.x, width = rank + rope;
    for (int i = threadIdx.x; i < rank + rope; i += blockDim.x)
        Q[blockIdx.x * width + i] =
            __float2bfloat16(i < rank ? q_lat[rh * rank + i] : q_rope[rh * rope + i - rank]);
}

// Causal softmax of the scores S [m, ctx_pad] (row r: query t0 + r / n_heads of a chunk whose
// first query sits at position `first`) into P (bf16, zero past the visible keys). ctx_pad is
// the rows' length (a multiple of 4): at least every key the rows see. Grid m, MS_THREADS
// threads. A row's first MS_THREADS * MS_VEC * 4 scores are read once and kept in registers
// (every row of an 8k context); scores past them are read again for the sum and for P.
#define MS_THREADS 256
#define MS_VEC 8

// Scores 4c .. 4c + 3 of a row, scaled to log2 units; keys from `visible` on are -inf.
__device__ __forceinline__ float4 ms_load(const float4* s, int c, int visible, float sc) {
    float4 v = s[c];
    const int k = 4 * c;
    v.x = k < visible ? v.x * sc : -INFINITY;
    v.y = k + 1 < visible ? v.y * sc : -INFINITY;
    v.z = k + 2 < visible ? v.z * sc : -INFINITY;
    v.w = k + 3 < visible ? v.w * sc : -INFINITY;
    return v;
}

__device__ __forceinline__ float4 ms_exp(float4 v, float m) {
    return make_float4(exp2f(v.x - m), exp2f(v.y - m), exp2f(v.z - m), exp2f(v.w - m));
}

__device__ __forceinline__ uint2 ms_pack(float4 v, float inv) {
    return make_uint2(pack_bf16(v.x * inv, v.y * inv), pack_bf16(v.z * inv, v.w * inv));
}

extern "C" __global__ void __launch_bounds__(MS_THREADS)
    mla_softmax(const float* __restrict__ S, bf16* __restrict__ P, int n_heads, int ctx_pad,
                int first, int t0, float scale) {
    pdl_begin();
    const size_t r = blockIdx.x;
    const int visible = first + t0 + (int)(r / n_heads) + 1;
    const float4* s = reinterpret_cast<const float4*>(S + r * ctx_pad);
    uint2* p = reinterpret_cast<uint2*>(P + r * ctx_pad);
    const int n4 = ctx_pad / 4, vis4 = min(n4, (visible + 3) / 4);
    const float sc = scale * 1.4426950408889634f;
    const float4 none = make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
    float4 v[MS_VEC];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < MS_VEC; i++) {
        const int c = threadIdx.x + i * MS_THREADS;
        v[i] = c < vis4 ? ms_load(s, c, visible, sc) : none;
        m = fmaxf(m, fmaxf(fmaxf(v[i].x, v[i].y), fmaxf(v[i].z, v[i].w)));
    }
    for (int c = threadIdx.x + MS_VEC * MS_THREADS; c < vis4; c += MS_THREADS) {
        const float4 u = ms_load(s, c, visible, sc);
        m = fmaxf(m, fmaxf(fmaxf(u.x, u.y), fmaxf(u.z, u.w)));
    }
    m = block_max(m);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < MS_VEC; i++) {
        v[i] = ms_exp(v[i], m);
        sum += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    }
    for (int c = threadIdx.x + MS_VEC * MS_THREADS; c < vis4; c += MS_THREADS) {
        const float4 u = ms_exp(ms_load(s, c, visible, sc), m);
        sum += (u.x + u.y) + (u.z + u.w);
    }
    const float inv = 1.f / block_sum(sum);
#pragma unroll
    for (int i = 0; i < MS_VEC; i++) {
        const int c = threadIdx.x + i * MS_THREADS;
        if (c < n4) p[c] = ms_pack(v[i], inv);
    }
    for (int c = threadIdx.x + MS_VEC * MS_THREADS; c < n4; c += MS_THREADS)
        p[c] = ms_pack(c < vis4 ? ms_exp(ms_load(s, c, visible, sc), m) : make_float4(0, 0, 0, 0),
                       inv);
}
