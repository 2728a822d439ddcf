// Decode attention alone (attn_decode_tc + attn_decode_merge, the engine's launches of decode
// rows), at Qwen3-8B's head layout (32 query heads, 8 KV heads, head_dim 128) over a paged cache
// of 16-token pages in shuffled order, bf16 and fp8: microseconds a launch pair and the KV bytes
// read against a plain copy. Caches rotate over copies larger than L2, as a decode step finds
// them after a layer's weights went through it. Each output is checked against a plain f32
// attention over the same cached values.
//
// The kernel's compile-time settings (DTC_STAGES, DTC_SPLIT_MIN, DTC_MIN_BLOCKS)
// come from -D flags, and another version of attention_decode_tc.cu from an -I folder before
// engine/kernels/cu: tests/device/run.sh dattn builds one binary a variant (DATTN_VARIANTS) and
// runs them in turn, in rounds, in one command.
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "../../engine/kernels/cu/attention.cu"
#include "../../engine/kernels/cu/attention_decode.cu"
// From the first -I folder that has it: engine/kernels/cu, or another version's for an A/B.
#include "attention_decode_tc.cu"

#include "kv_fill.cuh"

constexpr int NH = 32, NKV = 8, HD = 128, BS = 16, KV_DIM = NKV * HD;
// Blocks along z: the engine launches DEC_MAX_SPLITS (a row's splits are known on the device
// only); fewer show what the blocks that find their split empty cost.
#ifndef DATTN_GRID_Z
#define DATTN_GRID_Z DEC_MAX_SPLITS
#endif

// ref[s][h][:] = softmax(scale q k^T) v over sequence s's keys; block (s, h), 128 threads.
template <typename T>
__global__ void ref_attn(const float* q, const T* kc, const T* vc, const uint32_t* seq_info,
                         const uint32_t* tables, float* ref, float scale) {
    __shared__ float p[4096];
    __shared__ float red[128];
    const int s = blockIdx.x, h = blockIdx.y, kvh = h / (NH / NKV), tid = threadIdx.x;
    const int keys = seq_info[4 * s + 2];
    const uint32_t* table = tables + seq_info[4 * s + 3];
    const float* qh = q + ((size_t)s * NH + h) * HD;
    const auto at = [&](int key, int d) {
        return ((size_t)table[key / BS] * BS + key % BS) * KV_DIM + kvh * HD + d;
    };
    float mx = -INFINITY;
    for (int key = tid; key < keys; key += 128) {
        float dot = 0.f;
        for (int d = 0; d < HD; d++) dot += qh[d] * kv_f32(kc[at(key, d)]);
        p[key] = dot * scale;
        mx = fmaxf(mx, p[key]);
    }
    red[tid] = mx;
    __syncthreads();
    for (int x = 64; x > 0; x >>= 1) {
        if (tid < x) red[tid] = fmaxf(red[tid], red[tid + x]);
        __syncthreads();
    }
    mx = red[0];
    __syncthreads();
    float sum = 0.f;
    for (int key = tid; key < keys; key += 128) {
        p[key] = expf(p[key] - mx);
        sum += p[key];
    }
    red[tid] = sum;
    __syncthreads();
    for (int x = 64; x > 0; x >>= 1) {
        if (tid < x) red[tid] += red[tid + x];
        __syncthreads();
    }
    sum = red[0];
    float o = 0.f;
    for (int key = 0; key < keys; key++) o += p[key] * kv_f32(vc[at(key, tid)]);
    ref[((size_t)s * NH + h) * HD + tid] = o / sum;
}

struct Case {
    int rows, ctx_lo, ctx_hi;
};

