// The weight ring: a run of a one-row decode's GEMVs (and the RMS norms before them) as one
// persistent launch whose weight stream never waits for activations. Design and measurements:
// docs/decode-ring-design.md; the host side that records the program: backend
// src/cuda/kernels/ring.rs.
//
// One block an SM. A producer warp (one lane) walks the whole program and bulk-copies the
// block's share of every step's weights (cp.async.bulk, completion counted on an mbarrier a
// slot) into a ring of shared-memory slots, as far ahead as the ring allows and across step
// boundaries: it starts before the kernel before it has finished (programmatic launch). The
// consumer warps, per step: wait until every block has finished the step before (an arrival
// counter a step), stage the step's input in shared memory (RMS-normed on the way when the step
// folds a norm), take the ring's slots in order, write their rows and count the block in.
//
// Every output is the same bits as the separate kernels it replaces (batch invariance: a
// one-row decode in the ring and the same sequence in a batch of the GEMV kernels agree): rows
// are summed in gemv.cu's order (four K quarters, lane-strided, warp-summed, added in order),
// and a folded norm sums its squares in norm_row's order for a block of `norm_threads`.
#include "common.cuh"

#define RING_SEGS 3
// Consumer warps: with the producer 12 warps, three on each of the SM's four schedulers, so
// a thread may keep 168 registers (the attention step needs them all; 17 warps left it 96).
#define RING_CW 11
#define RING_MAX_SLOTS 32
#define RING_GEMV 0    // y = x . W^T (+ bias), or y += with `add`; up to RING_SEGS matrices
#define RING_SWIGLU 1  // y = silu(x . Wg^T) * (x . Wu^T): seg[0] gate (and y), seg[1] up
#define RING_NORM 2    // no weights: block 0 writes the normed input
// No weights either: one row's q/k norms, RoPE and cache write (rope_write_kv), its attention
// over the paged cache (attn_decode_tc, a block's work on four consumer warps) and the merge of
// its splits (attn_decode_merge), each the same bits as those kernels.
#define RING_ROPE 3
#define RING_ATTN 4
#define RING_MERGE 5
// Give up on a wait after this long (a broken program): trap rather than hang the GPU.
#define RING_TIMEOUT_NS 5000000000ull

// One matrix of a step: n rows of the step's k, output y (n floats), optional bias.
struct RingSeg {
    const bf16* w;
    const float* bias;
    float* y;
    int n;
    int pad;
};

// What the attention steps read and write: the arguments of the kernels they stand for.
struct RingAttn {
    float* q;
    float* k;
    const float* v;
    const float* q_norm;  // or null
    const float* k_norm;
    const uint32_t* pos;
    const float* inv_freq;
    const uint32_t* slots;
    void* kc;  // bf16 or fp8 caches
    void* vc;
    float* out;
    float2* part_ml;
    float* part_acc;
    const uint32_t* rows;
    const uint32_t* tok_seq;
    const uint32_t* seq_info;
    const uint32_t* block_tables;
    int n_heads, n_kv_heads, head_dim, rotary_dim, neox, block_size, fp8;
    float eps, scale;
    int pad;
};

struct RingStep {
    RingSeg seg[RING_SEGS];
    RingAttn attn;
    const float* x;       // the input row (k floats), or the row to RMS-norm when gamma is set
    const float* gamma;   // RMS norm weight (k floats), or null
    float* norm_out[2];   // where block 0 writes the normed row (null: nowhere)
    int kind, k, nseg, add;
    float eps;
    int norm_threads;     // the norm kernel's block size, whose summation order is reproduced
};

