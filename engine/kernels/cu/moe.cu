// Mixture-of-experts on the device, with no host round trip (so decode graphs can hold it):
// routing (softmax top-k, or sigmoid scores + selection bias with grouped top-k, as
// hearth_backend::route), then each (row, chosen expert) pair's SwiGLU as warp-per-feature
// dot products straight from the experts' back-to-back bf16 weights, then the weighted sum of a
// row's experts in expert order plus the shared expert. A row's arithmetic never depends on
// the other rows, so results are batch-invariant.
#include "common.cuh"

#define MOE_MAX_EXPERTS 512
#define MOE_MAX_TOPK 32
#define MOE_MAX_GROUPS 64
#define MOE_WARPS 8
#define MOE_LOADS 4  // 16-byte weight loads in flight per lane (per matrix)
#define MOE_DOWN_LOADS 8  // in moe_down, whose warps each take one expert's dot product
#define MOE_ROUTE_WARPS 4  // moe_route_gemv's block: a logit a warp

// x row element i of an activation buffer that is f32 or bf16.
__device__ __forceinline__ float act_at(const void* x, int x_bf16, size_t i) {
    return x_bf16 ? __bfloat162float(reinterpret_cast<const bf16*>(x)[i])
                  : reinterpret_cast<const float*>(x)[i];
}

// x[i .. i + 8] of an f32 or bf16 activation buffer, i a multiple of 8 (16-byte aligned rows).
__device__ __forceinline__ void act8(const void* x, int x_bf16, size_t i, float (&v)[8]) {
    if (x_bf16) {
        bf16x8_to_f32(*reinterpret_cast<const uint4*>(reinterpret_cast<const bf16*>(x) + i), v);
    } else {
        const float4 a = *reinterpret_cast<const float4*>(reinterpret_cast<const float*>(x) + i);
        const float4 b = *reinterpret_cast<const float4*>(reinterpret_cast<const float*>(x) + i + 4);
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z,
        v[7] = b.w;
    }
}

// A lane's round of MOE_DOWN_LOADS 16-byte loads of row w from i0 on (zeros past n).
__device__ __forceinline__ void weight_round(uint4 (&wv)[MOE_DOWN_LOADS], const bf16* w, int i0,
                                             int n) {
#pragma unroll
    for (int c = 0; c < MOE_DOWN_LOADS; c++) {
        const int i = i0 + 32 * 8 * c;
        wv[c] = i < n ? ldg_stream(w + i) : uint4{};
    }
}

// A lane's round of MOE_LOADS 16-byte loads of a gate row and of an up row from i0 on.
__device__ __forceinline__ void gate_up_round(uint4 (&gv)[MOE_LOADS], uint4 (&uv)[MOE_LOADS],
                                              const bf16* g, const bf16* u, int i0, int n) {
#pragma unroll
    for (int c = 0; c < MOE_LOADS; c++) {
        const int i = i0 + 32 * 8 * c;
        gv[c] = i < n ? ldg_stream(g + i) : uint4{};
        uv[c] = i < n ? ldg_stream(u + i) : uint4{};
    }
}

// A warp's dot product of the bf16 row w[0 .. n) with x[off .. off + n) (f32, or bf16 with
// x_bf16): MOE_DOWN_LOADS 16-byte weight loads in flight per lane when n % 8 == 0. With `wait`
// the caller has not waited for the kernel before yet: the first round of weight loads goes
// out before pdl_begin (the weights never depend on that kernel), the same sums after it.
__device__ __forceinline__ float warp_row_dot(const bf16* __restrict__ w, const void* x,
                                              int x_bf16, size_t off, int n, bool wait = false) {
    const int lane = threadIdx.x & 31;
    float s = 0.f;
    if ((n & 7) == 0) {
        const int first = lane * 8;
        uint4 wv[MOE_DOWN_LOADS];
        weight_round(wv, w, first, n);
        if (wait) pdl_begin();
        for (int i0 = first; i0 < n; i0 += 32 * 8 * MOE_DOWN_LOADS) {
            if (i0 != first) weight_round(wv, w, i0, n);
#pragma unroll
            for (int c = 0; c < MOE_DOWN_LOADS; c++) {
                const int i = i0 + 32 * 8 * c;
                if (i >= n) break;
                float wf[8], xv[8];
                bf16x8_to_f32(wv[c], wf);
                act8(x, x_bf16, off + i, xv);
#pragma unroll
                for (int t = 0; t < 8; t++) s += xv[t] * wf[t];
            }
        }
    } else {
        if (wait) pdl_begin();
        for (int i = lane; i < n; i += 32) s += act_at(x, x_bf16, off + i) * __bfloat162float(w[i]);
    }
    return warp_sum(s);
}