template <typename T>
void run_case(const Case& cs, double copy, const char* dtype,
              void (*attn)(const float*, const T*, const T*, void*, float2*, float*,
                           const uint32_t*, const uint32_t*, const uint32_t*, const uint32_t*,
                           int, int, int, float, int)) {
    const int rows = cs.rows;
    std::vector<int> ctx(rows);
    size_t keys = 0, pages = 0;
    for (int s = 0; s < rows; s++) {
        ctx[s] = rows == 1 ? cs.ctx_lo : cs.ctx_lo + (cs.ctx_hi - cs.ctx_lo) * s / (rows - 1);
        keys += ctx[s];
        pages += (ctx[s] + BS - 1) / BS;
    }
    const size_t copy_bytes = pages * BS * KV_DIM * sizeof(T) * 2;
    const int copies = std::max<size_t>(2, (256ull << 20) / copy_bytes + 1);
    std::mt19937 rng(7);
    std::vector<uint32_t> info(4 * rows), tables;
    std::vector<uint32_t> rows_h(rows), tok_seq(rows);
    std::vector<std::vector<uint32_t>> tables_c(copies);
    for (int c = 0; c < copies; c++) {
        std::vector<uint32_t> perm(pages);
        std::iota(perm.begin(), perm.end(), (uint32_t)(c * pages));
        std::shuffle(perm.begin(), perm.end(), rng);
        tables_c[c] = perm;
    }
    size_t off = 0;
    for (int s = 0; s < rows; s++) {
        info[4 * s] = s, info[4 * s + 1] = 1, info[4 * s + 2] = ctx[s], info[4 * s + 3] = off;
        off += (ctx[s] + BS - 1) / BS;
        rows_h[s] = s, tok_seq[s] = s;
    }
    T *kc, *vc;
    const size_t slots = (size_t)copies * pages * BS;
    CK(cudaMalloc(&kc, slots * KV_DIM * sizeof(T)));
    CK(cudaMalloc(&vc, slots * KV_DIM * sizeof(T)));
    fill_kv<<<1024, 256>>>(kc, slots * KV_DIM, 1);
    fill_kv<<<1024, 256>>>(vc, slots * KV_DIM, 2);
    float *q, *out, *ref, *acc;
    float2* ml;
    uint32_t *d_info, *d_rows, *d_tok, *d_tables;
    CK(cudaMalloc(&q, (size_t)rows * NH * HD * 4));
    CK(cudaMalloc(&out, (size_t)rows * NH * HD * 4));
    CK(cudaMalloc(&ref, (size_t)rows * NH * HD * 4));
    CK(cudaMalloc(&ml, (size_t)rows * NH * DEC_MAX_SPLITS * 8));
    CK(cudaMalloc(&acc, (size_t)rows * NH * DEC_MAX_SPLITS * HD * 4));
    CK(cudaMalloc(&d_info, info.size() * 4));
    CK(cudaMalloc(&d_rows, rows * 4));
    CK(cudaMalloc(&d_tok, rows * 4));
    CK(cudaMalloc(&d_tables, (size_t)copies * pages * 4));
    fill_f32<<<256, 256>>>(q, (size_t)rows * NH * HD, 3);
    CK(cudaMemcpy(d_info, info.data(), info.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_rows, rows_h.data(), rows * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_tok, tok_seq.data(), rows * 4, cudaMemcpyHostToDevice));
    for (int c = 0; c < copies; c++)
        CK(cudaMemcpy(d_tables + c * pages, tables_c[c].data(), pages * 4,
                      cudaMemcpyHostToDevice));
    const float scale = 1.f / sqrtf((float)HD);
    const int smem = DtcSmem<HD, T>::BYTES;
    CK(cudaFuncSetAttribute(attn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
#ifdef DATTN_CARVEOUT  // the shared memory carveout the engine would ask for, in percent
    CK(cudaFuncSetAttribute(attn, cudaFuncAttributePreferredSharedMemoryCarveout, DATTN_CARVEOUT));
#endif
    int occupancy = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occupancy, attn, DTC_WARPS * 32, smem));
    // Copy c's tables: its seq_info offsets shifted by c * pages.
    std::vector<uint32_t*> infos(copies);
    for (int c = 0; c < copies; c++) {
        std::vector<uint32_t> ic = info;
        for (int s = 0; s < rows; s++) ic[4 * s + 3] += c * pages;
        CK(cudaMalloc(&infos[c], ic.size() * 4));
        CK(cudaMemcpy(infos[c], ic.data(), ic.size() * 4, cudaMemcpyHostToDevice));
    }
    const auto launch = [&](int c) {
        attn<<<dim3(rows, NKV, DATTN_GRID_Z), DTC_WARPS * 32, smem>>>(
            q, kc, vc, out, ml, acc, d_rows, d_tok, infos[c], d_tables, NH, NKV, BS, scale, 0);
        if (rows <= 8)
            attn_decode_merge_wide<<<dim3(rows, NH), 128>>>(ml, acc, out, d_rows, d_tok, infos[c],
                                                            NH, HD, DTC_SPLIT_MIN, 0);
        else
            attn_decode_merge<<<dim3(rows, NH), 128>>>(ml, acc, out, d_rows, d_tok, infos[c], NH,
                                                       HD, DTC_SPLIT_MIN, 0);
    };
    launch(0);
    CK(cudaGetLastError());
    ref_attn<T><<<dim3(rows, NH), 128>>>(q, kc, vc, infos[0], d_tables, ref, scale);
    CK(cudaDeviceSynchronize());
    std::vector<float> o((size_t)rows * NH * HD), r(o.size());
    CK(cudaMemcpy(o.data(), out, o.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(r.data(), ref, r.size() * 4, cudaMemcpyDeviceToHost));
    double err = 0, big = 0;
    for (size_t i = 0; i < o.size(); i++) {
        err = std::max(err, (double)fabsf(o[i] - r[i]));
        big = std::max(big, (double)fabsf(r[i]));
    }
    for (int i = 0; i < 3 * copies; i++) launch(i % copies);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int iters = std::max(20, 200 / std::max(1, rows / 8));
    CK(cudaEventRecord(e0));
    for (int i = 0; i < iters; i++) launch(i % copies);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    const double us = ms * 1e3 / iters;
    const double bytes = (double)keys * KV_DIM * sizeof(T) * 2;
    printf("| %s | %d | %d-%d | %.1f | %.0f | %.1f | %.1e | %d |\n", dtype, rows, cs.ctx_lo,
           cs.ctx_hi, us, bytes / us / 1e3, 100.0 * bytes / (us * 1e-6) / copy, err / big,
           occupancy);
    if (err > 2e-2 * big) {
        printf("output differs from the f32 reference: %.3e of the largest\n", err / big);
        exit(1);
    }
    for (uint32_t* p : infos) CK(cudaFree(p));
    CK(cudaFree(kc));
    CK(cudaFree(vc));
    CK(cudaFree(q));
    CK(cudaFree(out));
    CK(cudaFree(ref));
    CK(cudaFree(ml));
    CK(cudaFree(acc));
    CK(cudaFree(d_info));
    CK(cudaFree(d_rows));
    CK(cudaFree(d_tok));
    CK(cudaFree(d_tables));
}

int main() {
    const double copy = copy_rate();
    printf("DTC_SPLIT_MIN %d; copy %.0f GB/s; fp8 smem %d B, bf16 %d B a block\n", DTC_SPLIT_MIN,
           copy / 1e9, DtcSmem<HD, fp8>::BYTES, DtcSmem<HD, bf16>::BYTES);
    printf("| kv | rows | keys | us | GB/s | %% copy | max err | blocks an SM |\n"
           "|---|---:|---:|---:|---:|---:|---:|---:|\n");
    const Case cases[] = {{64, 1536, 1536}, {64, 1000, 2000}, {32, 1000, 2000},
                          {16, 1000, 2000}, {128, 1000, 2000}, {8, 2048, 2048},
                          {1, 1024, 1024},  {1, 2048, 2048},  {1, 4096, 4096}};
    for (const Case& c : cases) run_case<fp8>(c, copy, "fp8", attn_decode_tc_fp8_128);
    for (const Case& c : cases) run_case<bf16>(c, copy, "bf16", attn_decode_tc_128);
    return 0;
}
