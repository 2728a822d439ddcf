// How close can a batch-1 decode get to the copy rate if a layer's dependent steps run as
// separate kernels, or inside one persistent kernel with grid barriers between them?
//
// A decode token is modelled as a chain of GEMVs y = W x with the byte sizes of a model's
// matrices (GLM-4.7-Flash: 11 steps a layer, 47 layers, then the head; Qwen3-8B: 7 steps a layer,
// 36 layers, then the head). Each step reads the previous step's output, so nothing of a step may
// start before the step before it has finished everywhere, which is what the engine's decode
// graphs pay for in launch gaps and ramp-down tails. Every variant computes each row with the
// same code and order (explicit roundings, so no contraction differs between kernels), so
// their outputs must be equal bit for bit (checked).
//
// Variants: the chain as one kernel a step in a CUDA graph (plain; with programmatic dependent
// launch; with PDL and each warp's first weight loads issued before griddepcontrol.wait), and as
// one cooperative persistent kernel (cooperative_groups grid sync; a one-counter barrier; that
// barrier with each warp's first weight loads of the next step issued before it; no barrier at
// all, which races and gives only the streaming ceiling of this GEMV code); and as a persistent
// kernel whose weight stream never waits for the chain (the weight ring below: a producer warp
// bulk-copies every step's weights into shared memory ahead of the consumers, which wait only for
// their input), with diagnostics that drop its waits, its input staging or its dot products.
// The chain shapes come with and without the RMS norms' steps. References in the same run:
// cudaMemcpy device to device, and one kernel streaming every weight once.
//
// Build and run on the GPU machine: tests/device/run.sh chain (nvcc -O3 -arch=sm_90a).
// Not part of the engine: a measurement to decide how the decode path is built next.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <utility>
#include <vector>

// The engine's streamed weight load (ldg_stream) and programmatic launch (pdl_wait, pdl_trigger).
#include "../../engine/kernels/cu/common.cuh"

namespace cg = cooperative_groups;

#include "check.cuh"

constexpr int WARPS = 8;     // warps a block
constexpr int THREADS = WARPS * 32;
constexpr int U = 4;         // 16-byte weight loads in flight a lane
constexpr int ACT = 1 << 18; // floats in each activation buffer (>= every N and K)

struct Step {
    const __nv_bfloat16* w;  // [n, k] row-major
    int n, k;
    int normed;  // the input is RMS-normed first (the weight ring with RING_FOLD_NORM only)
};

struct Chain {
    const Step* steps;  // device array
    int count;
    float* act[2];      // ping-pong activations: step i reads act[i & 1], writes act[(i + 1) & 1]
    unsigned* counter;  // grid barrier arrivals (zeroed before each launch)
    unsigned* error;    // set when a barrier spins too long
    const float* gamma; // an RMS norm weight (>= every K)
};

__device__ __forceinline__ float dot8x(uint4 u, float4 a, float4 b) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
    const float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        s = __fmaf_rn(__uint_as_float(w[i] << 16), xv[2 * i], s);
        s = __fmaf_rn(__uint_as_float(w[i] & 0xffff0000u), xv[2 * i + 1], s);
    }
    return s;
}

// x is 16-byte aligned (two 16-byte loads).
__device__ __forceinline__ float dot8(uint4 u, const float* x) {
    return dot8x(u, *reinterpret_cast<const float4*>(x), *reinterpret_cast<const float4*>(x + 4));
}

// warp_sum with explicit roundings.
__device__ __forceinline__ float warp_sum_rn(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// The first U loads of row `r` of step `s` for this lane (zeros past the row's end).
__device__ __forceinline__ void load_group(const Step& s, int r, int base, int lane,
                                           uint4 (&v)[U]) {
    const uint4* row = reinterpret_cast<const uint4*>(s.w + (size_t)r * s.k);
    const int k8n = s.k >> 3;
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int c = base + lane + 32 * u;
        v[u] = c < k8n ? ldg_stream(row + c) : make_uint4(0, 0, 0, 0);
    }
}

// Rows r = gwarp, gwarp + nwarps, ... of step s, x staged in shared memory. `pre` holds the
// first load group of row gwarp when `have_pre`. The warp's first `staged` 16-byte chunks (its
// rows' chunks in visiting order) are already in shared memory at `wsm`.
__device__ void run_rows(const Step& s, const float* xs, float* y, int gwarp, int nwarps,
                         uint4 (&pre)[U], bool have_pre, const uint4* wsm = nullptr,
                         int staged = 0) {
    const int lane = threadIdx.x & 31;
    const int k8n = s.k >> 3;
    int seq = 0;  // chunks of this warp's earlier rows
    for (int r = gwarp; r < s.n; r += nwarps, seq += k8n) {
        float acc = 0.f;
        for (int base = 0; base < k8n; base += 32 * U) {
            uint4 v[U];
            if (have_pre && r == gwarp && base == 0) {
#pragma unroll
                for (int u = 0; u < U; u++) v[u] = pre[u];
            } else if (seq + base < staged) {
                const uint4* row = reinterpret_cast<const uint4*>(s.w + (size_t)r * s.k);
#pragma unroll
                for (int u = 0; u < U; u++) {
                    const int c = base + lane + 32 * u;
                    v[u] = c >= k8n           ? make_uint4(0, 0, 0, 0)
                           : seq + c < staged ? wsm[seq + c]
                                              : ldg_stream(row + c);
                }
            } else {
                load_group(s, r, base, lane, v);
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int c = base + lane + 32 * u;
                if (c < k8n) acc = __fadd_rn(acc, dot8(v[u], xs + 8 * c));
            }
        }
        acc = warp_sum_rn(acc);
        if (lane == 0) y[r] = acc;
    }
}

