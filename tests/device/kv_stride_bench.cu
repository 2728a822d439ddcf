// Does the paged KV cache's layout cost decode attention DRAM bandwidth? The cache stores a
// token's keys for all KV heads together (slot * kv_dim + head * head_dim), so a block reading
// one head's keys reads pieces of head_dim elements (128 bytes for fp8, 256 for bf16 at head_dim
// 128) kv_dim apart (8 KV heads); the alternative is one head's keys of a 16-token page stored
// together (2 KB / 4 KB contiguous). This reads the same bytes both ways, K and V from two
// caches, in decode attention's shape (a block per (row, head, split of SPLIT keys), 16-key
// tiles, 16-byte loads, a warp a tile, TILES tiles in flight a warp), over pages that are the
// row's own and consecutive or scattered over the cache (as a long-running server's free list
// leaves them), and prints each rate against a plain copy.
//
// Build and run on the GPU machine: tests/device/run.sh kvstride.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "check.cuh"

constexpr int HEADS = 8, PAGE = 16, WARPS = 4, SPLIT = 384;

// Block (seq, head, split) xors its keys of `head` (K then V) as 16-byte loads. head_major: a
// page's keys of one head are contiguous ((page * HEADS + head) * PAGE + key % PAGE) * piece;
// else key-major ((page * PAGE + key % PAGE) * HEADS + head) * piece.
template <int PIECE, int TILES>
__global__ void read_kv(const uint4* __restrict__ kc, const uint4* __restrict__ vc,
                        const int* __restrict__ pages, int keys, int head_major,
                        unsigned* __restrict__ sink) {
    constexpr int LOADS = PAGE * PIECE / 16 / 32;  // 16-byte loads a lane a tile, K or V
    const int seq = blockIdx.x, head = blockIdx.y, lane = threadIdx.x & 31,
              warp = threadIdx.x >> 5;
    const int k_begin = blockIdx.z * SPLIT, k_end = min(keys, k_begin + SPLIT);
    const int* table = pages + (size_t)seq * (keys / PAGE);
    unsigned acc = 0;
    for (int t0 = k_begin / PAGE + warp; t0 * PAGE < k_end; t0 += WARPS * TILES) {
        uint4 v[TILES][2 * LOADS];
#pragma unroll
        for (int f = 0; f < TILES; f++) {
            const int t = t0 + f * WARPS;
            const bool in = t * PAGE < k_end;
            const size_t page = in ? table[t] : 0;
#pragma unroll
            for (int i = 0; i < LOADS; i++) {
                const int x = lane + 32 * i, key = x / (PIECE / 16), c = x % (PIECE / 16);
                const size_t at =
                    head_major ? ((page * HEADS + head) * PAGE + key) * PIECE + c * 16
                               : ((page * PAGE + key) * HEADS + head) * PIECE + c * 16;
                v[f][i] = in ? __ldg(kc + at / 16) : make_uint4(0, 0, 0, 0);
                v[f][LOADS + i] = in ? __ldg(vc + at / 16) : make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int f = 0; f < TILES; f++)
#pragma unroll
            for (int i = 0; i < 2 * LOADS; i++) acc ^= v[f][i].x ^ v[f][i].y ^ v[f][i].z ^ v[f][i].w;
    }
    if (acc == 0x12345678u) sink[0] = acc;
}

// Dynamic shared memory that leaves room for only `per_sm` blocks an SM (0: as many as fit).
static int smem_for(int per_sm) {
    if (per_sm == 0) return 0;
    int dev, sm_bytes;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sm_bytes, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
    return sm_bytes / per_sm - 1024 - 256;  // the runtime reserves 1 KB a block
}

template <int PIECE, int TILES>
static void sweep(const uint4* kc, const uint4* vc, size_t cache_bytes, unsigned* sink,
                  double copy, int per_sm) {
    const int smem = smem_for(per_sm);
    CK(cudaFuncSetAttribute(read_kv<PIECE, TILES>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            smem));
    const size_t page_bytes = (size_t)PAGE * HEADS * PIECE;
    const int total_pages = (int)(cache_bytes / page_bytes);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int keys : {1536}) {
        for (int seqs : {16, 64, 128}) {
            const int np = keys / PAGE;
            if (seqs * np > total_pages) continue;
            const size_t used = 2ull * seqs * keys * HEADS * PIECE;
            printf("piece %3d B, %d tiles a warp, %s blocks an SM, %4d seqs x %5d keys (%5.0f MB "
                   "K+V):\n",
                   PIECE, TILES, per_sm ? std::to_string(per_sm).c_str() : "all", seqs, keys,
                   used / 1e6);
            for (int scattered : {0, 1}) {
                // The rows' pages: consecutive, or a shuffle of the whole cache's pages.
                std::vector<int> perm(total_pages);
                for (int i = 0; i < total_pages; i++) perm[i] = i;
                if (scattered) {
                    srand(7);
                    for (int i = total_pages - 1; i > 0; i--) std::swap(perm[i], perm[rand() % (i + 1)]);
                }
                int* pages;
                CK(cudaMalloc(&pages, sizeof(int) * seqs * np));
                CK(cudaMemcpy(pages, perm.data(), sizeof(int) * seqs * np, cudaMemcpyHostToDevice));
                printf("  %-11s", scattered ? "scattered" : "consecutive");
                for (int hm : {0, 1}) {
                    dim3 grid(seqs, HEADS, (keys + SPLIT - 1) / SPLIT);
                    read_kv<PIECE, TILES><<<grid, 32 * WARPS, smem>>>(kc, vc, pages, keys, hm, sink);
                    CK(cudaEventRecord(e0));
                    for (int i = 0; i < 10; i++)
                        read_kv<PIECE, TILES><<<grid, 32 * WARPS, smem>>>(kc, vc, pages, keys, hm, sink);
                    CK(cudaEventRecord(e1));
                    CK(cudaEventSynchronize(e1));
                    float ms;
                    CK(cudaEventElapsedTime(&ms, e0, e1));
                    CK(cudaGetLastError());
                    const double rate = used * 10 / (ms * 1e-3);
                    printf("  %s %6.1f us %.2f TB/s (%3.0f%%)", hm ? "head-major" : "key-major ",
                           ms * 100, rate / 1e12, 100 * rate / copy);
                }
                printf("\n");
                CK(cudaFree(pages));
            }
        }
    }
}

