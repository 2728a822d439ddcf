// Row-wise and elementwise ops: embedding, RMS norm (with fused residual add), rotary embedding,
// SiLU-gated product, bias add, f32 -> bf16 conversion and row gathers. Activations are f32,
// except that the ops whose output only feeds a cuBLASLt matmul (norms, SiLU products, the
// gathered logits rows) write it in bf16 when asked (`out_bf16`), which saves the matmul a
// conversion pass. Weights of matrices are bf16, norm weights and biases f32.
#include "common.cuh"

// out[r, :] = table[ids[r], :]. Grid: rows.
extern "C" __global__ void embedding(const bf16* __restrict__ table, const uint32_t* __restrict__ ids,
                                     float* __restrict__ out, int cols) {
    pdl_begin();
    const bf16* src = table + (size_t)ids[blockIdx.x] * cols;
    float* dst = out + (size_t)blockIdx.x * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = __bfloat162float(src[c]);
}

// RMS norm of one row (n values), optionally adding x into the residual first. A row is one
// block of up to 1024 threads with 16-byte accesses (n % 4 == 0), so a decode row of 4096 takes
// one load per thread instead of a chain of dependent ones.
template <bool ADD>
__device__ __forceinline__ void norm_row(float* __restrict__ rr, const float* __restrict__ xr,
                                         const float* __restrict__ w, void* __restrict__ o,
                                         int n, float eps, int out_bf16) {
    float ss = 0.f;
    if ((n & 3) == 0) {
        const int n4 = n >> 2;
        float4* r4 = reinterpret_cast<float4*>(rr);
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (int i = threadIdx.x; i < n4; i += blockDim.x) {
            float4 a = r4[i];
            if (ADD) {
                const float4 b = x4[i];
                a = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
                r4[i] = a;
            }
            ss += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
        }
        const float inv = 1.f / sqrtf(block_sum(ss) / n + eps);
        const float4* w4 = reinterpret_cast<const float4*>(w);
        for (int i = threadIdx.x; i < n4; i += blockDim.x) {
            const float4 a = r4[i], g = w4[i];
            const float4 v =
                make_float4(a.x * inv * g.x, a.y * inv * g.y, a.z * inv * g.z, a.w * inv * g.w);
            if (out_bf16) {
                const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y);
                const __nv_bfloat162 hi = __floats2bfloat162_rn(v.z, v.w);
                uint2 u;
                u.x = *reinterpret_cast<const uint32_t*>(&lo);
                u.y = *reinterpret_cast<const uint32_t*>(&hi);
                reinterpret_cast<uint2*>(o)[i] = u;
            } else {
                reinterpret_cast<float4*>(o)[i] = v;
            }
        }
    } else {
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            const float v = ADD ? rr[i] + xr[i] : rr[i];
            if (ADD) rr[i] = v;
            ss += v * v;
        }
        const float inv = 1.f / sqrtf(block_sum(ss) / n + eps);
        for (int i = threadIdx.x; i < n; i += blockDim.x) store_act(o, i, rr[i] * inv * w[i], out_bf16);
    }
}

// RMS norm of each n-long chunk. Grid: chunks.
extern "C" __global__ void rms_norm(const float* __restrict__ x, const float* __restrict__ w,
                                    void* __restrict__ out, int n, float eps, int out_bf16) {
    pdl_begin();
    // The row is only read (norm_row writes the residual only when adding).
    float* xr = const_cast<float*>(x) + (size_t)blockIdx.x * n;
    const size_t off = (size_t)blockIdx.x * n * (out_bf16 ? 2 : 4);
    norm_row<false>(xr, nullptr, w, static_cast<char*>(out) + off, n, eps, out_bf16);
}

// residual += x; out = rms_norm(residual). Grid: rows.
extern "C" __global__ void add_rms_norm(float* __restrict__ residual, const float* __restrict__ x,
                                        const float* __restrict__ w, void* __restrict__ out, int n,
                                        float eps, int out_bf16) {
    pdl_begin();
    const size_t off = (size_t)blockIdx.x * n;
    char* o = static_cast<char*>(out) + off * (out_bf16 ? 2 : 4);
    norm_row<true>(residual + off, x + off, w, o, n, eps, out_bf16);
}

