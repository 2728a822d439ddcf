// Tensor-core and async-copy building blocks shared by the attention, MoE and fp8 GEMM kernels:
// bf16/f16 packing, fp8 widening, mma.sync m16n8k16 with f32 accumulators, ldmatrix, and
// cp.async (sm_80+).
//
// Fragment layouts of mma.m16n8k16 (lane = 4 g + t): A (16x16, row-major) holds (g, 2t..2t+1),
// (g + 8, 2t..), (g, 2t + 8..), (g + 8, 2t + 8..) in its four registers; B (16x8, k-major) holds
// (k = 2t..2t+1, n = g) and (k = 2t + 8.., n = g); C/D (16x8) holds (g, 2t..2t+1) and (g + 8, ..).
#pragma once
#include <cuda_fp16.h>
#include "common.cuh"

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
}

// D = A (16x16, row) * B (16x8, col) + D, bf16 inputs, f32 accumulators.
__device__ __forceinline__ void mma_bf16(float* d, const uint32_t* a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The same with f16 inputs.
__device__ __forceinline__ void mma_f16(float* d, const uint32_t* a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The transpose of an 8x8 matrix of 16-bit values held as mma fragments (lane 4 g + t holds
// row g's columns 2t, 2t + 1): afterwards the lane holds column g's rows 2t, 2t + 1.
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t a) {
    uint32_t d;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
    return d;
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, const void* p) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t* r, const void* p) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(a), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n"); }
// Waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// 2^x with the hardware approximation (2 ulp; 2^-inf = 0), for softmax weights that are rounded
// to 16 bits right after.
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// 2 fp8 e4m3 values (the low 16 bits of w) as 2 f16 values: exact, e4m3 fits f16.
__device__ __forceinline__ uint32_t fp8x2_to_f16x2(uint32_t w) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)w, __NV_E4M3);
    return (uint32_t)h.x | ((uint32_t)h.y << 16);
}

// 8 fp8 e4m3 values (8 bytes) as 8 f16 values (16 bytes): exact, e4m3 fits f16.
__device__ __forceinline__ uint4 fp8x8_to_f16x8(uint2 u) {
    uint32_t r[4];
    const uint32_t w[2] = {u.x, u.y};
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const __half2_raw h =
                __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w[i] >> (16 * j)), __NV_E4M3);
            r[2 * i + j] = (uint32_t)h.x | ((uint32_t)h.y << 16);
        }
    return make_uint4(r[0], r[1], r[2], r[3]);
}

// The mma input type for a KV cache element type: bf16 caches use bf16 (Q and P rounded to
// bf16), fp8 e4m3 caches f16 (they widen to f16 exactly; Q and P in f16).
template <typename T>
struct MmaFor;
template <>
struct MmaFor<bf16> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
        return pack_bf16(lo, hi);
    }
    static __device__ __forceinline__ void mma(float* d, const uint32_t* a, uint32_t b0,
                                               uint32_t b1) {
        mma_bf16(d, a, b0, b1);
    }
};
template <>
struct MmaFor<fp8> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi) { return pack_f16(lo, hi); }
    static __device__ __forceinline__ void mma(float* d, const uint32_t* a, uint32_t b0,
                                               uint32_t b1) {
        mma_f16(d, a, b0, b1);
    }
};