// Passed by value; the steps live in device memory the host keeps for the graph's life.
struct RingProgram {
    const RingStep* steps;
    // An exit counter then an arrival counter a step, zero between launches (the last block
    // out zeroes them).
    unsigned* counters;
    // Measurement only (HEARTH_RING_DIAG=timeline), else null: RING_TL values a (step, block),
    // [step][block][RING_TL] from this launch's first step (see ring_timeline.rs).
    unsigned long long* timeline;
    int count, slot_bytes, slots, xs_floats;
    // Measurement only (HEARTH_RING_DIAG; wrong outputs): RING_FAST_DOT sums each row in one
    // lane-strided pass and one warp sum instead of gemv.cu's order, RING_NO_DOT skips the dots,
    // RING_NO_WAIT the waits for the step before, RING_NO_STAGE the input staging, RING_RELAXED
    // the release ordering of a block's arrival.
    int diag, pad;
};
#define RING_FAST_DOT 1
#define RING_NO_DOT 2
#define RING_NO_WAIT 4
#define RING_NO_STAGE 8
#define RING_RELAXED 16
// The host mirrors these structs (backend src/cuda/kernels/ring.rs, which checks the same size).
// A timeline entry: consumer thread 0's times (globaltimer ns) at the step's start, after its
// wait for the step before, after staging and at its end; its clock cycles waiting for full
// slots; the producer's time at the step's first copy and its cycles waiting for empty slots;
// the step's chunks; consumer warp 0's clock cycles in its dot products and its time (ns) at
// the barrier that ends the step, waiting for the other warps; when its release was done.
#define RING_TL 11
static_assert(sizeof(RingStep) == 328 && sizeof(RingProgram) == 48,
              "RingStep's or RingProgram's layout changed: update ring.rs");

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

__device__ __forceinline__ unsigned long long ring_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ bool ring_mbar_test(uint32_t bar, uint32_t parity) {
    uint32_t ok;
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(ok)
        : "r"(bar), "r"(parity)
        : "memory");
    return ok != 0;
}

__device__ __forceinline__ void ring_mbar_wait(uint32_t bar, uint32_t parity) {
    if (ring_mbar_test(bar, parity)) return;
    const unsigned long long t0 = ring_now();
    while (!ring_mbar_test(bar, parity))
        if (ring_now() - t0 > RING_TIMEOUT_NS) __trap();
}

// ring_mbar_wait, adding the clock cycles it took to `waited` when there is a timeline.
__device__ __forceinline__ void ring_mbar_wait_timed(uint32_t bar, uint32_t parity,
                                                     const unsigned long long* tl,
                                                     long long& waited) {
    const long long c = tl ? clock64() : 0;
    ring_mbar_wait(bar, parity);
    if (tl) waited += clock64() - c;
}

// Waits until `*counter` reaches `target` (acquire at GPU scope).
__device__ __forceinline__ void ring_counter_wait(const unsigned* counter, unsigned target) {
    const unsigned long long t0 = ring_now();
    for (;;) {
        unsigned v;
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(counter) : "memory");
        if (v >= target) return;
        if (ring_now() - t0 > RING_TIMEOUT_NS) __trap();
    }
}

// Counts the block in for a step (a release at GPU scope, which covers the other warps' writes
// ordered before it by the consumers' barrier); with a timeline, stamps when it is done.
// RING_RELAXED (measurement only, races): no release, to time what the release costs.
__device__ __forceinline__ void ring_arrive(unsigned* counter, unsigned long long* tl, int diag) {
    if (diag & RING_RELAXED)
        asm volatile("red.relaxed.gpu.global.add.u32 [%0], 1;" ::"l"(counter) : "memory");
    else
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(counter) : "memory");
    if (tl) tl[10] = ring_now();
}

__device__ __forceinline__ void ring_consumers_sync() {
    asm volatile("bar.sync 1, %0;" ::"n"(RING_CW * 32) : "memory");
}

// Copies a step's descriptor into shared memory (threads t of n), so that the work on its
// chunks reads no global memory.
__device__ __forceinline__ void ring_copy_step(const RingStep* src, RingStep* dst, int t, int n) {
    const int* from = reinterpret_cast<const int*>(src);
    int* to = reinterpret_cast<int*>(dst);
    for (int j = t; j < (int)(sizeof(RingStep) / 4); j += n) to[j] = __ldg(from + j);
}