// In-place rotary embedding of x = [rows, n_heads * head_dim]. NeoX pairs (i, i + rotary_dim/2)
// or interleaved pairs (2i, 2i + 1); dimensions past rotary_dim are left alone. Grid: rows.
__device__ __forceinline__ void rope_row(float* __restrict__ xr, float p,
                                         const float* __restrict__ inv_freq, int n_heads,
                                         int head_dim, int rotary_dim, int neox) {
    const int half = rotary_dim / 2;
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
extern "C" __global__ void rope(float* __restrict__ x, const uint32_t* __restrict__ pos,
                                const float* __restrict__ inv_freq, int n_heads, int head_dim,
                                int rotary_dim, int neox) {
    pdl_begin();
    rope_row(x + (size_t)blockIdx.x * n_heads * head_dim, (float)pos[blockIdx.x], inv_freq, n_heads,
             head_dim, rotary_dim, neox);
}

// out = silu(gate) * up, elementwise over n values.
extern "C" __global__ void silu_mul(const float* __restrict__ gate, const float* __restrict__ up,
                                    void* __restrict__ out, size_t n, int out_bf16) {
    pdl_begin();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float g = gate[i];
        store_act(out, i, g / (1.f + expf(-g)) * up[i], out_bf16);
    }
}

// y[r, c] += bias[c] over n = rows * cols values.
extern "C" __global__ void add_bias(float* __restrict__ y, const float* __restrict__ bias, int cols,
                                    size_t n) {
    pdl_begin();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] += bias[i % cols];
}

extern "C" __global__ void f32_to_bf16(const float* __restrict__ x, bf16* __restrict__ y, size_t n) {
    pdl_begin();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16(x[i]);
}

// Each row of x [rows, cols] (f32, or bf16 with x_bf16) as fp8 e4m3 and a scale: the row's
// largest magnitude over 448 (1 for a zero row), the values times its inverse rounded to the
// nearest e4m3 (saturating), as `quantization: fp8` stores a weight row. The activations of the
// fp8 tensor-core matmuls past gemm_fp8's rows (W8A8): a row's bytes never depend on the other
// rows. A block a row, 4 values a thread a step (cols % 4 == 0); the second pass reads the row
// again from L1/L2.
__device__ __forceinline__ float4 load4_act(const void* x, size_t i, int x_bf16) {
    if (!x_bf16) return *reinterpret_cast<const float4*>(static_cast<const float*>(x) + i);
    const uint2 u = *reinterpret_cast<const uint2*>(static_cast<const bf16*>(x) + i);
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
    return make_float4(a.x, a.y, b.x, b.y);
}
extern "C" __global__ void quantize_rows_fp8(const void* __restrict__ x, int x_bf16,
                                             uint8_t* __restrict__ q, float* __restrict__ scales,
                                             int cols) {
    pdl_begin();
    const size_t row = (size_t)blockIdx.x * cols;
    float mx = 0.f;
    for (int c = threadIdx.x * 4; c < cols; c += blockDim.x * 4) {
        const float4 v = load4_act(x, row + c, x_bf16);
        mx = fmaxf(mx, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
    }
    mx = block_max(mx);
    const float s = mx > 0.f ? mx / 448.f : 1.f;
    const float inv = 1.f / s;
    for (int c = threadIdx.x * 4; c < cols; c += blockDim.x * 4) {
        const float4 v = load4_act(x, row + c, x_bf16);
        const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(v.x * inv, v.y * inv),
                                                     __NV_SATFINITE, __NV_E4M3);
        const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(v.z * inv, v.w * inv),
                                                     __NV_SATFINITE, __NV_E4M3);
        *reinterpret_cast<uint32_t*>(q + row + c) = lo | hi << 16;
    }
    if (threadIdx.x == 0) scales[blockIdx.x] = s;
}

