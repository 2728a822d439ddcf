// Grouped expert GEMM for prefill: Y[rows of e, :] = X[rows of e, :] . W_e^T for every expert e
// in one launch, tensor cores (mma.sync m16n8k16, bf16 in, f32 out). X holds the rows gathered
// in expert order (bf16 [slots, K]), each expert's run padded to a multiple of MG_BM slots; W
// the experts' matrices back to back (bf16 [N, K] each, w_stride elements apart); Y f32
// [slots, N]. A block computes one MG_BM x MG_BN tile: tiles[blockIdx.y] = (expert, first slot)
// of its rows, blockIdx.x its columns. Any skew of rows over experts costs at most one partial
// tile per expert, where one cuBLASLt GEMM per expert (or a batched one padded to the longest
// run) paid per launch or per padded row.
//
// 8 warps in 2 x 4, each 64 x 32 of the tile; K in steps of MG_BK through a two-stage cp.async
// pipeline; smem rows padded to MG_LDS elements so ldmatrix reads are conflict-free.
#include "mma.cuh"

#define MG_BM 128
#define MG_BN 128
#define MG_BK 32
#define MG_LDS 40

__device__ __forceinline__ void mg_load_tile(bf16 (*s)[MG_LDS], const bf16* __restrict__ g,
                                             int K, int k0) {
    // 128 rows x 32 values = 512 chunks of 16 bytes, two per thread.
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int c = threadIdx.x + i * 256;
        const int row = c >> 2, col = (c & 3) * 8;
        cp_async16(&s[row][col], g + (size_t)row * K + k0 + col);
    }
}

extern "C" __global__ void __launch_bounds__(256)
    moe_gemm_bf16(const bf16* __restrict__ W, long long w_stride, const bf16* __restrict__ X,
                  float* __restrict__ Y, const int2* __restrict__ tiles, int N, int K) {
    pdl_begin();
    __shared__ __align__(16) bf16 As[2][MG_BM][MG_LDS];
    __shared__ __align__(16) bf16 Bs[2][MG_BN][MG_LDS];
    const int2 tile = tiles[blockIdx.y];
    const int n0 = blockIdx.x * MG_BN;
    const bf16* a = X + (size_t)tile.y * K;
    const bf16* b = W + (size_t)tile.x * w_stride + (size_t)n0 * K;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp >> 2, wn = warp & 3;
    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) acc[i][j][r] = 0.f;

    const int steps = K / MG_BK;
    mg_load_tile(As[0], a, K, 0);
    mg_load_tile(Bs[0], b, K, 0);
    cp_async_commit();
    for (int s = 0; s < steps; s++) {
        const int cur = s & 1;
        if (s + 1 < steps) {
            mg_load_tile(As[cur ^ 1], a, K, (s + 1) * MG_BK);
            mg_load_tile(Bs[cur ^ 1], b, K, (s + 1) * MG_BK);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait_all();
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < MG_BK / 16; kk++) {
            uint32_t af[4][4], bfr[4][2];
#pragma unroll
            for (int mi = 0; mi < 4; mi++)
                ldmatrix_x4(af[mi], &As[cur][wm * 64 + mi * 16 + (lane & 15)][kk * 16 + (lane >> 4) * 8]);
#pragma unroll
            for (int nj = 0; nj < 2; nj++) {
                uint32_t r[4];
                ldmatrix_x4(r, &Bs[cur][wn * 32 + nj * 16 + (lane & 7) + ((lane >> 4) << 3)]
                                  [kk * 16 + ((lane >> 3) & 1) * 8]);
                bfr[2 * nj][0] = r[0];
                bfr[2 * nj][1] = r[1];
                bfr[2 * nj + 1][0] = r[2];
                bfr[2 * nj + 1][1] = r[3];
            }
#pragma unroll
            for (int mi = 0; mi < 4; mi++)
#pragma unroll
                for (int ni = 0; ni < 4; ni++) mma_bf16(acc[mi][ni], af[mi], bfr[ni][0], bfr[ni][1]);
        }
        __syncthreads();
    }
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mi = 0; mi < 4; mi++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++) {
            const int row = tile.y + wm * 64 + mi * 16 + g;
            const int col = n0 + wn * 32 + ni * 8 + 2 * t;
            *reinterpret_cast<float2*>(Y + (size_t)row * N + col) =
                make_float2(acc[mi][ni][0], acc[mi][ni][1]);
            *reinterpret_cast<float2*>(Y + (size_t)(row + 8) * N + col) =
                make_float2(acc[mi][ni][2], acc[mi][ni][3]);
        }
}