// Is (va, ia) ahead of (vb, ib): larger value, then lower index.
__device__ __forceinline__ bool ahead(float va, int ia, float vb, int ib) {
    return va > vb || (va == vb && ia < ib);
}

// One warp routes a row from its logits l: ids[row * top_k + j] ascending, weights alongside.
__device__ __forceinline__ void route_row(const float* l, const float* __restrict__ bias,
                                          int* __restrict__ ids, float* __restrict__ weights,
                                          int row, int n_experts, int top_k, int sigmoid, int norm,
                                          int n_group, int topk_group, float scale) {
    __shared__ float score[MOE_MAX_EXPERTS];
    __shared__ float choice[MOE_MAX_EXPERTS];
    __shared__ int open_group[MOE_MAX_GROUPS];
    __shared__ int picked[MOE_MAX_TOPK];
    const int lane = threadIdx.x & 31;
    if (sigmoid) {
        for (int e = lane; e < n_experts; e += 32) {
            const float s = 1.f / (1.f + expf(-l[e]));
            score[e] = s;
            choice[e] = s + (bias ? bias[e] : 0.f);
        }
    } else {
        float m = -INFINITY;
        for (int e = lane; e < n_experts; e += 32) m = fmaxf(m, l[e]);
        m = warp_max(m);
        float sum = 0.f;
        for (int e = lane; e < n_experts; e += 32) sum += expf(l[e] - m);
        sum = warp_sum(sum);
        for (int e = lane; e < n_experts; e += 32) {
            score[e] = expf(l[e] - m) / sum;
            choice[e] = score[e];
        }
    }
    __syncwarp();
    const int per_group = n_experts / n_group;
    if (n_group <= 1) {
        if (lane == 0) open_group[0] = 1;
    } else if (lane == 0) {
        float gs[MOE_MAX_GROUPS];
        for (int g = 0; g < n_group; g++) {
            float b1 = -INFINITY, b2 = -INFINITY;
            for (int e = g * per_group; e < (g + 1) * per_group; e++) {
                const float v = choice[e];
                if (v > b1) {
                    b2 = b1;
                    b1 = v;
                } else if (v > b2) {
                    b2 = v;
                }
            }
            gs[g] = per_group > 1 ? b1 + b2 : b1;
            open_group[g] = 0;
        }
        for (int t = 0; t < topk_group && t < n_group; t++) {
            int best = -1;
            for (int g = 0; g < n_group; g++)
                if (!open_group[g] && (best < 0 || gs[g] > gs[best])) best = g;
            open_group[best] = 1;
        }
    }
    __syncwarp();
    // Expert e is chosen when fewer than top_k open experts are ahead of it (the order of
    // `ahead`); a closed group's experts (NaN in `choice`) are never ahead nor chosen. Each lane
    // ranks its experts against all of them, so the choice takes no rounds of reductions; the
    // chosen land in picked[] in ascending id order.
    for (int e = lane; e < n_experts; e += 32) {
        const float v = choice[e];
        choice[e] = !open_group[e / per_group] ? NAN : isnan(v) ? -INFINITY : v;
    }
    __syncwarp();
    int below = 0;  // chosen experts of lower ids than this round's
    for (int e0 = 0; e0 < n_experts; e0 += 32) {
        const int e = e0 + lane;
        const float v = e < n_experts ? choice[e] : NAN;
        int rank = 0;
        if (!isnan(v)) {
#pragma unroll 8
            for (int f = 0; f < n_experts; f++) rank += ahead(choice[f], f, v, e);
        }
        const bool chosen = !isnan(v) && rank < top_k;
        const unsigned ballot = __ballot_sync(0xffffffffu, chosen);
        if (chosen) picked[below + __popc(ballot & ((1u << lane) - 1))] = e;
        below += __popc(ballot);
    }
    __syncwarp();
    // The weights: every lane sums the chosen scores in id order, lane j writes choice j.
    float sum = 0.f;
    for (int j = 0; j < top_k; j++) sum += score[picked[j]];
    const float denom = norm ? (sigmoid ? sum + 1e-20f : sum) : 1.f;
    if (lane < top_k) {
        ids[row * top_k + lane] = picked[lane];
        weights[row * top_k + lane] = score[picked[lane]] / denom * scale;
    }
}


// One warp per row over the router's logits ([rows, n_experts] f32).
extern "C" __global__ void moe_route(const float* __restrict__ logits,
                                     const float* __restrict__ bias, int* __restrict__ ids,
                                     float* __restrict__ weights, int n_experts, int top_k,
                                     int sigmoid, int norm, int n_group, int topk_group,
                                     float scale) {
    pdl_begin();
    const int row = blockIdx.x;
    route_row(logits + (size_t)row * n_experts, bias, ids, weights, row, n_experts, top_k, sigmoid,
              norm, n_group, topk_group, scale);
}