__device__ __forceinline__ void stage_x(const float* x, float* xs, int k) {
    for (int i = threadIdx.x; i < k; i += blockDim.x) xs[i] = __ldcg(x + i);
    __syncthreads();
}

// Copies the warp's first `staged` weight chunks (its rows' 16-byte chunks in visiting order)
// into shared memory with cp.async; they are waited for by wait_staged.
__device__ __forceinline__ void stage_weights(const Step& s, int gwarp, int nwarps, uint4* wsm,
                                              int staged) {
    const int k8n = s.k >> 3;
    for (int j = (threadIdx.x & 31); j < staged; j += 32) {
        const int r = gwarp + (j / k8n) * nwarps;
        if (r >= s.n) break;
        const uint4* src = reinterpret_cast<const uint4*>(s.w + (size_t)r * s.k) + j % k8n;
        const unsigned dst = (unsigned)__cvta_generic_to_shared(wsm + j);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
}
__device__ __forceinline__ void wait_staged() {
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncwarp();  // lanes read each other's chunks
}

// One step as its own kernel. mode 0: plain; 1: PDL (wait, then trigger, as the engine does);
// 2: PDL with the first load group issued before the wait; 3: PDL, launched one block an SM;
// 4: as 3, with up to `staged` chunks a warp copied into shared memory before the wait (the
// block holds under half an SM, so the next step's block is resident and copying while this one
// runs).
__global__ void __launch_bounds__(THREADS) step_kernel(Step s, const float* x, float* y, int mode,
                                                       int xs_floats, int staged) {
    extern __shared__ float xs[];
    const int warp = threadIdx.x >> 5;
    const int gwarp = blockIdx.x * WARPS + warp;
    const int nwarps = gridDim.x * WARPS;
    uint4* wsm = reinterpret_cast<uint4*>(xs + xs_floats) + (size_t)warp * staged;
    if (mode != 4) staged = 0;
    uint4 pre[U];
    const bool have_pre = mode == 2 && gwarp < s.n;
    if (have_pre) load_group(s, gwarp, 0, threadIdx.x & 31, pre);
    if (staged) stage_weights(s, gwarp, nwarps, wsm, staged);
    if (mode >= 1) {
        pdl_wait();
        pdl_trigger();
    }
    stage_x(x, xs, s.k);
    if (staged) wait_staged();
    run_rows(s, xs, y, gwarp, nwarps, pre, have_pre, wsm, staged);
}

__device__ __forceinline__ void counter_barrier(const Chain& c, unsigned target) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(c.counter, 1u);
        // A wait of more than ~1 s means the barrier is broken: give up and flag it, and skip
        // every later wait, so a broken barrier costs seconds, not a hung GPU.
        unsigned v = 0;
        for (int spins = 0; *(volatile unsigned*)c.error == 0; spins++) {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(c.counter) : "memory");
            if (v >= target) break;
            if (spins > (1 << 22)) atomicExch(c.error, 1u);
        }
        __threadfence();
    }
    __syncthreads();
}

// The whole chain in one cooperative launch. mode 0: cooperative_groups grid sync; 1: counter
// barrier; 2: counter barrier with the next step's first load group issued before it; 3: no
// barrier (races; streaming ceiling only).
__global__ void __launch_bounds__(THREADS) persistent_kernel(Chain c, int mode) {
    extern __shared__ float xs[];
    const int gwarp = blockIdx.x * WARPS + (threadIdx.x >> 5);
    const int nwarps = gridDim.x * WARPS;
    const int lane = threadIdx.x & 31;
    uint4 pre[U];
    bool have_pre = false;
    for (int i = 0; i < c.count; i++) {
        const Step s = c.steps[i];
        stage_x(c.act[i & 1], xs, s.k);
        run_rows(s, xs, c.act[(i + 1) & 1], gwarp, nwarps, pre, have_pre);
        if (i + 1 == c.count) break;
        have_pre = false;
        if (mode == 2) {
            const Step next = c.steps[i + 1];
            have_pre = gwarp < next.n;
            if (have_pre) load_group(next, gwarp, 0, lane, pre);
        }
        if (mode == 0) {
            cg::this_grid().sync();
        } else if (mode <= 2) {
            counter_barrier(c, (unsigned)gridDim.x * (unsigned)(i + 1));
        } else {
            __syncthreads();  // xs is restaged
        }
    }
}