// Units of a step: rows of its matrices back to back, or SwiGLU features (a gate and an up row).
__device__ __forceinline__ int ring_units(const RingStep& s) {
    if (s.kind >= RING_NORM) return 0;
    if (s.kind == RING_SWIGLU) return s.seg[0].n;
    int u = 0;
    for (int i = 0; i < s.nseg; i++) u += s.seg[i].n;
    return u;
}

// Calls f(seg, first row of the segment, rows, piece, pieces, piece8) for each of the block's
// chunks of step s in order: whole rows (or features) filling a slot, or pieces of a row that
// is longer than a slot, `piece8` 16-byte units each. The block owns units [u0, u1) (an equal
// share); producer and consumers walk the same list.
template <class F>
__device__ __forceinline__ void ring_chunks(const RingStep& s, int block, int blocks,
                                            int slot_bytes, F f) {
    const int units = ring_units(s);
    if (units == 0) return;
    const int per = (units + blocks - 1) / blocks;
    const int u0 = min(units, block * per), u1 = min(units, u0 + per);
    const int row_bytes = s.k * 2, unit_bytes = (s.kind == RING_SWIGLU ? 2 : 1) * row_bytes;
    const int k8n = s.k >> 3;
    const int nseg = s.kind == RING_SWIGLU ? 1 : s.nseg;
    int start = 0;
    for (int g = 0; g < nseg; g++) {
        const int lo = max(u0, start), hi = min(u1, start + s.seg[g].n);
        if (unit_bytes <= slot_bytes) {
            const int rows_per = slot_bytes / unit_bytes;
            for (int r = lo; r < hi; r += rows_per) f(g, r - start, min(rows_per, hi - r), 0, 1, k8n);
        } else {
            const int pieces = (row_bytes + slot_bytes - 1) / slot_bytes;
            const int piece8 = (k8n + pieces - 1) / pieces;
            for (int r = lo; r < hi; r++)
                for (int p = 0; p < pieces; p++) f(g, r - start, 1, p, pieces, piece8);
        }
        start += s.seg[g].n;
    }
}

// gemv.cu's order for one row (M = 1): K in GEMV_WARPS quarters, each lane-strided from its
// start and warp-summed (gemv_partials). Units [c0, c1) of the row are at w; `acc` carries the
// current quarter's lane sum and `part` the finished quarters' sums across a row's pieces.
__device__ __forceinline__ void ring_dot_piece(const uint4* w, int c0, int c1, int k8n,
                                               const float* xs, float& acc,
                                               float (&part)[GEMV_WARPS]) {
    const int lane = threadIdx.x & 31;
    const int per = (k8n + GEMV_WARPS - 1) / GEMV_WARPS;
    for (int q = c0 / per; q < GEMV_WARPS && q * per < c1; q++) {
        const int k_lo = q * per, k_end = min(k8n, k_lo + per);
        const int lo = max(c0, k_lo), hi = min(c1, k_end);
        int c = k_lo + lane;
        if (c < lo) c += (lo - c + 31) / 32 * 32;
#pragma unroll 4
        for (; c < hi; c += 32) {
            float wf[8];
            bf16x8_to_f32(w[c - c0], wf);
            const float4 a = reinterpret_cast<const float4*>(xs)[c];
            const float4 b = reinterpret_cast<const float4*>(xs)[k8n + c];
            // gemv_partials' very expression, so that the compiler contracts it the same way.
            acc += wf[0] * a.x + wf[1] * a.y + wf[2] * a.z + wf[3] * a.w + wf[4] * b.x +
                   wf[5] * b.y + wf[6] * b.z + wf[7] * b.w;
        }
        if (hi == k_end) {
            part[q] = warp_sum(acc);
            acc = 0.f;
        }
    }
}

