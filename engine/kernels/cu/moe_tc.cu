// Decode-step experts on tensor cores, with no host round trip (decode graphs hold them):
// moe_sort groups the routed (row, expert) pairs by expert on the device; moe_gate_up_tc and
// moe_down_tc then run each chosen expert's matrices once over all of its pairs; moe_combine
// (moe.cu) sums each row's experts in expert order. moe.cu's moe_gate_up / moe_down instead read
// an expert's weights once per pair (from L2 after the first), which costs most of a decode
// step once a batch's rows share experts.
//
// The products are mma.sync m16n8k16 with an expert's weight rows (features) as M and its pairs
// as N, eight pairs a tile. K goes 32 values at a time: lane (g = lane / 4, q = lane % 4) loads
// 16 bytes (k0 + 8q .. k0 + 8q + 7) of weight rows g and g + 8 and of pair g's activations, and
// feeds the first half to one mma and the second half to another. Each mma's k slots then hold a
// permutation of k0 .. k0 + 31, the same one for A and B, so the dot products are unchanged.
// A block's MT_WARPS warps take every MT_WARPS-th 32-value chunk of K each, and the block adds
// the warps' sums in warp order. A pair's output depends only on its own activations, not on
// which pairs share its tile or how many there are, so results are batch-invariant.
#include "mma.cuh"

#define MT_WARPS 4
#define MT_NT 4  // n-tiles (of 8 pairs) per pass over an expert's weights
#define MT_UNROLL 2  // 32-value K chunks per warp in flight
#define MT_SORT_THREADS 512  // moe_sort's block: one thread per expert

// One block of MT_SORT_THREADS threads (n_experts <= MT_SORT_THREADS). slot[p] = sorted
// position of pair p, order[s] = the pair at sorted position s (pairs grouped by expert, experts
// ascending; within an expert in any order), experts[j] = (expert, first slot, pairs) of the
// j-th expert with pairs, *n_active = how many experts have pairs.
extern "C" __global__ void __launch_bounds__(MT_SORT_THREADS)
    moe_sort(const int* __restrict__ ids, int pairs, int n_experts, int* __restrict__ slot,
             int* __restrict__ order, int4* __restrict__ experts, int* __restrict__ n_active) {
    pdl_begin();
    __shared__ int count[MT_SORT_THREADS];
    __shared__ int warp_total[2][MT_SORT_THREADS / 32];
    const int e = threadIdx.x, lane = e & 31, warp = e >> 5;
    count[e] = 0;
    __syncthreads();
    for (int p = e; p < pairs; p += MT_SORT_THREADS) atomicAdd(&count[ids[p]], 1);
    __syncthreads();
    // Exclusive prefix sums of the counts (first slots) and of "has pairs" (active index).
    const int c = e < n_experts ? count[e] : 0;
    int run = c, act = c > 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int r = __shfl_up_sync(0xffffffffu, run, o), a = __shfl_up_sync(0xffffffffu, act, o);
        if (lane >= o) run += r, act += a;
    }
    if (lane == 31) warp_total[0][warp] = run, warp_total[1][warp] = act;
    __syncthreads();
    for (int w = 0; w < warp; w++) run += warp_total[0][w], act += warp_total[1][w];
    const int first = run - c;
    if (c > 0) experts[act - 1] = make_int4(e, first, c, 0);
    if (e == MT_SORT_THREADS - 1) *n_active = act;
    count[e] = first;  // now the next free slot of expert e
    __syncthreads();
    for (int p = e; p < pairs; p += MT_SORT_THREADS) {
        const int s = atomicAdd(&count[ids[p]], 1);
        slot[p] = s;
        order[s] = p;
    }
}

// 8 activations x[i .. i + 8] (f32 or bf16 buffer, i a multiple of 8) as packed bf16 pairs.
__device__ __forceinline__ uint4 mt_act8(const void* x, int x_bf16, size_t i) {
    if (x_bf16) return *reinterpret_cast<const uint4*>(reinterpret_cast<const bf16*>(x) + i);
    const float4 a = *reinterpret_cast<const float4*>(reinterpret_cast<const float*>(x) + i);
    const float4 b = *reinterpret_cast<const float4*>(reinterpret_cast<const float*>(x) + i + 4);
    return make_uint4(pack_bf16(a.x, a.y), pack_bf16(a.z, a.w), pack_bf16(b.x, b.y),
                      pack_bf16(b.z, b.w));
}