// The router's logits and the routing in one launch, for decode rows: grid (rows, ceil(n_experts
// / MOE_ROUTE_WARPS)), warp w of block b computing logit b * MOE_ROUTE_WARPS + w of its row (x
// the row of an f32 or bf16 activation buffer, router [n_experts, hidden] bf16) into `logits`
// ([rows, n_experts] f32), so the router is read by as many SMs as it has warps' worth of rows.
// The row's last block to arrive (counted in arrivals[row], zero between launches: that block
// resets it) routes the row with its warp 0.
extern "C" __global__ void __launch_bounds__(MOE_ROUTE_WARPS * 32)
    moe_route_gemv(const void* __restrict__ x, int x_bf16, const bf16* __restrict__ router,
                   const float* __restrict__ bias, float* __restrict__ logits,
                   unsigned* __restrict__ arrivals, int* __restrict__ ids,
                   float* __restrict__ weights, int hidden, int n_experts, int top_k, int sigmoid,
                   int norm, int n_group, int topk_group, float scale) {
    __shared__ float row_logits[MOE_MAX_EXPERTS];
    __shared__ bool last;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int row = blockIdx.x;
    float* l = logits + (size_t)row * n_experts;
    const int e = blockIdx.y * MOE_ROUTE_WARPS + warp;
    if (e < n_experts) {
        // The router row's loads go out before the wait.
        const float dot = warp_row_dot(router + (size_t)e * hidden, x, x_bf16,
                                       (size_t)row * hidden, hidden, true);
        if (lane == 0) {
            l[e] = dot;
            __threadfence();  // the logit is visible before this block is counted
        }
    } else {
        pdl_begin();
    }
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(arrivals + row, 1u) == gridDim.y - 1;
    __syncthreads();
    if (!last || warp != 0) return;
    if (lane == 0) arrivals[row] = 0;
    __threadfence();
    // From L2: the other blocks' logits never passed through this SM's L1.
    for (int i = lane; i < n_experts; i += 32) row_logits[i] = __ldcg(l + i);
    __syncwarp();
    route_row(row_logits, bias, ids, weights, row, n_experts, top_k, sigmoid, norm, n_group,
              topk_group, scale);
}

// act[p, f] = silu(x[p / top_k] . gate_e[f]) * (x[p / top_k] . up_e[f]) for each (row, choice)
// pair p < routed (= rows * top_k), e = ids[p]; gate_up holds each expert's gate rows then up
// rows ([E, 2 * inter, hidden], bf16). With a shared expert of the same width folded in
// (shared_gate non-null), pairs routed + row take its gate and up rows ([inter, hidden] each).
// Grid (routed (+ rows), ceil(inter / MOE_WARPS)), MOE_WARPS warps: a warp per feature; pairs
// vary fastest, so pairs sharing an expert read its feature tile from L2 together. Only the
// routed pairs' weights depend on the kernel before (the routing): the shared expert's warps
// issue their first round of loads before they wait.
extern "C" __global__ void moe_gate_up(const void* __restrict__ x, int x_bf16,
                                       const int* __restrict__ ids, const bf16* __restrict__ gate_up,
                                       const bf16* __restrict__ shared_gate,
                                       const bf16* __restrict__ shared_up, float* __restrict__ act,
                                       int hidden, int inter, int top_k, int routed) {
    const bool routed_pair = (int)blockIdx.x < routed;
    if (routed_pair || (hidden & 7) != 0) pdl_begin();
    const int lane = threadIdx.x & 31;
    const int f = blockIdx.y * MOE_WARPS + (threadIdx.x >> 5);
    const int pair = blockIdx.x;
    size_t row;
    const bf16 *g, *u;
    if (routed_pair) {
        if (f >= inter) return;
        row = pair / top_k;
        g = gate_up + ((size_t)ids[pair] * 2 * inter + f) * hidden;
        u = g + (size_t)inter * hidden;
    } else {
        row = pair - routed;
        const int fr = min(f, inter - 1);  // a warp past inter loads a real row and drops it
        g = shared_gate + (size_t)fr * hidden;
        u = shared_up + (size_t)fr * hidden;
    }
    float sg = 0.f, su = 0.f;
    if ((hidden & 7) == 0) {
        // 16-byte weight loads, MOE_LOADS of gate and of up in flight per lane, 8 values each.
        const int first = lane * 8;
        uint4 gv[MOE_LOADS], uv[MOE_LOADS];
        if (!routed_pair) {
            gate_up_round(gv, uv, g, u, first, hidden);
            pdl_begin();
            if (f >= inter) return;
        }
        for (int i0 = first; i0 < hidden; i0 += 32 * 8 * MOE_LOADS) {
            if (routed_pair || i0 != first) gate_up_round(gv, uv, g, u, i0, hidden);
#pragma unroll
            for (int c = 0; c < MOE_LOADS; c++) {
                const int i = i0 + 32 * 8 * c;
                if (i >= hidden) break;
                float gf[8], uf[8], xv[8];
                bf16x8_to_f32(gv[c], gf);
                bf16x8_to_f32(uv[c], uf);
                act8(x, x_bf16, row * hidden + i, xv);
#pragma unroll
                for (int t = 0; t < 8; t++) {
                    sg += xv[t] * gf[t];
                    su += xv[t] * uf[t];
                }
            }
        }
    } else {
        if (f >= inter) return;
        for (int i = lane; i < hidden; i += 32) {
            const float xv = act_at(x, x_bf16, row * hidden + i);
            sg += xv * __bfloat162float(g[i]);
            su += xv * __bfloat162float(u[i]);
        }
    }
    sg = warp_sum(sg);
    su = warp_sum(su);
    if (lane == 0) act[(size_t)pair * inter + f] = sg / (1.f + expf(-sg)) * su;
}

