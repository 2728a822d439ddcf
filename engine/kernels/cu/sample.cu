// On-device greedy sampling: the argmax of each logits row, so a greedy step copies one id per
// sequence to the host instead of the whole vocabulary.
#include <math.h>
#include "common.cuh"

// Grid: rows; ties go to the lowest id, like the host sampler.
extern "C" __global__ void argmax_rows(const float* __restrict__ logits, uint32_t* __restrict__ ids,
                                       int vocab) {
    pdl_begin();
    const float* row = logits + (size_t)blockIdx.x * vocab;
    float best = -INFINITY;
    int best_i = 0x7fffffff;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
        const float v = row[i];
        if (v > best || (v == best && i < best_i)) {
            best = v;
            best_i = i;
        }
    }
    __shared__ float sv[1024];
    __shared__ int si[1024];
    sv[threadIdx.x] = best;
    si[threadIdx.x] = best_i;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            const float v = sv[threadIdx.x + s];
            const int i = si[threadIdx.x + s];
            if (v > sv[threadIdx.x] || (v == sv[threadIdx.x] && i < si[threadIdx.x])) {
                sv[threadIdx.x] = v;
                si[threadIdx.x] = i;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) ids[blockIdx.x] = si[0] == 0x7fffffff ? 0 : si[0];
}

// Sampling on the device, by thresholds (the host reference and the semantics are in
// hearth-backend's sample.rs): weights w = exp((l - max) / T), top-k and top-p thresholds found
// by binary search over f32 bit patterns, min-p, then the token whose running weight (in
// vocabulary order) first passes u times the kept total. Greedy rows (T <= 0 or top_k 1) take
// the first maximum. params[5 r ..] = (temperature, top_k, top_p, min_p, u) of row r.
// Grid: rows, 1024 threads.
#define SAMPLE_THREADS 1024

struct SampleRowView {
    const float* row;
    int vocab;
    float max, inv_t;
    bool greedy;
    __device__ float w(int i) const {
        const float l = row[i];
        return greedy ? (l == max ? 1.f : 0.f) : __expf((l - max) * inv_t);
    }
    // (count, mass) of weights >= t, summed over the block.
    __device__ float2 kept(float t) const {
        float c = 0.f, s = 0.f;
        for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
            const float x = w(i);
            if (x >= t) {
                c += 1.f;
                s += x;
            }
        }
        return make_float2(block_sum(c), block_sum(s));
    }
};

extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS) sample_rows(
    const float* __restrict__ logits, const float* __restrict__ params,
    uint32_t* __restrict__ ids, int vocab) {
    pdl_begin();
    __shared__ float scan[SAMPLE_THREADS];
    const float* p = params + 5 * blockIdx.x;
    const float temp = p[0], top_p = p[2], min_p = p[3], u = p[4];
    const int top_k = (int)p[1];
    SampleRowView v;
    v.row = logits + (size_t)blockIdx.x * vocab;
    v.vocab = vocab;
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) mx = fmaxf(mx, v.row[i]);
    v.max = block_max(mx);
    v.greedy = temp <= 0.f || top_k == 1;
    v.inv_t = v.greedy ? 0.f : 1.f / temp;

    float t = 0.f;
    if (!v.greedy) {
        if (top_k > 0 && top_k < vocab) {
            uint32_t lo = 0, hi = __float_as_uint(1.f);
            while (lo < hi) {
                const uint32_t mid = lo + (hi - lo + 1) / 2;
                if (v.kept(__uint_as_float(mid)).x >= (float)top_k) lo = mid;
                else hi = mid - 1;
            }
            t = __uint_as_float(lo);
        }
        if (top_p < 1.f) {
            const float want = top_p * v.kept(t).y;
            uint32_t lo = __float_as_uint(t), hi = __float_as_uint(1.f);
            while (lo < hi) {
                const uint32_t mid = lo + (hi - lo + 1) / 2;
                if (v.kept(__uint_as_float(mid)).y >= want) lo = mid;
                else hi = mid - 1;
            }
            t = __uint_as_float(lo);
        }
        if (min_p > 0.f) t = fmaxf(t, min_p);
    }
    const float total = v.kept(t).y;
    const float target = v.greedy ? 0.f : u * total;

    // Each thread owns a contiguous chunk; an inclusive scan of chunk masses finds the chunk
    // holding the target, whose thread walks it.
    const int chunk = (vocab + blockDim.x - 1) / blockDim.x;
    const int c0 = threadIdx.x * chunk, c1 = min(vocab, c0 + chunk);
    float mine = 0.f;
    for (int i = c0; i < c1; i++) {
        const float x = v.w(i);
        if (x >= t && x > 0.f) mine += x;
    }
    scan[threadIdx.x] = mine;
    __syncthreads();
    for (int o = 1; o < (int)blockDim.x; o <<= 1) {
        const float add = threadIdx.x >= o ? scan[threadIdx.x - o] : 0.f;
        __syncthreads();
        scan[threadIdx.x] += add;
        __syncthreads();
    }
    const float before = scan[threadIdx.x] - mine;
    // The first thread whose inclusive sum passes the target (or, after rounding, the last
    // thread holding any mass) walks its chunk.
    __shared__ int first, last_with_mass;
    if (threadIdx.x == 0) {
        first = blockDim.x;
        last_with_mass = 0;
    }
    __syncthreads();
    if (mine > 0.f && scan[threadIdx.x] > target) atomicMin(&first, (int)threadIdx.x);
    if (mine > 0.f) atomicMax(&last_with_mass, (int)threadIdx.x);
    __syncthreads();
    const int who = first < (int)blockDim.x ? first : last_with_mass;
    if ((int)threadIdx.x == who) {
        float acc = before;
        int chosen = -1, last = c0;
        for (int i = c0; i < c1; i++) {
            const float x = v.w(i);
            if (x >= t && x > 0.f) {
                acc += x;
                last = i;
                if (acc > target) {
                    chosen = i;
                    break;
                }
            }
        }
        ids[blockIdx.x] = chosen >= 0 ? chosen : last;
    }
}
