// Grouped expert GEMM for prefill: Y[rows of e, :] = X[rows of e, :] . W_e^T for every expert e
// in one launch, tensor cores (mma.sync m16n8k16, bf16 in, f32 out). X holds the rows gathered
// in expert order (bf16 [slots, K]), each expert's run padded to a multiple of MG_BM slots; W
// the experts' matrices back to back (bf16 [N, K] each, w_stride elements apart); Y f32
// [slots, N]. A block computes one MG_BM x MG_BN tile: tiles[blockIdx.y] = (expert, first slot)
// of its rows, blockIdx.x its columns. Any skew of rows over experts costs at most one partial
// tile per expert, where one cuBLASLt GEMM per expert (or a batched one padded to the longest
// run) paid per launch or per padded row.
//
// moe_gemm_silu_bf16 is the gate/up GEMM with the activation fused: W_e is [2 inter, K] (gate
// rows, then up rows), the tile's 256 columns are 128 gate columns and the same 128 up columns
// (each warp holds 32 of each), and Y is act = silu(gate) * up in bf16 [slots, inter] (N = inter).
//
// 8 warps in 2 x 4, each 64 x 64 of the tile (four A and four B fragment loads feed 32 mma);
// K in steps of MG_BK through an MG_STAGES-deep cp.async pipeline with one barrier a step;
// smem rows padded to MG_LDS elements so ldmatrix reads are conflict-free. Dynamic shared
// memory: MG_SMEM bytes.
#include "mma.cuh"

#define MG_BM 128
#define MG_BN 256
#define MG_BK 64
#define MG_LDS 72
#define MG_STAGES 4
#define MG_STAGE_ELEMS ((MG_BM + MG_BN) * MG_LDS)
#define MG_SMEM (MG_STAGES * MG_STAGE_ELEMS * 2)

// ROWS rows x MG_BK values (rows K apart) from column k0 into s: 16-byte copies, 256 threads.
// Rows below 128 come from lo, the others from hi (row r: hi + (r - 128) K).
template <int ROWS>
__device__ __forceinline__ void mg_load(bf16 (*s)[MG_LDS], const bf16* __restrict__ lo,
                                        const bf16* __restrict__ hi, int K, int k0) {
    constexpr int CH = MG_BK / 8;  // 16-byte copies per row
#pragma unroll
    for (int i = 0; i < ROWS * CH / 256; i++) {
        const int c = threadIdx.x + i * 256;
        const int row = c / CH, col = (c % CH) * 8;
        const bf16* g = row < 128 ? lo + (size_t)row * K : hi + (size_t)(row - 128) * K;
        cp_async16(&s[row][col], g + k0 + col);
    }
}

template <bool SILU>
__device__ __forceinline__ void moe_gemm_body(const bf16* __restrict__ W, long long w_stride,
                                              const bf16* __restrict__ X, void* __restrict__ Y,
                                              const int2* __restrict__ tiles, int N, int K) {
    extern __shared__ __align__(16) unsigned char mg_smem[];
    auto stage_a = [&](int st) {
        return reinterpret_cast<bf16(*)[MG_LDS]>(mg_smem + (size_t)st * MG_STAGE_ELEMS * 2);
    };
    auto stage_b = [&](int st) {
        return reinterpret_cast<bf16(*)[MG_LDS]>(mg_smem +
                                                 ((size_t)st * MG_STAGE_ELEMS + MG_BM * MG_LDS) * 2);
    };
    const int2 tile = tiles[blockIdx.y];
    const bf16* a = X + (size_t)tile.y * K;
    // B rows 0..127 and 128..255: the tile's gate and up rows with SILU (N = inter), else 256
    // consecutive rows.
    const int n0 = blockIdx.x * (SILU ? MG_BN / 2 : MG_BN);
    const bf16* b = W + (size_t)tile.x * w_stride + (size_t)n0 * K;
    const bf16* b_hi = SILU ? b + (size_t)N * K : b + (size_t)128 * K;
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
            mg_load<MG_BM>(stage_a(st), a, a + (size_t)128 * K, K, st * MG_BK);
            mg_load<MG_BN>(stage_b(st), b, b_hi, K, st * MG_BK);
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
            mg_load<MG_BM>(stage_a(next % MG_STAGES), a, a + (size_t)128 * K, K, next * MG_BK);
            mg_load<MG_BN>(stage_b(next % MG_STAGES), b, b_hi, K, next * MG_BK);
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
                // n-tiles 2 nj, 2 nj + 1: with SILU, 0-3 the warp's gate columns, 4-7 its up ones.
                const int b0 = SILU ? (nj >> 1) * 128 + wn * 32 + (nj & 1) * 16 : wn * 64 + nj * 16;
                ldmatrix_x4(r, &bs[b0 + (lane & 7) + ((lane >> 4) << 3)]
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
    for (int mi = 0; mi < 4; mi++) {
        const int row = tile.y + wm * 64 + mi * 16 + g;
        if constexpr (SILU) {
            bf16* y = static_cast<bf16*>(Y);
#pragma unroll
            for (int ni = 0; ni < 4; ni++) {
                const int col = n0 + wn * 32 + ni * 8 + 2 * t;
                float v[4];
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    const float gv = acc[mi][ni][r];
                    v[r] = gv / (1.f + expf(-gv)) * acc[mi][ni + 4][r];
                }
                *reinterpret_cast<__nv_bfloat162*>(y + (size_t)row * N + col) =
                    __floats2bfloat162_rn(v[0], v[1]);
                *reinterpret_cast<__nv_bfloat162*>(y + (size_t)(row + 8) * N + col) =
                    __floats2bfloat162_rn(v[2], v[3]);
            }
        } else {
            float* y = static_cast<float*>(Y);
#pragma unroll
            for (int ni = 0; ni < 8; ni++) {
                const int col = n0 + wn * 64 + ni * 8 + 2 * t;
                *reinterpret_cast<float2*>(y + (size_t)row * N + col) =
                    make_float2(acc[mi][ni][0], acc[mi][ni][1]);
                *reinterpret_cast<float2*>(y + (size_t)(row + 8) * N + col) =
                    make_float2(acc[mi][ni][2], acc[mi][ni][3]);
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(256, 1)
    moe_gemm_bf16(const bf16* __restrict__ W, long long w_stride, const bf16* __restrict__ X,
                  float* __restrict__ Y, const int2* __restrict__ tiles, int N, int K) {
    pdl_begin();
    moe_gemm_body<false>(W, w_stride, X, Y, tiles, N, K);
}

extern "C" __global__ void __launch_bounds__(256, 1)
    moe_gemm_silu_bf16(const bf16* __restrict__ W, long long w_stride, const bf16* __restrict__ X,
                       bf16* __restrict__ Y, const int2* __restrict__ tiles, int N, int K) {
    pdl_begin();
    moe_gemm_body<true>(W, w_stride, X, Y, tiles, N, K);
}