// W8A8's scales applied after an unscaled fp8 matmul (cuBLASLt without outer-vector scales, as
// the CUDA 12.8 image's): y[r, c] = raw[r, c] * (sx[r] * sw[c]) with raw and y f32 (mode 0) or
// bf16 (mode 1), in place or not, or y[r, c] += the same with raw and y f32 (mode 2, a residual
// stream). A block a row, 4 values a thread a step (n % 4 == 0, sw 16-byte aligned).
extern "C" __global__ void fp8_rescale(const void* raw, void* y, const float* __restrict__ sx,
                                       const float* __restrict__ sw, int n, int mode) {
    pdl_begin();
    const size_t row = (size_t)blockIdx.x * n;
    const float a = sx[blockIdx.x];
    for (int c = threadIdx.x * 4; c < n; c += blockDim.x * 4) {
        const float4 s = *reinterpret_cast<const float4*>(sw + c);
        const size_t i = row + c;
        float4 v = load4_act(raw, i, mode == 1);
        v = make_float4(v.x * (a * s.x), v.y * (a * s.y), v.z * (a * s.z), v.w * (a * s.w));
        if (mode == 1) {
            const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y);
            const __nv_bfloat162 hi = __floats2bfloat162_rn(v.z, v.w);
            uint2 u;
            u.x = *reinterpret_cast<const uint32_t*>(&lo);
            u.y = *reinterpret_cast<const uint32_t*>(&hi);
            *reinterpret_cast<uint2*>(static_cast<bf16*>(y) + i) = u;
            continue;
        }
        float4* y4 = reinterpret_cast<float4*>(static_cast<float*>(y) + i);
        if (mode == 2) {
            const float4 o = *y4;
            v = make_float4(o.x + v.x, o.y + v.y, o.z + v.z, o.w + v.w);
        }
        *y4 = v;
    }
}

// out[i, :] = x[rows[i], :], each of x and out f32 or bf16. Grid: gathered rows.
extern "C" __global__ void gather_rows(const void* __restrict__ x, const uint32_t* __restrict__ rows,
                                       void* __restrict__ out, int cols, int in_bf16,
                                       int out_bf16) {
    pdl_begin();
    const size_t src = (size_t)rows[blockIdx.x] * cols, dst = (size_t)blockIdx.x * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = in_bf16 ? __bfloat162float(static_cast<const bf16*>(x)[src + c])
                                : static_cast<const float*>(x)[src + c];
        store_act(out, dst + c, v, out_bf16);
    }
}

// Splits the rows of a fused Q/K/V projection y[rows, n0 + n1 + n2] into its three outputs,
// adding each one's bias (or none). Grid-stride over rows * (n0 + n1 + n2).
extern "C" __global__ void split_qkv(const float* __restrict__ y, float* __restrict__ q,
                                     float* __restrict__ k, float* __restrict__ v,
                                     const float* __restrict__ bq, const float* __restrict__ bk,
                                     const float* __restrict__ bv, int n0, int n1, int n2,
                                     size_t total) {
    pdl_begin();
    const int cols = n0 + n1 + n2;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / cols;
        int c = i % cols;
        const float x = y[i];
        if (c < n0) {
            q[r * n0 + c] = x + (bq ? bq[c] : 0.f);
        } else if ((c -= n0) < n1) {
            k[r * n1 + c] = x + (bk ? bk[c] : 0.f);
        } else {
            c -= n1;
            v[r * n2 + c] = x + (bv ? bv[c] : 0.f);
        }
    }
}

// out[r, c] = silu(gu[r, c]) * gu[r, n + c] for a fused gate/up projection gu[rows, 2 n], f32
// or (gu_bf16) bf16, two columns per thread (n even). Grid: (column blocks, row blocks),
// grid-stride over both.
extern "C" __global__ void silu_mul_pair(const void* __restrict__ gu, void* __restrict__ out,
                                         int n, int rows, int gu_bf16, int out_bf16) {
    pdl_begin();
    const int pairs = n / 2;
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const size_t in = (size_t)r * n;  // pairs before row r's gate half
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < pairs; c += gridDim.x * blockDim.x) {
            float2 g, u;
            if (gu_bf16) {
                const __nv_bfloat162* p = static_cast<const __nv_bfloat162*>(gu);
                g = __bfloat1622float2(p[in + c]);
                u = __bfloat1622float2(p[in + pairs + c]);
            } else {
                const float2* p = static_cast<const float2*>(gu);
                g = p[in + c];
                u = p[in + pairs + c];
            }
            const float a = g.x / (1.f + expf(-g.x)) * u.x, b = g.y / (1.f + expf(-g.y)) * u.y;
            const size_t o = (size_t)r * pairs + c;
            if (out_bf16)
                static_cast<__nv_bfloat162*>(out)[o] = __floats2bfloat162_rn(a, b);
            else
                static_cast<float2*>(out)[o] = make_float2(a, b);
        }
    }
}