// ---- The weight ring: a persistent kernel whose weight stream never waits for activations ----
//
// One block an SM: a producer warp whose lane 0 copies the block's share of every step's weights
// (its rows of each matrix, contiguous) into a ring of shared-memory slots with bulk copies
// (cp.async.bulk, completion counted on an mbarrier a slot), as far ahead as the ring allows and
// across step boundaries; and CW consumer warps that wait for a step's input (a per-step arrival
// counter reaching the grid's size), stage it in shared memory, take the ring's slots in order
// (rows striped over the warps, each lane-strided in the same order as run_rows, so the outputs
// are the same bits), free each slot (an mbarrier arrival a warp), write their rows and count
// the block in. So the only waits on the chain are the consumers'; the DRAM stream runs ahead by
// up to a ring's worth (~200 KB an SM, ~26 MB in all).
constexpr int RING_MAX_SLOTS = 64;
constexpr long long RING_SPIN_LIMIT = 1ll << 26;
constexpr int RING_NO_WAIT = 1, RING_NO_STAGE = 2, RING_NO_DOT = 4;
// Steps marked `normed` RMS-norm their staged input first (sum of squares over the block, then
// x * inv * gamma in place): the norm folded into the staging, no step of its own.
constexpr int RING_FOLD_NORM = 8;

// A block's part of a step: rows [r0, r1), in chunks of `rows_per` whole rows, or, for rows
// longer than a slot, `parts` pieces of `part8` 16-byte units a row.
struct RingPlan {
    int r0, r1, rows_per, parts, part8, chunks;
};

__device__ __forceinline__ RingPlan ring_plan(const Step& s, int block, int blocks, int slot_bytes) {
    RingPlan p;
    const int per = (s.n + blocks - 1) / blocks;
    p.r0 = min(s.n, block * per);
    p.r1 = min(s.n, p.r0 + per);
    const int k8n = s.k >> 3, row_bytes = s.k * 2;
    if (row_bytes <= slot_bytes) {
        p.rows_per = slot_bytes / row_bytes;
        p.parts = 1;
        p.part8 = k8n;
        p.chunks = (p.r1 - p.r0 + p.rows_per - 1) / p.rows_per;
    } else {
        p.rows_per = 1;
        p.parts = (row_bytes + slot_bytes - 1) / slot_bytes;
        p.part8 = (k8n + p.parts - 1) / p.parts;
        p.chunks = (p.r1 - p.r0) * p.parts;
    }
    return p;
}

__device__ __forceinline__ bool mbar_test(uint32_t bar, uint32_t parity) {
    uint32_t ok;
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(ok)
        : "r"(bar), "r"(parity)
        : "memory");
    return ok != 0;
}

// Waits for the mbarrier's phase of this parity to complete (gives up, flagging `error`, after
// RING_SPIN_LIMIT tries, so a bug costs seconds, not a hung GPU).
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity, unsigned* error) {
    for (long long i = 0; !mbar_test(bar, parity); i++)
        if (i > RING_SPIN_LIMIT) {
            atomicExch(error, 2u);
            return;
        }
}