// out[row, h] = sum_j weights[row, j] * (act[row * top_k + j] . down_e[h]) (+ the shared
// expert), j ascending (= expert order). down is [E, hidden, inter] bf16. The shared expert is
// either folded in (shared_down non-null: its act row is routed + row, its weight 1) or its
// output is given (shared non-null). Grid (rows, ceil(hidden / F)), F * n warps, n = top_k (+ 1
// folded), F = max(1, MOE_WARPS / n) features per block: warp w takes the block's (feature,
// choice) dot product w, so all of a dot product's loads are in flight at once; then the block
// sums each feature's choices in expert order, the shared expert last (rows vary fastest, so
// rows sharing an expert read its rows from L2 together).
// The warps issue their first round of weight loads before they wait for moe_gate_up: the
// expert ids come from the routing, which ran before moe_gate_up, and moe_gate_up waits for its
// predecessor in every block before it lets this kernel launch, so the ids are complete when
// this kernel's blocks start (read from L2, past any stale L1 line).
extern "C" __global__ void moe_down(const float* __restrict__ act, const int* __restrict__ ids,
                                    const float* __restrict__ weights,
                                    const bf16* __restrict__ down, const float* __restrict__ shared,
                                    const bf16* __restrict__ shared_down, float* __restrict__ out,
                                    int hidden, int inter, int top_k, int routed) {
    __shared__ float dots[2 * MOE_MAX_TOPK];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n = top_k + (shared_down ? 1 : 0);
    const int F = max(1, MOE_WARPS / n);
    const int h0 = blockIdx.y * F;
    const size_t row = blockIdx.x;
    const int h = h0 + warp / n, choice = warp % n;
    float s = 0.f;
    if (h < hidden) {
        const size_t pair = choice < top_k ? row * top_k + choice : routed + row;
        const bf16* d = choice < top_k ? down + ((size_t)__ldcg(ids + pair) * hidden + h) * inter
                                       : shared_down + (size_t)h * inter;
        s = warp_row_dot(d, act, 0, pair * inter, inter, true);
    } else {
        pdl_begin();
    }
    if (lane == 0) dots[warp] = s;
    __syncthreads();
    const int f = threadIdx.x;
    if (f >= F || h0 + f >= hidden) return;
    const float* dot = dots + f * n;
    float total = 0.f;
    for (int j = 0; j < top_k; j++) total += weights[row * top_k + j] * dot[j];
    out[row * hidden + h0 + f] =
        total + (shared_down ? dot[top_k] : shared ? shared[row * hidden + h0 + f] : 0.f);
}

// The grouped (prefill) path's combine: out[row, h] = sum_j weights[row, j] * y[slot[row, j], h]
// (+ shared[row, h]), j ascending, where y holds the experts' outputs in expert-sorted order.
// Grid (rows, column blocks).
extern "C" __global__ void moe_combine(const float* __restrict__ y, const int* __restrict__ slot,
                                       const float* __restrict__ weights,
                                       const float* __restrict__ shared, float* __restrict__ out,
                                       int hidden, int top_k) {
    pdl_begin();
    const size_t row = blockIdx.x;
    for (int h = blockIdx.y * blockDim.x + threadIdx.x; h < hidden; h += gridDim.y * blockDim.x) {
        float total = 0.f;
        for (int j = 0; j < top_k; j++) {
            const size_t pair = row * top_k + j;
            total += weights[pair] * y[(size_t)slot[pair] * hidden + h];
        }
        out[row * hidden + h] = total + (shared ? shared[row * hidden + h] : 0.f);
    }
}