// acc[t][n] += A_t . B_n over this warp's chunks of K, for two 16-row weight tiles t (rows g and
// g + 8 of tile t at w[2t] and w[2t + 1], each K bf16; null: zero rows) and the n-tiles n with
// 8 n < live; pair g of n-tile n has its activations at x + xrow[n] (xrow[n] < 0: none).
__device__ __forceinline__ void mt_tiles(const bf16* const (&w)[4], const void* x, int x_bf16,
                                         const long long (&xrow)[MT_NT], int live, int K,
                                         float (&acc)[2][MT_NT][4]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, q = lane & 3;
    for (int c0 = warp * 32; c0 < K; c0 += MT_WARPS * 32 * MT_UNROLL) {
        uint4 wv[MT_UNROLL][4], xv[MT_UNROLL][MT_NT];
#pragma unroll
        for (int u = 0; u < MT_UNROLL; u++) {
            const int k = c0 + u * MT_WARPS * 32 + 8 * q;
            const bool in = k < K;
#pragma unroll
            for (int r = 0; r < 4; r++)
                wv[u][r] = in && w[r] ? __ldg(reinterpret_cast<const uint4*>(w[r] + k)) : uint4{};
#pragma unroll
            for (int n = 0; n < MT_NT; n++)
                xv[u][n] = in && 8 * n < live && xrow[n] >= 0 ? mt_act8(x, x_bf16, xrow[n] + k)
                                                              : uint4{};
        }
#pragma unroll
        for (int u = 0; u < MT_UNROLL; u++)
#pragma unroll
            for (int n = 0; n < MT_NT; n++) {
                if (8 * n >= live) break;
#pragma unroll
                for (int t = 0; t < 2; t++) {
                    const uint4 a = wv[u][2 * t], b = wv[u][2 * t + 1];
                    const uint32_t lo[4] = {a.x, b.x, a.y, b.y}, hi[4] = {a.z, b.z, a.w, b.w};
                    mma_bf16(acc[t][n], lo, xv[u][n].x, xv[u][n].y);
                    mma_bf16(acc[t][n], hi, xv[u][n].z, xv[u][n].w);
                }
            }
    }
}

// Warp 0's acc becomes the sum of every warp's, added in warp order; the other warps' acc is
// left as it was. Ends with the block synchronized (red may be reused).
__device__ __forceinline__ void mt_reduce(float (&acc)[2][MT_NT][4],
                                          float (*red)[2][MT_NT][4][32]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (warp > 0)
#pragma unroll
        for (int t = 0; t < 2; t++)
#pragma unroll
            for (int n = 0; n < MT_NT; n++)
#pragma unroll
                for (int i = 0; i < 4; i++) red[warp - 1][t][n][i][lane] = acc[t][n][i];
    __syncthreads();
    if (warp == 0)
        for (int w = 0; w < MT_WARPS - 1; w++)
#pragma unroll
            for (int t = 0; t < 2; t++)
#pragma unroll
                for (int n = 0; n < MT_NT; n++)
#pragma unroll
                    for (int i = 0; i < 4; i++) acc[t][n][i] += red[w][t][n][i][lane];
    __syncthreads();
}

// Activation row offsets (elements) of this lane's pair in each n-tile of the pass at pair r0
// of an expert: rows of x picked through order (x_rows: pair / top_k of x[rows, K]), or slots of
// a sorted buffer (x_rows false: [slots, K]); -1 past the expert's pairs.
__device__ __forceinline__ void mt_rows(long long (&xrow)[MT_NT], int4 ex, int r0,
                                        const int* __restrict__ order, bool x_rows, int top_k,
                                        int K) {
    const int g = (threadIdx.x & 31) >> 2;
#pragma unroll
    for (int n = 0; n < MT_NT; n++) {
        const int r = r0 + 8 * n + g;
        const int s = ex.y + r;
        xrow[n] = r >= ex.z ? -1 : (long long)(x_rows ? order[s] / top_k : s) * K;
    }
}