template <int CW>
__global__ void __launch_bounds__((CW + 1) * 32, 1)
    ring_kernel(Chain c, unsigned* counters, int slot_bytes, int slots, int xs_floats, int flags) {
    // Diagnostics (timing only, wrong outputs): RING_NO_WAIT skips the waits for the step
    // before (races), RING_NO_STAGE the input's staging, RING_NO_DOT the dot products.
    const bool sync = !(flags & RING_NO_WAIT), stage = !(flags & RING_NO_STAGE),
               dots = !(flags & RING_NO_DOT), fold_norm = flags & RING_FOLD_NORM;
    __shared__ float norm_part[32];
    extern __shared__ __align__(128) unsigned char ring_smem[];
    __shared__ __align__(8) uint64_t full[RING_MAX_SLOTS], empty[RING_MAX_SLOTS];
    // In a cluster, each block bulk-copies its share of a step's input into every block of the
    // cluster (multicast), completion counted on each block's xbar: the input leaves L2 once a
    // cluster instead of once a block.
    __shared__ __align__(8) uint64_t xbar;
    uint32_t cs, rank;
    asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(cs));
    asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    const uint32_t xbar0 = (uint32_t)__cvta_generic_to_shared(&xbar);
    uint32_t xphase = 0;
    float* xs = reinterpret_cast<float*>(ring_smem);
    unsigned char* ring = ring_smem + (size_t)xs_floats * 4;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const uint32_t full0 = (uint32_t)__cvta_generic_to_shared(full);
    const uint32_t empty0 = (uint32_t)__cvta_generic_to_shared(empty);
    if (threadIdx.x == 0) {
        for (int i = 0; i < slots; i++) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(full0 + 8 * i));
            asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(empty0 + 8 * i),
                         "r"(CW));
        }
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(xbar0));
    }
    __syncthreads();
    if (cs > 1) {
        // The cluster's barriers are initialised before any block copies into another.
        asm volatile("barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;" ::: "memory");
    }
    if (warp == CW) {
        // The producer: every step's chunks in order, into the next free slot.
        if (lane != 0) return;
        int slot = 0;
        uint32_t phase = 0;
        for (int i = 0; i < c.count; i++) {
            const Step s = c.steps[i];
            const RingPlan p = ring_plan(s, blockIdx.x, gridDim.x, slot_bytes);
            for (int j = 0; j < p.chunks; j++) {
                const __nv_bfloat16* src;
                int bytes;
                if (p.parts == 1) {
                    const int r = p.r0 + j * p.rows_per;
                    src = s.w + (size_t)r * s.k;
                    bytes = min(p.rows_per, p.r1 - r) * s.k * 2;
                } else {
                    const int r = p.r0 + j / p.parts, part = j % p.parts;
                    const int c0 = part * p.part8;
                    src = s.w + (size_t)r * s.k + 8 * c0;
                    bytes = (min(s.k >> 3, c0 + p.part8) - c0) * 16;
                }
                mbar_wait(empty0 + 8 * slot, phase ^ 1, c.error);
                const uint32_t f = full0 + 8 * slot;
                const uint32_t dst = (uint32_t)__cvta_generic_to_shared(ring + (size_t)slot * slot_bytes);
                asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(f),
                             "r"(bytes)
                             : "memory");
                asm volatile(
                    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                    "l"(src), "r"(bytes), "r"(f)
                    : "memory");
                if (++slot == slots) {
                    slot = 0;
                    phase ^= 1;
                }
            }
        }
        return;
    }
    // The consumers: every warp waits for every chunk in turn and frees it (a slot is free once
    // all have, which keeps each warp within a ring's turn of the others: an mbarrier phase's
    // parity only tells the current phase from the one before); a chunk's rows are striped over
    // the warps ((row - the block's first row) % CW), and a row cut in pieces is one warp's.
    int gc = 0;  // the kernel's chunks before this step's
    for (int i = 0; i < c.count; i++) {
        const Step s = c.steps[i];
        const RingPlan p = ring_plan(s, blockIdx.x, gridDim.x, slot_bytes);
        const float* x = c.act[i & 1];
        float* y = c.act[(i + 1) & 1];
        if (threadIdx.x == 0) {
            if (i > 0 && sync) {
                unsigned v = 0;
                for (long long t = 0; *(volatile unsigned*)c.error == 0; t++) {
                    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
                                 : "=r"(v)
                                 : "l"(counters + i - 1)
                                 : "memory");
                    if (v >= gridDim.x) break;
                    if (t > RING_SPIN_LIMIT) atomicExch(c.error, 1u);
                }
            }
            if (stage && cs > 1) {
                // Every block of the cluster is past step i - 1 (the counter), so no block still
                // reads the input this overwrites. The bulk copy reads what generic stores of
                // other SMs wrote: the proxy fence orders it after the acquire.
                asm volatile("fence.proxy.async.global;" ::: "memory");
                const uint32_t bytes = s.k * 4, share = bytes / cs;
                asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(xbar0),
                             "r"(bytes)
                             : "memory");
                const uint32_t dst = (uint32_t)__cvta_generic_to_shared(xs) + rank * share;
                const char* src = reinterpret_cast<const char*>(x) + rank * share;
                const uint16_t mask = (uint16_t)((1u << cs) - 1);
                asm volatile(
                    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;" ::"r"(dst),
                    "l"(src), "r"(share), "r"(xbar0), "h"(mask)
                    : "memory");
            }
        }
        if (i > 0 && sync) asm volatile("bar.sync 1, %0;" ::"n"(CW * 32) : "memory");
        if (stage && cs > 1) {
            mbar_wait(xbar0, xphase, c.error);
            xphase ^= 1;
        } else if (stage) {
            const float4* x4 = reinterpret_cast<const float4*>(x);
            float4* xs4 = reinterpret_cast<float4*>(xs);
#pragma unroll 4
            for (int t = threadIdx.x; t < (s.k >> 2); t += CW * 32) xs4[t] = __ldcg(x4 + t);
        }
        asm volatile("bar.sync 1, %0;" ::"n"(CW * 32) : "memory");
        if (fold_norm && s.normed && stage) {
            float4* xs4 = reinterpret_cast<float4*>(xs);
            const float4* g4 = reinterpret_cast<const float4*>(c.gamma);
            float ss = 0.f;
            for (int t = threadIdx.x; t < (s.k >> 2); t += CW * 32) {
                const float4 v = xs4[t];
                ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
            }
            ss = warp_sum_rn(ss);
            if (lane == 0) norm_part[warp] = ss;
            asm volatile("bar.sync 1, %0;" ::"n"(CW * 32) : "memory");
            float total = 0.f;
#pragma unroll
            for (int w = 0; w < CW; w++) total += norm_part[w];
            const float inv = 1.f / sqrtf(total / s.k + 1e-6f);
            for (int t = threadIdx.x; t < (s.k >> 2); t += CW * 32) {
                const float4 v = xs4[t], g = g4[t];
                xs4[t] = make_float4(v.x * inv * g.x, v.y * inv * g.y, v.z * inv * g.z,
                                     v.w * inv * g.w);
            }
            asm volatile("bar.sync 1, %0;" ::"n"(CW * 32) : "memory");
        }
        const int k8n = s.k >> 3;
        float acc = 0.f;  // the warp's row in pieces (parts > 1) carries over chunks
        for (int j = 0; j < p.chunks; j++) {
            const int g = gc + j, slot = g % slots;
            mbar_wait(full0 + 8 * slot, (g / slots) & 1, c.error);
            const uint4* chunk = reinterpret_cast<const uint4*>(ring + (size_t)slot * slot_bytes);
            if (!dots) {
            } else if (p.parts == 1) {
                const int first = p.r0 + j * p.rows_per, last = min(p.r1, first + p.rows_per);
                for (int r = first + (warp - (first - p.r0) % CW + CW) % CW; r < last; r += CW) {
                    const uint4* row = chunk + (size_t)(r - first) * k8n;
                    float a = 0.f;
#pragma unroll 4
                    for (int q = lane; q < k8n; q += 32) a = __fadd_rn(a, dot8(row[q], xs + 8 * q));
                    a = warp_sum_rn(a);
                    if (lane == 0) y[r] = a;
                }
            } else {
                const int r = p.r0 + j / p.parts, part = j % p.parts;
                if ((r - p.r0) % CW == warp) {
                    const int c0 = part * p.part8, c1 = min(k8n, c0 + p.part8);
                    // This lane's first unit of the piece: the next q = lane (mod 32) from c0.
#pragma unroll 4
                    for (int q = c0 + ((lane - c0) % 32 + 32) % 32; q < c1; q += 32)
                        acc = __fadd_rn(acc, dot8(chunk[q - c0], xs + 8 * q));
                    if (part == p.parts - 1) {
                        const float a = warp_sum_rn(acc);
                        if (lane == 0) y[r] = a;
                        acc = 0.f;
                    }
                }
            }
            __syncwarp();
            if (lane == 0)
                asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(empty0 + 8 * slot)
                             : "memory");
        }
        gc += p.chunks;
        // The block's rows are written: count it in for step i (a release at GPU scope, which
        // covers the other warps' writes ordered before it by the barrier).
        asm volatile("bar.sync 1, %0;" ::"n"(CW * 32) : "memory");
        if (threadIdx.x == 0)
            asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(counters + i) : "memory");
    }
}