// ring_dot_piece over two whole rows at once (a SwiGLU feature's gate and up rows), sharing the
// input's loads: each row's sums are the same operations in the same order as alone.
__device__ __forceinline__ void ring_dot_pair(const uint4* wg, const uint4* wu, int k8n,
                                              const float* xs, float (&pg)[GEMV_WARPS],
                                              float (&pu)[GEMV_WARPS]) {
    const int lane = threadIdx.x & 31;
    const int per = (k8n + GEMV_WARPS - 1) / GEMV_WARPS;
#pragma unroll
    for (int q = 0; q < GEMV_WARPS; q++) {
        const int k_lo = q * per, k_end = min(k8n, k_lo + per);
        float ag = 0.f, au = 0.f;
#pragma unroll 4
        for (int c = k_lo + lane; c < k_end; c += 32) {
            float g[8], u[8];
            bf16x8_to_f32(wg[c], g);
            bf16x8_to_f32(wu[c], u);
            const float4 a = reinterpret_cast<const float4*>(xs)[c];
            const float4 b = reinterpret_cast<const float4*>(xs)[k8n + c];
            ag += g[0] * a.x + g[1] * a.y + g[2] * a.z + g[3] * a.w + g[4] * b.x + g[5] * b.y +
                  g[6] * b.z + g[7] * b.w;
            au += u[0] * a.x + u[1] * a.y + u[2] * a.z + u[3] * a.w + u[4] * b.x + u[5] * b.y +
                  u[6] * b.z + u[7] * b.w;
        }
        if (k_lo < k_end) {
            pg[q] = warp_sum(ag);
            pu[q] = warp_sum(au);
        }
    }
}

// A row's sum from its quarters', as gemv_sum adds them.
__device__ __forceinline__ float ring_row_sum(const float (&part)[GEMV_WARPS]) {
    float v = 0.f;
#pragma unroll
    for (int q = 0; q < GEMV_WARPS; q++) v += part[q];
    return v;
}

// The residual row r of segment g adds to (`add` steps; else 0), read before the row's dot
// product so that the read is in flight meanwhile.
__device__ __forceinline__ float ring_addend(const RingStep& s, int g, int r) {
    const RingSeg& seg = s.seg[g];
    // The residual row was written by another block in an earlier step: read it from L2.
    return s.add ? __ldcg(seg.y + r) : 0.f;
}

// The epilogue of output row r of segment g (gemv_features: + bias or + 0, then y = or y +=),
// `old` its ring_addend.
__device__ __forceinline__ void ring_store(const RingStep& s, int g, int r, float sum, float old) {
    const RingSeg& seg = s.seg[g];
    const float v = sum + (seg.bias ? seg.bias[r] : 0.f);
    seg.y[r] = s.add ? old + v : v;
}

// Where float4 i of a staged row of n4 float4s goes: 16-byte unit c's first half at float4 c,
// its second at float4 half + c (half = ceil(n4 / 2)), so that a warp's lane-strided loads of
// either half are 32 consecutive float4s (no shared-memory bank conflicts).
__device__ __forceinline__ int ring_xs4(int i, int half) { return (i & 1) * half + (i >> 1); }