// act[s, f] = silu(x[row] . gate_e[f]) * (x[row] . up_e[f]) (bf16) for every sorted slot s of
// expert e = experts[blockIdx.y].x, row = order[s] / top_k. gate_up as in moe_gate_up ([E,
// 2 inter, hidden] bf16). Grid (ceil(inter / 16), max active experts), MT_WARPS warps; blocks
// past *n_active return at once.
extern "C" __global__ void __launch_bounds__(MT_WARPS * 32)
    moe_gate_up_tc(const void* __restrict__ x, int x_bf16, const int* __restrict__ order,
                   const int4* __restrict__ experts, const int* __restrict__ n_active,
                   const bf16* __restrict__ gate_up, bf16* __restrict__ act, int hidden,
                   int inter, int top_k) {
    pdl_begin();
    __shared__ float red[MT_WARPS - 1][2][MT_NT][4][32];
    if ((int)blockIdx.y >= *n_active) return;
    const int4 ex = experts[blockIdx.y];
    const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int fa = blockIdx.x * 16 + g, fb = fa + 8;
    const bf16* gate = gate_up + (size_t)ex.x * 2 * inter * hidden;
    const bf16* up = gate + (size_t)inter * hidden;
    const bf16* const w[4] = {
        fa < inter ? gate + (size_t)fa * hidden : nullptr,
        fb < inter ? gate + (size_t)fb * hidden : nullptr,
        fa < inter ? up + (size_t)fa * hidden : nullptr,
        fb < inter ? up + (size_t)fb * hidden : nullptr,
    };
    for (int r0 = 0; r0 < ex.z; r0 += 8 * MT_NT) {
        long long xrow[MT_NT];
        mt_rows(xrow, ex, r0, order, true, top_k, hidden);
        float acc[2][MT_NT][4] = {};
        mt_tiles(w, x, x_bf16, xrow, ex.z - r0, hidden, acc);
        mt_reduce(acc, red);
        if (threadIdx.x >= 32) continue;
        // acc[t][n] holds (feature fa, pairs 2q, 2q + 1) then (fb, 2q, 2q + 1).
#pragma unroll
        for (int n = 0; n < MT_NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int f = i < 2 ? fa : fb, r = r0 + 8 * n + 2 * q + (i & 1);
                if (f >= inter || r >= ex.z) continue;
                const float gv = acc[0][n][i], uv = acc[1][n][i];
                act[(size_t)(ex.y + r) * inter + f] = __float2bfloat16(gv / (1.f + expf(-gv)) * uv);
            }
    }
}

// y[s, h] = act[s] . down_e[h] (f32) for every sorted slot s of expert e =
// experts[blockIdx.y].x; down is [E, hidden, inter] bf16, act [slots, inter] bf16 (from
// moe_gate_up_tc). Grid (ceil(hidden / 32), max active experts), MT_WARPS warps.
extern "C" __global__ void __launch_bounds__(MT_WARPS * 32)
    moe_down_tc(const bf16* __restrict__ act, const int4* __restrict__ experts,
                const int* __restrict__ n_active, const bf16* __restrict__ down,
                float* __restrict__ y, int hidden, int inter) {
    pdl_begin();
    __shared__ float red[MT_WARPS - 1][2][MT_NT][4][32];
    if ((int)blockIdx.y >= *n_active) return;
    const int4 ex = experts[blockIdx.y];
    const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int h0 = blockIdx.x * 32 + g;
    const bf16* d = down + (size_t)ex.x * hidden * inter;
    const bf16* w[4];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int h = h0 + 8 * r;
        w[r] = h < hidden ? d + (size_t)h * inter : nullptr;
    }
    for (int r0 = 0; r0 < ex.z; r0 += 8 * MT_NT) {
        long long xrow[MT_NT];
        mt_rows(xrow, ex, r0, nullptr, false, 1, inter);
        float acc[2][MT_NT][4] = {};
        mt_tiles(w, act, 1, xrow, ex.z - r0, inter, acc);
        mt_reduce(acc, red);
        if (threadIdx.x >= 32) continue;
        // acc[t][n] holds (feature h0 + 16 t, pairs 2q, 2q + 1) then (h0 + 16 t + 8, ...).
#pragma unroll
        for (int t = 0; t < 2; t++)
#pragma unroll
            for (int n = 0; n < MT_NT; n++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int h = h0 + 16 * t + 8 * (i >> 1), r = r0 + 8 * n + 2 * q + (i & 1);
                    if (h >= hidden || r >= ex.z) continue;
                    y[(size_t)(ex.y + r) * hidden + h] = acc[t][n][i];
                }
    }
}