// Every weight read once (xor of the words), the streaming ceiling of the read path.
__global__ void read_kernel(const uint4* p, size_t n16, unsigned* sink) {
    uint32_t a = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16;
         i += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = ldg_stream(p + i);
        a ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (a == 0x12345678u) atomicAdd(sink, 1u);
}

__global__ void fill_kernel(uint16_t* p, size_t n, uint32_t seed, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        const float f = ((h & 0xffff) / 65535.f - 0.5f) * scale;
        p[i] = __bfloat16_as_ushort(__float2bfloat16(f));
    }
}

struct Model {
    const char* name;
    std::vector<Step> steps;  // host copy
    size_t bytes = 0;
    size_t max_k = 0;
};

// A step's matrix (n rows of k) and whether its input is RMS-normed first (a norm folded in).
struct Shape {
    int n, k;
    bool normed = false;
};

static Model build(const char* name, int layers, const std::vector<Shape>& layer, Shape head,
                   __nv_bfloat16** base) {
    Model m;
    m.name = name;
    std::vector<Shape> shapes;
    for (int l = 0; l < layers; l++)
        for (auto s : layer) shapes.push_back(s);
    shapes.push_back(head);
    size_t elems = 0;
    for (auto s : shapes) elems += (size_t)s.n * s.k;
    CK(cudaMalloc(base, elems * 2));
    fill_kernel<<<1024, 256>>>(reinterpret_cast<uint16_t*>(*base), elems, 7u, 0.06f);
    CK(cudaGetLastError());
    size_t off = 0;
    for (auto s : shapes) {
        m.steps.push_back(Step{*base + off, s.n, s.k, s.normed});
        off += (size_t)s.n * s.k;
        if ((size_t)s.k > m.max_k) m.max_k = s.k;
    }
    m.bytes = elems * 2;
    return m;
}

static float g_copy_tbs = 0.f;
static size_t prop_smem_per_sm = 0;  // shared memory an SM has
static size_t prop_smem_optin = 0;   // the most one block may have

static void report(const Model& m, const char* variant, float ms) {
    const double tbs = m.bytes / (ms * 1e-3) / 1e12;
    printf("%-10s %-34s %8.3f ms/token %7.1f tok/s %5.2f TB/s %5.1f%% of copy\n", m.name, variant,
           ms, 1000.0 / ms, tbs, 100.0 * tbs / g_copy_tbs);
}

template <class F>
static float time_ms(cudaStream_t st, int reps, F f) {
    for (int i = 0; i < 3; i++) f();
    CK(cudaStreamSynchronize(st));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaEventRecord(a, st));
    for (int i = 0; i < reps; i++) f();
    CK(cudaEventRecord(b, st));
    CK(cudaEventSynchronize(b));
    float ms = 0.f;
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms / reps;
}