// Stages step s's input in xs (the consumers' threads): x as is, or RMS-normed in norm_row's
// order for a block of s.norm_threads threads (each of its threads' squares summed over its
// float4s, warp-summed, the warps' sums warp-summed), block 0 writing the normed row out.
__device__ __forceinline__ void ring_stage(const RingStep& s, float* xs, float* norm_part) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int n4 = s.k >> 2, half = (n4 + 1) >> 1;
    const float4* x4 = reinterpret_cast<const float4*>(s.x);
    float4* xs4 = reinterpret_cast<float4*>(xs);
    if (!s.gamma) {
#pragma unroll 4
        for (int i = tid; i < n4; i += RING_CW * 32) xs4[ring_xs4(i, half)] = __ldcg(x4 + i);
        ring_consumers_sync();
        return;
    }
    const int T = s.norm_threads, vwarps = T >> 5;
    for (int vw = warp; vw < vwarps; vw += RING_CW) {
        float ss = 0.f;
#pragma unroll 4
        for (int i = vw * 32 + lane; i < n4; i += T) {
            const float4 a = __ldcg(x4 + i);
            xs4[ring_xs4(i, half)] = a;
            ss += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
        }
        ss = warp_sum(ss);
        if (lane == 0) norm_part[vw] = ss;
    }
    ring_consumers_sync();
    const float total = warp_sum(lane < vwarps ? norm_part[lane] : 0.f);
    const float inv = 1.f / sqrtf(total / s.k + s.eps);
    const float4* g4 = reinterpret_cast<const float4*>(s.gamma);
    const bool out = blockIdx.x == 0;
    for (int i = tid; i < n4; i += RING_CW * 32) {
        const float4 a = xs4[ring_xs4(i, half)], g = g4[i];
        const float4 v =
            make_float4(a.x * inv * g.x, a.y * inv * g.y, a.z * inv * g.z, a.w * inv * g.w);
        xs4[ring_xs4(i, half)] = v;
        if (out) {
            if (s.norm_out[0]) reinterpret_cast<float4*>(s.norm_out[0])[i] = v;
            if (s.norm_out[1]) reinterpret_cast<float4*>(s.norm_out[1])[i] = v;
        }
    }
    ring_consumers_sync();
}

// The consumers' work on one chunk of step s, in slot `chunk`. `acc` and `part` carry a row
// cut in pieces across its chunks (one warp's). Rows (features) are striped over the warps by
// their index in the block's share.
__device__ __forceinline__ void ring_consume(const RingStep& s, const uint4* chunk, int g, int r0,
                                             int rows, int piece, int pieces, int piece8,
                                             int u_first, float* xs, float& acc,
                                             float (&part)[GEMV_WARPS], int diag) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (diag & RING_NO_DOT) return;
    const int k8n = s.k >> 3;
    int seg_start = 0;
    for (int i = 0; i < g; i++) seg_start += s.seg[i].n;
    const int u0 = seg_start + r0 - u_first;  // the chunk's first unit within the block's share
    if (pieces > 1) {
        if (u0 % RING_CW != warp) return;
        const int c0 = piece * piece8, c1 = min(k8n, c0 + piece8);
        const float old = piece == pieces - 1 && lane == 0 ? ring_addend(s, g, r0) : 0.f;
        ring_dot_piece(chunk, c0, c1, k8n, xs, acc, part);
        if (piece == pieces - 1) {
            if (lane == 0) ring_store(s, g, r0, ring_row_sum(part), old);
            acc = 0.f;
#pragma unroll
            for (int q = 0; q < GEMV_WARPS; q++) part[q] = 0.f;
        }
        return;
    }
    for (int j = (warp - u0 % RING_CW + RING_CW) % RING_CW; j < rows; j += RING_CW) {
        if (diag & RING_FAST_DOT) {
            const uint4* row = chunk + (size_t)j * k8n;
            float a = 0.f;
#pragma unroll 4
            for (int c = lane; c < k8n; c += 32) {
                float wf[8];
                bf16x8_to_f32(row[c], wf);
                const float4 x0 = reinterpret_cast<const float4*>(xs)[c];
                const float4 x1 = reinterpret_cast<const float4*>(xs)[k8n + c];
                a += wf[0] * x0.x + wf[1] * x0.y + wf[2] * x0.z + wf[3] * x0.w + wf[4] * x1.x +
                     wf[5] * x1.y + wf[6] * x1.z + wf[7] * x1.w;
            }
            a = warp_sum(a);
            if (lane == 0) s.seg[g].y[r0 + j] = a;
            continue;
        }
        // Quarters past K (narrow rows) stay zero, as gemv.cu's empty warps' sums are.
        float a = 0.f, p[GEMV_WARPS] = {0.f, 0.f, 0.f, 0.f};
        if (s.kind == RING_SWIGLU) {
            float q[GEMV_WARPS] = {0.f, 0.f, 0.f, 0.f};
            ring_dot_pair(chunk + (size_t)j * k8n, chunk + (size_t)(rows + j) * k8n, k8n, xs, p,
                          q);
            const float gate = ring_row_sum(p), up = ring_row_sum(q);
            if (lane == 0) s.seg[0].y[r0 + j] = gate / (1.f + expf(-gate)) * up;
            continue;
        }
        const float old = lane == 0 ? ring_addend(s, g, r0 + j) : 0.f;
        ring_dot_piece(chunk + (size_t)j * k8n, 0, k8n, k8n, xs, a, p);
        if (lane == 0) ring_store(s, g, r0 + j, ring_row_sum(p), old);
    }
}

