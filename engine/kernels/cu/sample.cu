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
// hearth-backend's sample.rs): weights w = exp((l - max) / T); the top-k threshold is the k-th
// largest weight, the top-p one the largest weight t whose w >= t carry top_p of what top-k kept
// (masses summed in fixed point, multiples of 2^-32 rounded down, so every sum is exact in any
// order); min-p; then the token whose running weight (in vocabulary order) first passes u times
// the kept total. Greedy rows (T <= 0 or top_k 1) take the first maximum.
// params[5 r ..] = (temperature, top_k, top_p, min_p, u) of row r. Grid: rows, 1024 threads.
//
// Both thresholds are found digit by digit of their bit patterns (non-negative floats order like
// their bit patterns), 8 bits a pass over the row, and the token by narrowing to one warp's
// segment, then to a 32nd of it, then walking that: a sampled row takes 2 passes over its
// logits and 4 more for each threshold (the row stays in L2 from the head GEMM).
#define SAMPLE_THREADS 1024
#define SAMPLE_WARPS (SAMPLE_THREADS / 32)
#define SAMPLE_UNROLL 8
#define MASS_SCALE 4294967296.f

typedef unsigned long long u64;

struct SampleRowView {
    const float* row;
    int vocab;
    float max, inv_t;
    bool greedy;
    __device__ float w_of(float l) const {
        return greedy ? (l == max ? 1.f : 0.f) : __expf((l - max) * inv_t);
    }
    // f(i, logit) for i = i0, i0 + step, ... below end, SAMPLE_UNROLL loads in flight.
    template <class F>
    __device__ void logits(int i0, int end, int step, F f) const {
        for (int base = i0; base < end; base += SAMPLE_UNROLL * step) {
            float l[SAMPLE_UNROLL];
#pragma unroll
            for (int j = 0; j < SAMPLE_UNROLL; j++) {
                const int i = base + j * step;
                l[j] = i < end ? row[i] : 0.f;
            }
#pragma unroll
            for (int j = 0; j < SAMPLE_UNROLL; j++) {
                const int i = base + j * step;
                if (i < end) f(i, l[j]);
            }
        }
    }
};

__device__ __forceinline__ u64 fixed_mass(float w) { return (u64)(w * MASS_SCALE); }

// The largest weight t such that the weights w >= t (of those >= floor) number at least `need`
// (top-k), or, by_mass, carry at least ceil(top_p * their total) (top-p): the pattern of t is
// built 8 bits a pass from the top, each pass a histogram of the next digit among the weights
// whose higher digits match it so far. Each pair of warps adds into its own histogram with
// 32-bit atomics (64-bit ones on shared memory are compare-and-swap loops, which spin when many
// lanes hit one bin), a mass as its low and high 16 bits (a pair's share of a row of up to
// 2^20 weights cannot overflow either), and the 16 are summed at the end of the pass.
#define SAMPLE_HISTS (SAMPLE_WARPS / 2)
__device__ __forceinline__ float radix_threshold(const SampleRowView& v, float floor,
                                                 bool by_mass, u64 need, float top_p) {
    __shared__ uint32_t lo16[SAMPLE_HISTS][256], hi16[SAMPLE_HISTS][256];
    __shared__ u64 hist[256];
    __shared__ uint32_t s_prefix;
    __shared__ u64 s_above;
    const int pair = threadIdx.x >> 6;
    uint32_t prefix = 0;
    u64 above = 0;  // the weights above the prefix's range (warp 0's copy counts)
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < SAMPLE_HISTS * 256; b += SAMPLE_THREADS) {
            lo16[0][b] = 0;
            hi16[0][b] = 0;
        }
        __syncthreads();
        const int hi = shift + 8;
        v.logits(threadIdx.x, v.vocab, SAMPLE_THREADS, [&](int, float l) {
            const float x = v.w_of(l);
            const uint32_t b = __float_as_uint(x);
            const u64 m = by_mass ? fixed_mass(x) : 1ull;
            if (x < floor || m == 0 || (hi < 32 && (b >> hi) != (prefix >> hi))) return;
            const int bin = (b >> shift) & 255;
            atomicAdd(&lo16[pair][bin], (uint32_t)(m & 0xffff));
            if (by_mass) atomicAdd(&hi16[pair][bin], (uint32_t)(m >> 16));
        });
        __syncthreads();
        for (int b = threadIdx.x; b < 256; b += SAMPLE_THREADS) {
            u64 sum = 0;
#pragma unroll
            for (int h = 0; h < SAMPLE_HISTS; h++) sum += ((u64)hi16[h][b] << 16) + lo16[h][b];
            hist[b] = sum;
        }
        __syncthreads();
        if (threadIdx.x < 32) {
            // Lane l holds bins 255 - 8 l down to 248 - 8 l; a scan over lanes gives the total
            // from the top bin down.
            const int lane = threadIdx.x;
            u64 s = 0;
#pragma unroll
            for (int j = 0; j < 8; j++) s += hist[255 - 8 * lane - j];
            u64 inc = s;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const u64 y = __shfl_up_sync(0xffffffffu, inc, o);
                if (lane >= o) inc += y;
            }
            if (by_mass && shift == 24) {
                const u64 total = __shfl_sync(0xffffffffu, inc, 31);
                const u64 want = (u64)ceil((double)top_p * (double)total);
                need = min(total, max(1ull, want));
            }
            // The level above kept at least `need` in this range, so some lane reaches it.
            const unsigned reach = __ballot_sync(0xffffffffu, above + inc >= need);
            if (lane == __ffs(reach) - 1) {
                u64 acc = above + inc - s;
                int d = 255 - 8 * lane;
                while (d > 248 - 8 * lane && acc + hist[d] < need) acc += hist[d--];
                s_prefix = prefix | (uint32_t)d << shift;
                s_above = acc;
            }
        }
        __syncthreads();
        prefix = s_prefix;
        above = s_above;
    }
    return __uint_as_float(prefix);
}