static void run_model(const Model& m, int sms, cudaStream_t st) {
    const int count = (int)m.steps.size();
    const size_t smem = m.max_k * sizeof(float);
    CK(cudaFuncSetAttribute(step_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)(prop_smem_per_sm / 2)));
    CK(cudaFuncSetAttribute(persistent_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)smem));
    Step* dsteps;
    CK(cudaMalloc(&dsteps, count * sizeof(Step)));
    CK(cudaMemcpy(dsteps, m.steps.data(), count * sizeof(Step), cudaMemcpyHostToDevice));
    Chain c{dsteps, count, {nullptr, nullptr}, nullptr, nullptr, nullptr};
    float* gamma;
    CK(cudaMalloc(&gamma, ACT * sizeof(float)));
    fill_kernel<<<64, 256>>>(reinterpret_cast<uint16_t*>(gamma), ACT * 2, 5u, 1.f);
    CK(cudaGetLastError());
    c.gamma = gamma;
    CK(cudaMalloc(&c.act[0], ACT * sizeof(float)));
    CK(cudaMalloc(&c.act[1], ACT * sizeof(float)));
    CK(cudaMalloc(&c.counter, sizeof(unsigned)));
    CK(cudaMalloc(&c.error, sizeof(unsigned)));
    CK(cudaMemset(c.error, 0, sizeof(unsigned)));
    float* init;
    CK(cudaMalloc(&init, ACT * sizeof(float)));
    fill_kernel<<<64, 256>>>(reinterpret_cast<uint16_t*>(init), ACT * 2, 99u, 1.f);
    CK(cudaGetLastError());
    const int final_buf = count & 1;
    const int final_n = m.steps.back().n;
    std::vector<float> ref(final_n), out(final_n);
    auto reset = [&] {
        CK(cudaMemcpyAsync(c.act[0], init, ACT * sizeof(float), cudaMemcpyDeviceToDevice, st));
        CK(cudaMemcpyAsync(c.act[1], init, ACT * sizeof(float), cudaMemcpyDeviceToDevice, st));
    };
    auto check = [&](const char* variant, bool first) {
        CK(cudaStreamSynchronize(st));
        CK(cudaMemcpy(first ? ref.data() : out.data(), c.act[final_buf], final_n * sizeof(float),
                      cudaMemcpyDeviceToHost));
        if (!first && memcmp(ref.data(), out.data(), final_n * sizeof(float)) != 0)
            printf("%-10s %-34s OUTPUT DIFFERS from the plain graph\n", m.name, variant);
    };

    // Graph of one kernel a step.
    int occ_step = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ_step, step_kernel, THREADS, smem));
    const char* graph_names[5] = {"graph, a kernel a step", "graph + PDL",
                                  "graph + PDL, loads before wait", "graph + PDL, 1/SM",
                                  "graph + PDL, 1/SM, staged in smem"};
    // Modes 3 and 4: one block an SM holding under half of its shared memory, the weight
    // chunks a warp stages filling the rest of that half.
    const size_t half = prop_smem_per_sm / 2 - 2048;
    const int staged = (int)((half - smem) / 16 / WARPS);
    const size_t smem_staged = smem + (size_t)staged * 16 * WARPS;
    printf("%-10s 1/SM variants: %d weight chunks (%d KB) staged a warp, %zu KB of shared memory a block\n",
           m.name, staged, staged * 16 / 1024, smem_staged / 1024);
    for (int mode = 0; mode < 5; mode++) {
        if (mode >= 3 && staged <= 0) continue;
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        for (int i = 0; i < count; i++) {
            const Step s = m.steps[i];
            const int per_sm = mode >= 3 ? 1 : occ_step;
            const int blocks = std::min((s.n + WARPS - 1) / WARPS, sms * per_sm);
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = dim3(blocks);
            cfg.blockDim = dim3(THREADS);
            cfg.dynamicSmemBytes = mode >= 3 ? smem_staged : smem;
            cfg.stream = st;
            cudaLaunchAttribute attr[1];
            attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            attr[0].val.programmaticStreamSerializationAllowed = 1;
            cfg.attrs = attr;
            cfg.numAttrs = (mode >= 1 && i > 0) ? 1 : 0;
            CK(cudaLaunchKernelEx(&cfg, step_kernel, s, (const float*)c.act[i & 1],
                                  c.act[(i + 1) & 1], mode, (int)m.max_k, staged));
        }
        CK(cudaStreamEndCapture(st, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        reset();
        CK(cudaGraphLaunch(ge, st));
        check(graph_names[mode], mode == 0);
        report(m, graph_names[mode], time_ms(st, 20, [&] { CK(cudaGraphLaunch(ge, st)); }));
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(g));
    }

    // One persistent cooperative kernel.
    int occ = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, persistent_kernel, THREADS, smem));
    const char* pnames[4] = {"persistent, cg grid sync", "persistent, counter barrier",
                             "persistent, loads before barrier", "persistent, no barrier (races)"};
    for (int per_sm : {1, 2, occ}) {
        if (per_sm > occ) continue;
        for (int mode = 0; mode < 4; mode++) {
            auto launch = [&] {
                CK(cudaMemsetAsync(c.counter, 0, sizeof(unsigned), st));
                cudaLaunchConfig_t cfg = {};
                cfg.gridDim = dim3(sms * per_sm);
                cfg.blockDim = dim3(THREADS);
                cfg.dynamicSmemBytes = smem;
                cfg.stream = st;
                cudaLaunchAttribute attr[1];
                attr[0].id = cudaLaunchAttributeCooperative;
                attr[0].val.cooperative = 1;
                cfg.attrs = attr;
                cfg.numAttrs = 1;
                CK(cudaLaunchKernelEx(&cfg, persistent_kernel, c, mode));
            };
            char name[96];
            snprintf(name, sizeof name, "%s, %d/SM", pnames[mode], per_sm);
            reset();
            launch();
            if (mode < 3) check(name, false);
            report(m, name, time_ms(st, 20, launch));
        }
    }
    // The weight ring (one block an SM, cooperative so that all blocks are resident), with slots
    // of 8 and 16 KB filling the shared memory the staged input leaves.
    unsigned* counters;
    CK(cudaMalloc(&counters, count * sizeof(unsigned)));
    const size_t ring_avail = prop_smem_optin - smem - 2 * RING_MAX_SLOTS * 8 - 1024;
    for (auto f : {ring_kernel<8>, ring_kernel<16>})
        CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)(prop_smem_optin - 2 * RING_MAX_SLOTS * 8 - 1024)));
    struct RingRun {
        int cw, slot_kb, cluster, flags;
    };
    const RingRun ring_runs[] = {{8, 16, 1, 0},  {8, 16, 2, 0},  {16, 16, 1, 0}, {16, 16, 2, 0},
                                 {8, 16, 1, RING_FOLD_NORM},  {8, 16, 2, RING_FOLD_NORM},
                                 {16, 16, 1, RING_FOLD_NORM}, {16, 16, 2, RING_FOLD_NORM},
                                 {16, 16, 1, RING_NO_WAIT}, {16, 16, 1, RING_NO_WAIT | RING_NO_STAGE},
                                 {16, 16, 1, RING_NO_WAIT | RING_NO_STAGE | RING_NO_DOT}};
    for (const RingRun v : ring_runs) {
        const int slot_kb = v.slot_kb, flags = v.flags, slot_bytes = slot_kb * 1024;
        const int slots = std::min<int>(RING_MAX_SLOTS, (int)(ring_avail / slot_bytes));
        auto kernel = v.cw == 8 ? ring_kernel<8> : ring_kernel<16>;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(sms);
        cfg.blockDim = dim3((v.cw + 1) * 32);
        cfg.dynamicSmemBytes = smem + (size_t)slots * slot_bytes;
        cfg.stream = st;
        cudaLaunchAttribute attr[1];
        if (v.cluster == 1) {
            // Cooperative, so that all blocks are resident.
            attr[0].id = cudaLaunchAttributeCooperative;
            attr[0].val.cooperative = 1;
        } else {
            // Clusters cannot launch cooperatively: as many clusters as fit at once, nothing else
            // runs (a block that never became resident would make the others give up spinning).
            attr[0].id = cudaLaunchAttributeClusterDimension;
            attr[0].val.clusterDim.x = v.cluster;
            attr[0].val.clusterDim.y = 1;
            attr[0].val.clusterDim.z = 1;
        }
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        if (v.cluster > 1) {
            int clusters = 0;
            cfg.gridDim = dim3(v.cluster * (sms / v.cluster));
            CK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg));
            if (clusters == 0) continue;
            cfg.gridDim = dim3(v.cluster * std::min(clusters, sms / v.cluster));
        }
        auto launch = [&] {
            CK(cudaMemsetAsync(counters, 0, count * sizeof(unsigned), st));
            CK(cudaLaunchKernelEx(&cfg, kernel, c, counters, slot_bytes, slots, (int)m.max_k,
                                  flags));
        };
        char name[96];
        const bool folds = flags & RING_FOLD_NORM;
        if (folds && std::none_of(m.steps.begin(), m.steps.end(), [](const Step& s) { return s.normed; }))
            continue;
        snprintf(name, sizeof name, "weight ring, %d warps, %d x %d KB%s%s%s%s%s", v.cw, slots,
                 slot_kb, v.cluster > 1 ? (v.cluster == 2 ? ", x multicast to 2" : ", x multicast to 4") : "",
                 folds ? ", norms folded" : "", flags & RING_NO_WAIT ? ", no waits" : "",
                 flags & RING_NO_STAGE ? ", no x" : "", flags & RING_NO_DOT ? ", no dots" : "");
        if (v.cluster > 1) printf("%-10s %s: %u blocks\n", m.name, name, cfg.gridDim.x);
        reset();
        launch();
        if (!flags) check(name, false);
        if (folds) {
            // The folded norms change the output: no check against the graphs, but the same bits
            // with and without the multicast (compared to the first folded run of this model
            // with as many consumer warps: the norm's sum of squares goes in their order).
            static std::vector<float> folded;
            static const char* folded_of = nullptr;
            static int folded_cw = 0;
            std::vector<float> got(final_n);
            CK(cudaStreamSynchronize(st));
            CK(cudaMemcpy(got.data(), c.act[final_buf], final_n * sizeof(float), cudaMemcpyDeviceToHost));
            if (folded_of != m.name || folded_cw != v.cw) {
                folded = got;
                folded_of = m.name;
                folded_cw = v.cw;
            } else if (memcmp(folded.data(), got.data(), final_n * sizeof(float)) != 0) {
                printf("%-10s %-34s OUTPUT DIFFERS from the first folded run\n", m.name, name);
            }
        }
        report(m, name, time_ms(st, 20, launch));
    }
    CK(cudaFree(counters));
    CK(cudaFree(gamma));

    unsigned err = 0;
    CK(cudaMemcpy(&err, c.error, sizeof err, cudaMemcpyDeviceToHost));
    if (err) printf("%-10s a grid barrier gave up spinning: timings above are void\n", m.name);
    printf("%-10s %d steps, %.2f GB of weights, blocks/SM: step kernel %d, persistent %d\n",
           m.name, count, m.bytes / 1e9, occ_step, occ);

    // Streaming every weight once.
    unsigned* sink;
    CK(cudaMalloc(&sink, sizeof(unsigned)));
    const uint4* base = reinterpret_cast<const uint4*>(m.steps[0].w);
    report(m, "one kernel reading every weight", time_ms(st, 20, [&] {
               read_kernel<<<sms * 8, 256, 0, st>>>(base, m.bytes / 16, sink);
           }));
    CK(cudaFree(sink));
    CK(cudaFree(dsteps));
    CK(cudaFree(c.act[0]));
    CK(cudaFree(c.act[1]));
    CK(cudaFree(c.counter));
    CK(cudaFree(c.error));
    CK(cudaFree(init));
}