// The four consumer warps that run an attention block's work, with their own barrier.
struct RingAttnSync {
    __device__ __forceinline__ void operator()() const {
        asm volatile("bar.sync 2, %0;" ::"n"(DTC_WARPS * 32) : "memory");
    }
};

template <int HD, typename T>
__device__ __forceinline__ void ring_attn_block(const RingAttn& a, int kvh, int split,
                                                unsigned char* smem) {
    const auto run = [&](auto nq) {
        attn_decode_tc_body<HD, T, decltype(nq)::value, false>(
            a.q, static_cast<const T*>(a.kc), static_cast<const T*>(a.vc), a.out, 0, a.part_ml,
            a.part_acc, a.rows, a.tok_seq, a.seq_info, a.block_tables, a.n_heads, a.n_kv_heads,
            a.block_size, a.scale, 0, kvh, split, threadIdx.x, smem, RingAttnSync());
    };
    if (a.n_heads / a.n_kv_heads <= 8) run(std::integral_constant<int, 1>());
    else run(std::integral_constant<int, 2>());
}

// One of the attention steps for launch row 0, this block's share: heads of q then k a warp
// (RoPE), (KV head, split) pairs a block on its first four warps (attention), or heads a block
// (merge). `xs` is the shared memory (the staging area, sized by the host for these).
__device__ __forceinline__ void ring_attention(const RingStep& s, unsigned char* xs) {
    const RingAttn& a = s.attn;
    const int warp = threadIdx.x >> 5;
    if (s.kind == RING_ROPE) {
        const int heads = a.n_heads + a.n_kv_heads;
        float* sh = reinterpret_cast<float*>(xs) + warp * 256;
        for (int hh = blockIdx.x + warp * gridDim.x; hh < heads; hh += gridDim.x * RING_CW) {
            if (a.fp8)
                rope_write_kv_head(a.q, a.k, a.v, a.q_norm, a.k_norm, a.eps, a.pos, a.inv_freq,
                                   a.slots, static_cast<fp8*>(a.kc), static_cast<fp8*>(a.vc),
                                   a.n_heads, a.n_kv_heads, a.head_dim, a.rotary_dim, a.neox, 0,
                                   hh, sh);
            else
                rope_write_kv_head(a.q, a.k, a.v, a.q_norm, a.k_norm, a.eps, a.pos, a.inv_freq,
                                   a.slots, static_cast<bf16*>(a.kc), static_cast<bf16*>(a.vc),
                                   a.n_heads, a.n_kv_heads, a.head_dim, a.rotary_dim, a.neox, 0,
                                   hh, sh);
            __syncwarp();  // sh is reused by the warp's next head
        }
    } else if (s.kind == RING_ATTN) {
        if (warp >= DTC_WARPS) return;
        const int t = a.rows[0];
        const int splits = dec_splits(dec_keys(t, a.seq_info + 4 * a.tok_seq[t]), DTC_SPLIT_MIN);
        for (int j = blockIdx.x; j < a.n_kv_heads * splits; j += gridDim.x) {
            const int kvh = j / splits, split = j % splits;
            if (a.fp8) {
                if (a.head_dim == 128) ring_attn_block<128, fp8>(a, kvh, split, xs);
                else ring_attn_block<64, fp8>(a, kvh, split, xs);
            } else {
                if (a.head_dim == 128) ring_attn_block<128, bf16>(a, kvh, split, xs);
                else ring_attn_block<64, bf16>(a, kvh, split, xs);
            }
            RingAttnSync()();  // the block's shared memory is reused by its next pair
        }
    } else {
        for (int h = blockIdx.x; h < a.n_heads; h += gridDim.x)
            attn_merge_head<true>(a.part_ml, a.part_acc, a.out, 0, a.rows, a.tok_seq, a.seq_info,
                                  a.n_heads, a.head_dim, DTC_SPLIT_MIN, 0, h, threadIdx.x,
                                  RING_CW * 32);
    }
}

