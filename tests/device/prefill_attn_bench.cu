// Prefill attention alone: attn_prefill_tc (mma.sync) against attn_prefill_wg (wgmma, sm_90a)
// at Qwen3-8B's head layout (32 query heads, 8 KV heads, head_dim 128) over a paged cache of
// 16-token pages in shuffled order, bf16 and fp8, one and two heads a block. Checks:
// - a batch of short chunks with cached prefixes (300 queries after 700 cached keys, 77 fresh,
//   5 queries after 60): every kernel against a plain f32 attention over the same cached values
//   (max error over the largest output);
// - one 8,192-token prompt: the wgmma kernel against the mma.sync one;
// then times the 8,192-token prompt (microseconds and TFLOP/s of the causal products).
//
// Build and run on the GPU machine: tests/device/run.sh pattn.
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>

#include <algorithm>
#include <random>
#include <vector>

#include "../../engine/kernels/cu/attention_prefill.cu"
#include "../../engine/kernels/cu/attention_prefill_wg.cu"
// After the kernels: it uses their bf16 and fp8 types.
#include "kv_fill.cuh"

constexpr int NH = 32, NKV = 8, HD = 128, BS = 16, KV_DIM = NKV * HD;

// ref[row][h][:] = softmax(scale q k^T) v over the keys the row sees; block (row, h), HD threads.
template <typename T>
__global__ void ref_attn(const float* q, const T* kc, const T* vc, const uint32_t* row_seq,
                         const uint32_t* seq_info, const uint32_t* tables, float* ref,
                         float scale) {
    const int row = blockIdx.x, h = blockIdx.y, d = threadIdx.x, kvh = h / (NH / NKV);
    const uint32_t* info = seq_info + 4 * row_seq[row];
    const int pos = info[2] - info[1] - info[0] + row;
    const uint32_t* table = tables + info[3];
    __shared__ float qs[HD], red[HD];
    qs[d] = q[((size_t)row * NH + h) * HD + d];
    float m = -INFINITY, l = 0.f, acc = 0.f;
    for (int key = 0; key <= pos; key++) {
        const size_t at = ((size_t)table[key / BS] * BS + key % BS) * KV_DIM + kvh * HD;
        __syncthreads();
        red[d] = qs[d] * kv_f32(kc[at + d]);
        __syncthreads();
        for (int s = HD / 2; s > 0; s >>= 1) {
            if (d < s) red[d] += red[d + s];
            __syncthreads();
        }
        const float sc = red[0] * scale, mn = fmaxf(m, sc), c = expf(m - mn), p = expf(sc - mn);
        l = l * c + p;
        acc = acc * c + p * kv_f32(vc[at + d]);
        m = mn;
    }
    ref[((size_t)row * NH + h) * HD + d] = acc / l;
}

struct Batch {
    std::vector<uint32_t> info, tables, tiles, row_seq;
    int rows = 0;
};

// Sequences of (cached keys before, queries); pages shuffled over the cache; tiles heaviest
// first, as the engine orders them.
static Batch make_batch(const std::vector<std::pair<int, int>>& seqs, int pages,
                        std::mt19937& rng) {
    Batch b;
    std::vector<uint32_t> free(pages);
    for (int i = 0; i < pages; i++) free[i] = i;
    std::shuffle(free.begin(), free.end(), rng);
    size_t next = 0;
    std::vector<std::pair<int, std::pair<int, int>>> tiles;
    for (size_t s = 0; s < seqs.size(); s++) {
        const int prefix = seqs[s].first, q_len = seqs[s].second, ctx = prefix + q_len;
        b.info.insert(b.info.end(), {(uint32_t)b.rows, (uint32_t)q_len, (uint32_t)ctx,
                                     (uint32_t)b.tables.size()});
        for (int p = 0; p < (ctx + BS - 1) / BS; p++) b.tables.push_back(free[next++]);
        for (int r = 0; r < q_len; r += 64)
            tiles.push_back({prefix + r + 64, {(int)s, b.rows + r}});
        for (int r = 0; r < q_len; r++) b.row_seq.push_back(s);
        b.rows += q_len;
    }
    std::stable_sort(tiles.begin(), tiles.end(),
                     [](auto& a, auto& c) { return a.first > c.first; });
    for (auto& t : tiles)
        b.tiles.insert(b.tiles.end(), {(uint32_t)t.second.first, (uint32_t)t.second.second});
    return b;
}

template <typename T>
using Kernel = void (*)(const float*, const T*, const T*, void*, const uint32_t*, const uint32_t*,
                        const uint32_t*, int, int, int, float, int);

template <typename T>
struct Variant {
    const char* name;
    Kernel<T> f;
    int hpb, smem;
};

template <typename T>
static std::vector<Variant<T>> variants() {
    constexpr bool F = std::is_same<T, fp8>::value;
    return {
        {"tc (mma.sync), 1 head a block",
         F ? (Kernel<T>)attn_prefill_tc_fp8_128 : (Kernel<T>)attn_prefill_tc_128, 1,
         prefill_tc_smem<128, T, 1>()},
        {"tc (mma.sync), 2 heads a block",
         F ? (Kernel<T>)attn_prefill_tc_h2_fp8_128 : (Kernel<T>)attn_prefill_tc_h2_128, 2,
         prefill_tc_smem<128, T, 2>()},
        {"wg (wgmma), 1 head a block",
         F ? (Kernel<T>)attn_prefill_wg_fp8_128 : (Kernel<T>)attn_prefill_wg_128, 1,
         prefill_wg_smem<1>()},
        {"wg (wgmma), 2 heads a block",
         F ? (Kernel<T>)attn_prefill_wg_h2_fp8_128 : (Kernel<T>)attn_prefill_wg_h2_128, 2,
         prefill_wg_smem<2>()},
    };
}

