// Grouped expert GEMM for prefill: Y[rows of e, :] = X[rows of e, :] . W_e^T for every expert e
// in one launch, tensor cores (mma.sync m16n8k16, bf16 in, f32 out). X holds the rows gathered
// in expert order (bf16 [slots, K]), each expert's run padded to a multiple of MG_BM slots; W
// the experts' matrices back to back (bf16 [N, K] each, w_stride elements apart); Y f32
// [slots, N]. A block computes one MG_BM x MG_BN tile: tiles[blockIdx.y] = (expert, first slot)
// of its rows, blockIdx.x its columns. Any skew of rows over experts costs at most one partial
// tile per expert, where one cuBLASLt GEMM per expert (or a batched one padded to the longest
// run) paid per launch or per padded row.
//
// 8 warps in 2 x 4, each 64 x 64 of the tile (four A and four B fragment loads feed 32 mma);
// K in steps of MG_BK through an MG_STAGES-deep cp.async pipeline with one barrier a step;
// smem rows padded to MG_LDS elements so ldmatrix reads are conflict-free. Dynamic shared
// memory: MG_SMEM bytes.
#include "mma.cuh"

#define MG_BM 128
#define MG_BN 256
#define MG_BK 32
#define MG_LDS 40
#define MG_STAGES 3
#define MG_STAGE_ELEMS ((MG_BM + MG_BN) * MG_LDS)
#define MG_SMEM (MG_STAGES * MG_STAGE_ELEMS * 2)

// ROWS rows x MG_BK values of g (rows K apart) from column k0 into s: 16-byte copies, 256
// threads.
template <int ROWS>
__device__ __forceinline__ void mg_load(bf16 (*s)[MG_LDS], const bf16* __restrict__ g, int K,
                                        int k0) {
#pragma unroll
    for (int i = 0; i < ROWS * 4 / 256; i++) {
        const int c = threadIdx.x + i * 256;
        const int row = c >> 2, col = (c & 3) * 8;
        cp_async16(&s[row][col], g + (size_t)row * K + k0 + col);
    }
}

extern "C" __global__ void __launch_bounds__(256, 1)
    moe_gemm_bf16(const bf16* __restrict__ W, long long w_stride, const bf16* __restrict__ X,
                  float* __restrict__ Y, const int2* __restrict__ tiles, int N, int K) {
    pdl_begin();
    extern __shared__ __align__(16) unsigned char mg_smem[];
    auto stage_a = [&](int st) {
        return reinterpret_cast<bf16(*)[MG_LDS]>(mg_smem + (size_t)st * MG_STAGE_ELEMS * 2);
    };
    auto stage_b = [&](int st) {
        return reinterpret_cast<bf16(*)[MG_LDS]>(mg_smem +
                                                 ((size_t)st * MG_STAGE_ELEMS + MG_BM * MG_LDS) * 2);
    };
    const int2 tile = tiles[blockIdx.y];
    const int n0 = blockIdx.x * MG_BN;
    const bf16* a = X + (size_t)tile.y * K;
    const bf16* b = W + (size_t)tile.x * w_stride + (size_t)n0 * K;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp >> 2, wn = warp & 3;
    float acc[4][8][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) acc[i][j][r] = 0.f;

    const int steps = K / MG_BK;
    // Stages 0 .. MG_STAGES - 2 in flight; a group is committed every step, empty or not, so
    // that wait<MG_STAGES - 2> always means "step s has landed".
#pragma unroll
    for (int st = 0; st < MG_STAGES - 1; st++) {
        if (st < steps) {
            mg_load<MG_BM>(stage_a(st), a, K, st * MG_BK);
            mg_load<MG_BN>(stage_b(st), b, K, st * MG_BK);
        }
        cp_async_commit();
    }
    for (int s = 0; s < steps; s++) {
        cp_async_wait<MG_STAGES - 2>();
        // Step s is visible to every thread, and every warp is done with step s - 1's stage,
        // which the load below refills.
        __syncthreads();
        const int next = s + MG_STAGES - 1;
        if (next < steps) {
            mg_load<MG_BM>(stage_a(next % MG_STAGES), a, K, next * MG_BK);
            mg_load<MG_BN>(stage_b(next % MG_STAGES), b, K, next * MG_BK);
        }
        cp_async_commit();
        bf16(*as)[MG_LDS] = stage_a(s % MG_STAGES);
        bf16(*bs)[MG_LDS] = stage_b(s % MG_STAGES);
#pragma unroll
        for (int kk = 0; kk < MG_BK / 16; kk++) {
            uint32_t af[4][4], bfr[8][2];
#pragma unroll
            for (int mi = 0; mi < 4; mi++)
                ldmatrix_x4(af[mi], &as[wm * 64 + mi * 16 + (lane & 15)][kk * 16 + (lane >> 4) * 8]);
#pragma unroll
            for (int nj = 0; nj < 4; nj++) {
                uint32_t r[4];
                ldmatrix_x4(r, &bs[wn * 64 + nj * 16 + (lane & 7) + ((lane >> 4) << 3)]
                                  [kk * 16 + ((lane >> 3) & 1) * 8]);
                bfr[2 * nj][0] = r[0];
                bfr[2 * nj][1] = r[1];
                bfr[2 * nj + 1][0] = r[2];
                bfr[2 * nj + 1][1] = r[3];
            }
#pragma unroll
            for (int mi = 0; mi < 4; mi++)
#pragma unroll
                for (int ni = 0; ni < 8; ni++) mma_bf16(acc[mi][ni], af[mi], bfr[ni][0], bfr[ni][1]);
        }
    }
    cp_async_wait_all();
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mi = 0; mi < 4; mi++)
#pragma unroll
        for (int ni = 0; ni < 8; ni++) {
            const int row = tile.y + wm * 64 + mi * 16 + g;
            const int col = n0 + wn * 64 + ni * 8 + 2 * t;
            *reinterpret_cast<float2*>(Y + (size_t)row * N + col) =
                make_float2(acc[mi][ni][0], acc[mi][ni][1]);
            *reinterpret_cast<float2*>(Y + (size_t)(row + 8) * N + col) =
                make_float2(acc[mi][ni][2], acc[mi][ni][3]);
        }
}