int main() {
    const size_t bytes = 4ull << 30;  // each cache: larger than L2 many times over
    void *k, *v;
    CK(cudaMalloc(&k, bytes));
    CK(cudaMalloc(&v, bytes));
    CK(cudaMemset(k, 1, bytes));
    CK(cudaMemset(v, 2, bytes));
    unsigned* sink;
    CK(cudaMalloc(&sink, 4));
    const double copy = copy_rate();
    printf("copy %.2f TB/s (read + written)\n", copy / 1e12);
    const uint4 *kc = (const uint4*)k, *vc = (const uint4*)v;
    // The layouts at the shape's own occupancy (a small kernel: every block fits), fp8 and bf16.
    sweep<128, 1>(kc, vc, bytes, sink, copy, 0);
    sweep<256, 1>(kc, vc, bytes, sink, copy, 0);
    // Bytes in flight: fp8 with the blocks an SM that decode attention's registers and shared
    // memory allow (5 with one tile in flight a warp, 4 with two), against more tiles a warp.
    for (int per_sm : {5, 4, 3}) {
        sweep<128, 1>(kc, vc, bytes, sink, copy, per_sm);
        sweep<128, 2>(kc, vc, bytes, sink, copy, per_sm);
        sweep<128, 4>(kc, vc, bytes, sink, copy, per_sm);
    }
    return 0;
}
