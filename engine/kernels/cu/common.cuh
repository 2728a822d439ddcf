// Shared helpers for Hearth's kernels: types and warp/block reductions.
#pragma once
#include <math.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <type_traits>

typedef __nv_bfloat16 bf16;
// fp8 e4m3 KV cache elements (value = stored * scale; the scale is 1 until checkpoints carry
// calibrated ones).
typedef __nv_fp8_e4m3 fp8;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the whole block; blockDim.x is a multiple of 32 and at most 1024. Every thread gets
// the result.
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float partial[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();  // partial may still be read by a previous call
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    const int nwarps = blockDim.x >> 5;
    float t = lane < nwarps ? partial[lane] : 0.f;
    return warp_sum(t);
}

// Max over the whole block, as block_sum.
__device__ __forceinline__ float block_max(float v) {
    __shared__ float partial[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    __syncthreads();  // partial may still be read by a previous call
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    return warp_max(lane < (int)(blockDim.x >> 5) ? partial[lane] : -INFINITY);
}

// A 16-byte load of weights that are streamed (read once a step): it skips L1, which keeps the
// activations the same warps read over and over.
__device__ __forceinline__ uint4 ldg_stream(const void* p) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}

// The same for an 8-byte load.
__device__ __forceinline__ uint2 ldg_stream8(const void* p) {
    uint2 v;
    asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
    return v;
}

// Unpacks 8 bf16 values held in a 16-byte vector.
__device__ __forceinline__ void bf16x8_to_f32(uint4 u, float* f) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}

// The dot product of 8 bf16 weights (a 16-byte vector) with x values a then b, summed left to
// right (the one-row sum linear_heads and mla_merge_uv share, so their bits agree).
__device__ __forceinline__ float bf16x8_dot(uint4 w, float4 a, float4 b) {
    float wf[8];
    bf16x8_to_f32(w, wf);
    return wf[0] * a.x + wf[1] * a.y + wf[2] * a.z + wf[3] * a.w + wf[4] * b.x + wf[5] * b.y +
           wf[6] * b.z + wf[7] * b.w;
}

// 8 KV cache values (bf16: 16 bytes, fp8: 8 bytes, 8-value aligned) as f32.
__device__ __forceinline__ void kv8_to_f32(const bf16* p, float* f) {
    bf16x8_to_f32(__ldg(reinterpret_cast<const uint4*>(p)), f);
}
// 8 fp8 e4m3 values held in an 8-byte vector as f32 (exact: e4m3 widens to f16 exactly).
__device__ __forceinline__ void fp8x8_to_f32(uint2 u, float* f) {
    const uint32_t w[2] = {u.x, u.y};
#pragma unroll
    for (int i = 0; i < 2; i++) {
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(
                (__nv_fp8x2_storage_t)(w[i] >> (16 * j)), __NV_E4M3);
            const float2 v = __half22float2(*reinterpret_cast<const __half2*>(&h));
            f[4 * i + 2 * j] = v.x;
            f[4 * i + 2 * j + 1] = v.y;
        }
    }
}
__device__ __forceinline__ void kv8_to_f32(const fp8* p, float* f) {
    fp8x8_to_f32(__ldg(reinterpret_cast<const uint2*>(p)), f);
}

// out[i] = v as f32, or as bf16 when out_bf16.
__device__ __forceinline__ void store_act(void* out, size_t i, float v, int out_bf16) {
    if (out_bf16)
        static_cast<bf16*>(out)[i] = __float2bfloat16(v);
    else
        static_cast<float*>(out)[i] = v;
}

// One f32 value into a KV cache element.
__device__ __forceinline__ void kv_store(bf16* p, float v) { *p = __float2bfloat16(v); }
__device__ __forceinline__ void kv_store(fp8* p, float v) {
    p->__x = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}

// Programmatic dependent launch (sm_90 and later; no-ops before, and when the launch did not ask
// for it). Outside decode graphs the backend launches every kernel with programmatic stream
// serialization, so a kernel may start while the one before it in the stream is still running.
// Every kernel first waits in every block (pdl_wait) for the kernel before it to complete, before
// it touches memory and before any early return, so that no kernel completes before its
// predecessor; then lets the next one launch (pdl_trigger: it is scheduled once all of this
// grid's blocks have passed that point, and its blocks then take free SM slots and wait). Waiting
// first keeps one kernel ahead at most: triggering first let every small kernel after a running
// one launch and park its blocks on the SMs.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// The start of a kernel that prefetches nothing.
__device__ __forceinline__ void pdl_begin() {
    pdl_wait();
    pdl_trigger();
}