#endif

extern "C" __global__ void __launch_bounds__((RING_CW + 1) * 32, 1)
    decode_ring(const __grid_constant__ RingProgram prog) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(128) unsigned char ring_smem[];
    __shared__ __align__(8) uint64_t full[RING_MAX_SLOTS], empty[RING_MAX_SLOTS];
    __shared__ float norm_part[32];
    // The consumers' current step's descriptor.
    __shared__ __align__(16) RingStep cstep;
    float* xs = reinterpret_cast<float*>(ring_smem);
    unsigned char* ring = ring_smem + (size_t)prog.xs_floats * 4;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int slots = prog.slots, slot_bytes = prog.slot_bytes;
    const uint32_t full0 = (uint32_t)__cvta_generic_to_shared(full);
    const uint32_t empty0 = (uint32_t)__cvta_generic_to_shared(empty);
    if (threadIdx.x == 0) {
        for (int i = 0; i < slots; i++) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(full0 + 8 * i));
            asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(empty0 + 8 * i),
                         "n"(RING_CW));
        }
        // The bulk copies (async proxy) complete on these barriers.
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (warp == RING_CW) {
        // The producer: weights are constant, so it starts before the kernel before this one
        // has finished, and runs up to a ring ahead of the consumers.
        if (lane != 0) return;
        int slot = 0;
        uint32_t phase = 0;
        for (int i = 0; i < prog.count; i++) {
            const RingStep& s = prog.steps[i];
            unsigned long long* tl =
                prog.timeline ? prog.timeline + ((size_t)i * gridDim.x + blockIdx.x) * RING_TL
                              : nullptr;
            long long waited = 0;
            int chunks = 0;
            ring_chunks(s, blockIdx.x, gridDim.x, slot_bytes,
                        [&](int g, int r, int rows, int piece, int pieces, int piece8) {
                            ring_mbar_wait_timed(empty0 + 8 * slot, phase ^ 1, tl, waited);
                            if (tl && chunks++ == 0) tl[5] = ring_now();
                            const uint32_t f = full0 + 8 * slot;
                            const uint32_t dst =
                                (uint32_t)__cvta_generic_to_shared(ring + (size_t)slot * slot_bytes);
                            const int k8n = s.k >> 3;
                            const int c0 = piece * piece8, c1 = pieces > 1 ? min(k8n, c0 + piece8) : k8n;
                            const uint32_t bytes = (uint32_t)rows * (c1 - c0) * 16;
                            const int mats = s.kind == RING_SWIGLU ? 2 : 1;
                            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(f),
                                         "r"(bytes * mats)
                                         : "memory");
                            for (int m = 0; m < mats; m++) {
                                const bf16* w = s.seg[s.kind == RING_SWIGLU ? m : g].w;
                                const bf16* src = w + (size_t)r * s.k + 8 * c0;
                                asm volatile(
                                    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst + m * bytes),
                                    "l"(src), "r"(bytes), "r"(f)
                                    : "memory");
                            }
                            if (++slot == slots) {
                                slot = 0;
                                phase ^= 1;
                            }
                        });
            if (tl) {
                if (chunks == 0) tl[5] = 0;
                tl[6] = waited;
                tl[7] = chunks;
            }
        }
        return;
    }
    // The consumers. Nothing the kernel before wrote is read before this.
    pdl_wait();
    int gc = 0;  // chunks of the steps before
    for (int i = 0; i < prog.count; i++) {
        // Every consumer is past step i - 1 (the barrier that ended it).
        ring_copy_step(prog.steps + i, &cstep, threadIdx.x, RING_CW * 32);
        const RingStep& s = cstep;
        unsigned long long* tl =
            prog.timeline && threadIdx.x == 0
                ? prog.timeline + ((size_t)i * gridDim.x + blockIdx.x) * RING_TL
                : nullptr;
        if (tl) tl[0] = ring_now();
        if (i > 0 && !(prog.diag & RING_NO_WAIT) && threadIdx.x == 0)
            ring_counter_wait(prog.counters + i, gridDim.x);
        ring_consumers_sync();  // the wait, and cstep written
        if (tl) tl[1] = tl[2] = ring_now();
        if (s.kind > RING_NORM) {
            ring_attention(s, reinterpret_cast<unsigned char*>(xs));
            ring_consumers_sync();
            if (tl) {
                tl[3] = ring_now();
                tl[4] = tl[8] = tl[9] = 0;
            }
            if (threadIdx.x == 0) ring_arrive(prog.counters + 1 + i, tl, prog.diag);
            continue;
        }
        if ((s.kind != RING_NORM || blockIdx.x == 0) && !(prog.diag & RING_NO_STAGE))
            ring_stage(s, xs, norm_part);
        if (tl) tl[2] = ring_now();
        long long full_wait = 0, busy = 0;
        const int units = ring_units(s);
        const int per = (units + gridDim.x - 1) / gridDim.x;
        const int u_first = min(units, (int)blockIdx.x * per);
        float acc = 0.f, part[GEMV_WARPS] = {0.f, 0.f, 0.f, 0.f};
        ring_chunks(s, blockIdx.x, gridDim.x, slot_bytes,
                    [&](int g, int r, int rows, int piece, int pieces, int piece8) {
                        const int slot = gc % slots;
                        ring_mbar_wait_timed(full0 + 8 * slot, (gc / slots) & 1, tl, full_wait);
                        const uint4* chunk =
                            reinterpret_cast<const uint4*>(ring + (size_t)slot * slot_bytes);
                        const long long c = tl ? clock64() : 0;
                        ring_consume(s, chunk, g, r, rows, piece, pieces, piece8, u_first, xs, acc,
                                     part, prog.diag);
                        if (tl) busy += clock64() - c;
                        // Every warp frees every slot (an mbarrier's parity only tells its
                        // current phase from the one before: no warp may run a turn ahead).
                        __syncwarp();
                        if (lane == 0)
                            asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(
                                             empty0 + 8 * slot)
                                         : "memory");
                        gc++;
                    });
        // The block's rows are written: count it in (the barrier orders the other warps'
        // writes before thread 0's release).
        const unsigned long long done = tl ? ring_now() : 0;
        ring_consumers_sync();
        if (tl) {
            tl[3] = ring_now();
            tl[4] = full_wait;
            tl[8] = busy;
            tl[9] = tl[3] - done;
        }
        if (threadIdx.x == 0) ring_arrive(prog.counters + 1 + i, tl, prog.diag);
    }
    if (threadIdx.x == 0) {
        // The last block out zeroes the counters for the next launch: every block is past its
        // last wait by then.
        __threadfence();
        unsigned* exits = prog.counters;
        if (atomicAdd(exits, 1u) == gridDim.x - 1) {
            __threadfence();
            for (int i = 1; i <= prog.count; i++) prog.counters[i] = 0;
            *exits = 0;
            __threadfence();
        }
    }
    pdl_trigger();
#else
    __trap();  // the host enables the ring on sm_90 and later only
#endif
}
