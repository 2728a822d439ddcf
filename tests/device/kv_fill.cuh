// The attention benchmarks' shared helpers (after the kernels' headers, for bf16 and fp8):
// reproducible pseudo-random KV caches (fill_kv) and queries (fill_f32) in [-1, 1), and a cached
// element as f32 (kv_f32) for the f32 references.
#pragma once
#include "check.cuh"

template <typename T>
__global__ void fill_kv(T* c, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float x = ((bench_hash(i, seed) >> 8) & 0xffff) / 32768.f - 1.f;
        if constexpr (std::is_same<T, fp8>::value)
            c[i] = fp8(x);
        else
            c[i] = __float2bfloat16(x);
    }
}
__global__ void fill_f32(float* x, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = ((bench_hash(i, seed) >> 8) & 0xffff) / 32768.f - 1.f;
}

template <typename T>
__device__ float kv_f32(T v) {
    if constexpr (std::is_same<T, fp8>::value)
        return float(v);
    else
        return __bfloat162float(v);
}