template <typename T>
struct Run {
    uint32_t *info, *tables, *tiles;
    int n_tiles;
    const float* q;
    const T *kc, *vc;
    float* out;
    void launch(const Variant<T>& v, cudaStream_t st) const {
        v.f<<<dim3(n_tiles, NH / v.hpb), 128 * v.hpb, v.smem, st>>>(
            q, kc, vc, out, tiles, info, tables, NH, NKV, BS, 1.f / sqrtf((float)HD), 0);
    }
};

template <typename T>
static uint32_t* upload(const std::vector<T>& v) {
    T* d;
    CK(cudaMalloc(&d, v.size() * sizeof(T)));
    CK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return reinterpret_cast<uint32_t*>(d);
}

// The batch's metadata uploaded, with the buffers the launches read and write.
template <typename T>
static Run<T> on_device(const Batch& b, const float* q, const T* kc, const T* vc, float* out) {
    return Run<T>{
        upload(b.info), upload(b.tables), upload(b.tiles), (int)b.tiles.size() / 2, q, kc, vc, out};
}

static float max_rel(const std::vector<float>& a, const std::vector<float>& ref) {
    float err = 0.f, big = 0.f;
    for (size_t i = 0; i < a.size(); i++) {
        err = fmaxf(err, fabsf(a[i] - ref[i]));
        big = fmaxf(big, fabsf(ref[i]));
        if (!std::isfinite(a[i])) return INFINITY;
    }
    return err / big;
}

template <typename T>
static bool run(const char* label, int pages, T* kc, T* vc, float* q, float* out, float* ref) {
    bool ok = true;
    std::mt19937 rng(7);
    auto vs = variants<T>();
    for (auto& v : vs)
        CK(cudaFuncSetAttribute(v.f, cudaFuncAttributeMaxDynamicSharedMemorySize, v.smem));
    const float scale = 1.f / sqrtf((float)HD);
    // Short chunks with cached prefixes, against f32.
    {
        Batch b = make_batch({{700, 300}, {0, 77}, {60, 5}}, pages, rng);
        const Run<T> r = on_device(b, q, kc, vc, out);
        uint32_t* row_seq = upload(b.row_seq);
        ref_attn<T><<<dim3(b.rows, NH), HD>>>(q, kc, vc, row_seq, r.info, r.tables, ref, scale);
        CK(cudaDeviceSynchronize());
        std::vector<float> want((size_t)b.rows * NH * HD), got(want.size());
        CK(cudaMemcpy(want.data(), ref, want.size() * 4, cudaMemcpyDeviceToHost));
        for (auto& v : vs) {
            CK(cudaMemset(out, 0xff, got.size() * 4));
            r.launch(v, 0);
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(got.data(), out, got.size() * 4, cudaMemcpyDeviceToHost));
            const float e = max_rel(got, want);
            const bool pass = e < 2e-2f;
            ok &= pass;
            printf("%s chunks %-32s vs f32: %.2e of the largest %s\n", label, v.name, e,
                   pass ? "ok" : "FAIL");
        }
    }
    // One 8,192-token prompt: wgmma against mma.sync, then the times.
    {
        const int n = 8192;
        Batch b = make_batch({{0, n}}, pages, rng);
        const Run<T> r = on_device(b, q, kc, vc, out);
        std::vector<float> base((size_t)n * NH * HD), got(base.size());
        double flops = 0;
        for (int row = 0; row < n; row++) flops += 4.0 * NH * HD * (row + 1);
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        for (size_t i = 0; i < vs.size(); i++) {
            auto& v = vs[i];
            CK(cudaMemset(out, 0xff, got.size() * 4));
            r.launch(v, 0);
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(i == 0 ? base.data() : got.data(), out, got.size() * 4,
                          cudaMemcpyDeviceToHost));
            float e = 0.f;
            if (i > 0) {
                e = max_rel(got, base);
                ok &= e < 2e-2f;
            }
            const int reps = 20;
            CK(cudaEventRecord(e0));
            for (int k = 0; k < reps; k++) r.launch(v, 0);
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            const double us = ms * 1e3 / reps;
            printf("%s pp8192 %-32s %8.1f us  %6.1f TFLOP/s  vs the first: %.2e\n", label, v.name,
                   us, flops / (us * 1e-6) / 1e12, e);
        }
    }
    return ok;
}

int main() {
    const size_t pages = 8192 / BS + 128;
    const size_t cache = pages * BS * KV_DIM;
    const size_t rows = 8192;
    float *q, *out, *ref;
    CK(cudaMalloc(&q, rows * NH * HD * 4));
    CK(cudaMalloc(&out, rows * NH * HD * 4));
    CK(cudaMalloc(&ref, rows * NH * HD * 4));
    fill_f32<<<512, 256>>>(q, rows * NH * HD, 1);
    bf16 *kb, *vb;
    fp8 *k8, *v8;
    CK(cudaMalloc(&kb, cache * 2));
    CK(cudaMalloc(&vb, cache * 2));
    CK(cudaMalloc(&k8, cache));
    CK(cudaMalloc(&v8, cache));
    fill_kv<<<512, 256>>>(kb, cache, 2);
    fill_kv<<<512, 256>>>(vb, cache, 3);
    fill_kv<<<512, 256>>>(k8, cache, 2);
    fill_kv<<<512, 256>>>(v8, cache, 3);
    CK(cudaDeviceSynchronize());
    bool ok = run<bf16>("bf16", (int)pages, kb, vb, q, out, ref);
    ok &= run<fp8>("fp8 ", (int)pages, k8, v8, q, out, ref);
    printf(ok ? "all checks passed\n" : "CHECKS FAILED\n");
    return ok ? 0 : 1;
}