// Narrows [lo, hi) to the 32nd of it (a warp's segment) where the running kept weight, starting
// at *before, first passes *target (or, if rounding keeps it from passing, the last segment
// holding any); *before becomes the weight kept before that segment. With *target < 0 the target
// is first set to u times the kept total of [lo, hi) (0 for greedy rows: the first maximum).
__device__ __forceinline__ void narrow(const SampleRowView& v, float t, float u, float* target,
                                       int* lo, int* hi, float* before) {
    __shared__ float mass[SAMPLE_WARPS];
    __shared__ int s_lo, s_hi;
    __shared__ float s_before, s_target;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int seg = (*hi - *lo + SAMPLE_WARPS - 1) / SAMPLE_WARPS;
    const int s0 = min(*hi, *lo + warp * seg), s1 = min(*hi, s0 + seg);
    float mine = 0.f;
    v.logits(s0 + lane, s1, 32, [&](int, float l) {
        const float x = v.w_of(l);
        if (x >= t && x > 0.f) mine += x;
    });
    mine = warp_sum(mine);
    if (lane == 0) mass[warp] = mine;
    __syncthreads();
    if (warp == 0) {
        const float m = mass[lane];
        float inc = m;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const float y = __shfl_up_sync(0xffffffffu, inc, o);
            if (lane >= o) inc += y;
        }
        float goal = *target;
        if (goal < 0.f) goal = v.greedy ? 0.f : u * (*before + __shfl_sync(0xffffffffu, inc, 31));
        const unsigned passes = __ballot_sync(0xffffffffu, m > 0.f && *before + inc > goal);
        const unsigned held = __ballot_sync(0xffffffffu, m > 0.f);
        const int w = passes ? __ffs(passes) - 1 : (held ? 31 - __clz(held) : 0);
        if (lane == w) {
            s_lo = min(*hi, *lo + w * seg);
            s_hi = min(*hi, s_lo + seg);
            s_before = *before + inc - m;
            s_target = goal;
        }
    }
    __syncthreads();
    *lo = s_lo;
    *hi = s_hi;
    *before = s_before;
    *target = s_target;
}

extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS, 1) sample_rows(
    const float* __restrict__ logits, const float* __restrict__ params,
    uint32_t* __restrict__ ids, int vocab) {
    pdl_begin();
    const float* p = params + 5 * blockIdx.x;
    const float temp = p[0], top_p = p[2], min_p = p[3], u = p[4];
    const int top_k = (int)p[1];
    SampleRowView v;
    v.row = logits + (size_t)blockIdx.x * vocab;
    v.vocab = vocab;
    float mx = -INFINITY;
    v.logits(threadIdx.x, vocab, SAMPLE_THREADS, [&](int, float l) { mx = fmaxf(mx, l); });
    v.max = block_max(mx);
    v.greedy = temp <= 0.f || top_k == 1;
    v.inv_t = v.greedy ? 0.f : 1.f / temp;

    float t = 0.f;
    if (!v.greedy) {
        if (top_k > 0 && top_k < vocab) t = radix_threshold(v, 0.f, false, (u64)top_k, 1.f);
        if (top_p < 1.f) t = radix_threshold(v, t, true, 0, top_p);
        if (min_p > 0.f) t = fmaxf(t, min_p);
    }

    // Two narrowings (the first also finds the total and so the target) leave a stretch of
    // ~vocab / 1024 that warp 0 walks, 32 weights a round.
    int lo = 0, hi = vocab;
    float before = 0.f, target = -1.f;
    narrow(v, t, u, &target, &lo, &hi, &before);
    narrow(v, t, u, &target, &lo, &hi, &before);
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        int chosen = -1, last = 0;
        for (int base = lo; base < hi && chosen < 0; base += 32) {
            const int i = base + lane;
            const float x = i < hi ? v.w_of(v.row[i]) : 0.f;
            const bool keep = x >= t && x > 0.f;
            float inc = keep ? x : 0.f;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const float y = __shfl_up_sync(0xffffffffu, inc, o);
                if (lane >= o) inc += y;
            }
            const unsigned passes = __ballot_sync(0xffffffffu, keep && before + inc > target);
            const unsigned kept = __ballot_sync(0xffffffffu, keep);
            if (passes) chosen = base + __ffs(passes) - 1;
            if (kept) last = base + 31 - __clz(kept);
            before += __shfl_sync(0xffffffffu, inc, 31);
        }
        if (lane == 0) ids[blockIdx.x] = chosen >= 0 ? chosen : last;
    }
}
