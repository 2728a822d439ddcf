// Does the paged KV cache's layout cost decode attention DRAM bandwidth? The cache stores a
// token's keys for all KV heads together (slot * kv_dim + head * head_dim), so a block reading
// one head's keys reads 256-byte pieces (head_dim 128, bf16) 2 KB apart (8 KV heads); the
// alternative is one head's keys of a 16-token page stored together (4 KB contiguous). This
// reads the same bytes both ways, with the decode kernel's access shape (a block per (row, head)
// of 16-key tiles, 16-byte loads, one warp a tile), and prints each rate against a plain copy.
//
// Build and run on the GPU machine: tests/device/run.sh kvstride.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.cuh"

constexpr int HEADS = 8, PIECE = 256, PAGE = 16, WARPS = 4, TILES_IN_FLIGHT = 4;

// Block (seq, head) sums the seq's `keys` keys of `head` as 16-byte loads. head_major: a page's
// keys of one head are contiguous (page * HEADS + head) * PAGE * PIECE; else key-major: slot *
// HEADS * PIECE + head * PIECE. Pages are the seq's own, consecutive.
__global__ void read_kv(const uint4* __restrict__ kv, int keys, int head_major,
                        unsigned* __restrict__ sink) {
    const int seq = blockIdx.x, head = blockIdx.y, lane = threadIdx.x & 31,
              warp = threadIdx.x >> 5;
    const size_t seq_base = (size_t)seq * keys * HEADS * PIECE;
    unsigned acc = 0;
    // A warp takes every WARPS-th tile of 16 keys: 16 x 256 B = 256 16-byte loads, 8 a lane.
    for (int tile = warp; tile * PAGE < keys; tile += WARPS * TILES_IN_FLIGHT) {
        uint4 v[TILES_IN_FLIGHT][8];
#pragma unroll
        for (int f = 0; f < TILES_IN_FLIGHT; f++) {
            const int t = tile + f * WARPS;
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const int x = lane + 32 * i, key = t * PAGE + x / 16, c = x % 16;
                size_t at;
                if (head_major)
                    at = seq_base + ((size_t)(key / PAGE) * HEADS + head) * PAGE * PIECE +
                         (key % PAGE) * PIECE + c * 16;
                else
                    at = seq_base + (size_t)key * HEADS * PIECE + head * PIECE + c * 16;
                v[f][i] = t * PAGE < keys ? __ldg(kv + at / 16) : make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int f = 0; f < TILES_IN_FLIGHT; f++)
#pragma unroll
            for (int i = 0; i < 8; i++) acc ^= v[f][i].x ^ v[f][i].y ^ v[f][i].z ^ v[f][i].w;
    }
    if (acc == 0x12345678u) sink[0] = acc;
}

int main() {
    const size_t bytes = 2ull << 30;
    void *a, *b;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(a, 1, bytes));
    unsigned* sink;
    CK(cudaMalloc(&sink, 4));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float ms;
    CK(cudaMemcpy(b, a, bytes / 2, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e0));
    for (int i = 0; i < 5; i++) CK(cudaMemcpy(b, a, bytes / 2, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    const double copy = 2.0 * (bytes / 2) * 5 / (ms * 1e-3);
    printf("copy %.2f TB/s (read + written)\n", copy / 1e12);
    for (int keys : {1536, 4096}) {
        for (int seqs : {32, 64, 128}) {
            const size_t used = (size_t)seqs * keys * HEADS * PIECE;
            if (used > bytes) continue;
            printf("%4d seqs x %5d keys (%5.0f MB):", seqs, keys, used / 1e6);
            for (int hm : {0, 1}) {
                dim3 grid(seqs, HEADS);
                read_kv<<<grid, 32 * WARPS>>>((const uint4*)a, keys, hm, sink);
                CK(cudaEventRecord(e0));
                for (int i = 0; i < 10; i++) read_kv<<<grid, 32 * WARPS>>>((const uint4*)a, keys, hm, sink);
                CK(cudaEventRecord(e1));
                CK(cudaEventSynchronize(e1));
                CK(cudaEventElapsedTime(&ms, e0, e1));
                CK(cudaGetLastError());
                const double rate = used * 10 / (ms * 1e-3);
                printf("  %s %6.1f us %.2f TB/s (%.0f%% of copy)", hm ? "head-major" : "key-major",
                       ms * 100, rate / 1e12, 100 * rate / copy);
            }
            printf("\n");
        }
    }
    return 0;
}