int main() {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const int sms = prop.multiProcessorCount;
    prop_smem_per_sm = prop.sharedMemPerMultiprocessor;
    prop_smem_optin = prop.sharedMemPerBlockOptin;
    printf("%s, %d SMs, L2 %d MB, %zu KB of shared memory an SM\n", prop.name, sms,
           prop.l2CacheSize >> 20, prop_smem_per_sm / 1024);
    setvbuf(stdout, nullptr, _IOLBF, 0);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

    // The reference rate: bytes moved by a 2 GiB device-to-device copy (read and written each
    // count once, as the engine's roofline quotes it).
    const size_t cb = 2ull << 30;
    void *a, *b;
    CK(cudaMalloc(&a, cb));
    CK(cudaMalloc(&b, cb));
    CK(cudaMemset(a, 1, cb));
    const float cms = time_ms(st, 10, [&] { CK(cudaMemcpyAsync(b, a, cb, cudaMemcpyDeviceToDevice, st)); });
    g_copy_tbs = (float)(2.0 * cb / (cms * 1e-3) / 1e12);
    printf("copy: %.3f ms for 2 GiB, %.2f TB/s (read + write)\n", cms, g_copy_tbs);
    CK(cudaFree(a));
    CK(cudaFree(b));

    // Builds a model's chain (random weights), runs every variant on it, frees it.
    auto run_chain = [&](const char* name, int layers, const std::vector<Shape>& layer, Shape head) {
        __nv_bfloat16* base;
        Model m = build(name, layers, layer, head, &base);
        CK(cudaDeviceSynchronize());
        run_model(m, sms, st);
        CK(cudaFree(base));
    };
    // GLM-4.7-Flash at batch 1 (n, k of each dependent step): the norm; q_a + kv_a; q_b; the
    // absorbed query (20 heads x 512 x 192); MLA over a short context (tiny); W_UV (20 x 256 x
    // 512); o_proj; the norm; the router; 5 experts' gate/up; their down.
    run_chain("glm47", 47,
              {{32, 2048}, {1344, 2048}, {5120, 768}, {10240, 192}, {64, 512}, {5120, 512},
               {2048, 5120}, {32, 2048}, {64, 2048}, {15360, 2048}, {10240, 1536}},
              {154880, 2048});
    // The same without the norms' steps: where each step's blocks compute the RMS norm of the
    // input they stage themselves (as a persistent kernel that stages x anyway could), a layer
    // has two dependent steps fewer; `normed` marks the steps whose input the norms fed.
    run_chain("glm-nonorm", 47,
              {{1344, 2048, true}, {5120, 768}, {10240, 192}, {64, 512}, {5120, 512}, {2048, 5120},
               {64, 2048, true}, {15360, 2048, true}, {10240, 1536}},
              {154880, 2048, true});
    run_chain("qwen-nonorm", 36,
              {{6144, 4096, true}, {64, 512}, {4096, 4096}, {24576, 4096, true}, {4096, 12288}},
              {151936, 4096, true});
    // Qwen3-8B with the steps of the engine's decode: the norm; QKV; q/k norm + RoPE + the cache
    // write (tiny); attention over 512 cached tokens (the K and V rows it reads: 2 MB); the split
    // merge (tiny); o_proj; the norm; gate/up; down. Then the same with the norms folded.
    run_chain("qwen-engine", 36,
              {{32, 4096}, {6144, 4096}, {64, 128}, {2048, 512}, {64, 512}, {4096, 4096},
               {32, 4096}, {24576, 4096}, {4096, 12288}},
              {151936, 4096});
    run_chain("qwen-steps", 36,
              {{6144, 4096, true}, {64, 128}, {2048, 512}, {64, 512}, {4096, 4096},
               {24576, 4096, true}, {4096, 12288}},
              {151936, 4096, true});
    // Qwen3-8B at batch 1: the norm; QKV; attention (tiny); o_proj; the norm; gate/up; down.
    run_chain("qwen3-8b", 36,
              {{32, 4096}, {6144, 4096}, {64, 512}, {4096, 4096}, {32, 4096}, {24576, 4096},
               {4096, 12288}},
              {151936, 4096});
    return 0;
}
