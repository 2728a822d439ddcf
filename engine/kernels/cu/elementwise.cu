// Row-wise and elementwise ops: embedding, RMS norm (with fused residual add), rotary embedding,
// SiLU-gated product, bias add, f32 -> bf16 conversion and row gathers. Activations are f32;
// weights of matrices are bf16, norm weights and biases f32.
#include "common.cuh"

// out[r, :] = table[ids[r], :]. Grid: rows.
extern "C" __global__ void embedding(const bf16* __restrict__ table, const uint32_t* __restrict__ ids,
                                     float* __restrict__ out, int cols) {
    const bf16* src = table + (size_t)ids[blockIdx.x] * cols;
    float* dst = out + (size_t)blockIdx.x * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = __bfloat162float(src[c]);
}

// RMS norm of each n-long chunk. Grid: chunks.
extern "C" __global__ void rms_norm(const float* __restrict__ x, const float* __restrict__ w,
                                    float* __restrict__ out, int n, float eps) {
    const float* xr = x + (size_t)blockIdx.x * n;
    float* o = out + (size_t)blockIdx.x * n;
    float ss = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
    const float inv = 1.f / sqrtf(block_sum(ss) / n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) o[i] = xr[i] * inv * w[i];
}

// residual += x; out = rms_norm(residual). Grid: rows.
extern "C" __global__ void add_rms_norm(float* __restrict__ residual, const float* __restrict__ x,
                                        const float* __restrict__ w, float* __restrict__ out, int n,
                                        float eps) {
    float* rr = residual + (size_t)blockIdx.x * n;
    const float* xr = x + (size_t)blockIdx.x * n;
    float* o = out + (size_t)blockIdx.x * n;
    float ss = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = rr[i] + xr[i];
        rr[i] = v;
        ss += v * v;
    }
    const float inv = 1.f / sqrtf(block_sum(ss) / n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) o[i] = rr[i] * inv * w[i];
}

// In-place rotary embedding of x = [rows, n_heads * head_dim]. NeoX pairs (i, i + rotary_dim/2)
// or interleaved pairs (2i, 2i + 1); dimensions past rotary_dim are left alone. Grid: rows.
extern "C" __global__ void rope(float* __restrict__ x, const uint32_t* __restrict__ pos,
                                const float* __restrict__ inv_freq, int n_heads, int head_dim,
                                int rotary_dim, int neox) {
    const int half = rotary_dim / 2;
    const float p = (float)pos[blockIdx.x];
    float* xr = x + (size_t)blockIdx.x * n_heads * head_dim;
    for (int i = threadIdx.x; i < n_heads * half; i += blockDim.x) {
        const int h = i / half, j = i % half;
        float s, c;
        sincosf(p * inv_freq[j], &s, &c);
        float* xh = xr + h * head_dim;
        const int a = neox ? j : 2 * j, b = neox ? j + half : 2 * j + 1;
        const float x0 = xh[a], x1 = xh[b];
        xh[a] = x0 * c - x1 * s;
        xh[b] = x1 * c + x0 * s;
    }
}

// out = silu(gate) * up, elementwise over n values.
extern "C" __global__ void silu_mul(const float* __restrict__ gate, const float* __restrict__ up,
                                    float* __restrict__ out, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float g = gate[i];
        out[i] = g / (1.f + expf(-g)) * up[i];
    }
}

// y[r, c] += bias[c] over n = rows * cols values.
extern "C" __global__ void add_bias(float* __restrict__ y, const float* __restrict__ bias, int cols,
                                    size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] += bias[i % cols];
}

extern "C" __global__ void f32_to_bf16(const float* __restrict__ x, bf16* __restrict__ y, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16(x[i]);
}

// out[i, :] = x[rows[i], :]. Grid: gathered rows.
extern "C" __global__ void gather_rows(const float* __restrict__ x, const uint32_t* __restrict__ rows,
                                       float* __restrict__ out, int cols) {
    const float* src = x + (size_t)rows[blockIdx.x] * cols;
    float* dst = out + (size_t)blockIdx.x * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = src[c];
}
