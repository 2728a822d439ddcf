// fp8 weights past the GEMV rows (W8A16): y = x . (w * scale)^T for x [M, K] bf16 and w [N, K]
// fp8 e4m3 with a scale a row, reading the fp8 bytes themselves (dequantizing them to bf16
// costs 5 bytes of traffic a weight each step instead of 1).
//
// A block is FG_WARPS warps of FG_TILES 16-feature tiles each (FG_FEATURES features) over one
// tile of FG_ROWS rows, and K split into gridDim.z parts of chunks_per_split FG_KC-value chunks.
// A chunk's weight rows and activation rows go to shared memory through a pipeline of cp.async
// stages (several chunks in flight), and every warp reads the activations from there, so they
// cost FG_ROWS * 2 / FG_FEATURES bytes of L2 traffic a weight byte.
//
// The products are mma.sync m16n8k16 with the weight rows (features) as M and the activation
// rows as N, as moe_tc.cu: lane (g = lane / 4, q = lane % 4) reads 8 weights (k0 + 8q ..
// k0 + 8q + 7) of rows g and g + 8 of each 16-row tile, widens them to f16 exactly in
// registers (one conversion instruction a pair), and feeds the first half to one mma and the
// second half to another; the activations are read in the same k order, so each mma's k slots
// hold the same permutation of k0 .. k0 + 31 for A and B and the dot products are unchanged.
//
// The mma is f16, so the activations go in as f16 too: each thread turns the bf16 pieces it
// copied into a stage into f16 times 2^-FG_XSHIFT before the stage's barrier. bf16's 8
// significant bits fit f16's 11, so that is exact for |x| >= 2^(FG_XSHIFT - 17) and within
// 2^(FG_XSHIFT - 25) below; the shift puts f16's overflow at 2^(16 + FG_XSHIFT), beyond any
// activation; the sums are multiplied back by 2^FG_XSHIFT (exact).
//
// One part writes the output itself; with more, each writes f32 partial sums and
// gemm_fp8_reduce adds them in part order. How K is split depends only on N and K (and the
// GPU), never on M, so a row's output does not depend on the other rows.
#include "mma.cuh"

#define FG_WARPS 8
#define FG_MIN_BLOCKS 2  // blocks an SM the registers are sized for (MAX_BLOCKS_PER_SM)
#define FG_TILES 2
#define FG_FEATURES (FG_WARPS * FG_TILES * 16)
#define FG_ROWS 64
#define FG_NT (FG_ROWS / 8)
#define FG_KC 64
#define FG_SUB (FG_KC / 32)
#define FG_XSHIFT 4
// Bytes a weight row takes in shared memory: 32 bytes of padding put the rows g = 0..3 a half
// warp's 8-byte reads hit a quarter of the banks each.
#define FG_WSTRIDE (FG_KC + 32)
// bf16 an activation row takes: 64 bytes of padding put rows g and g + 1 half the banks apart,
// so a quarter warp's 16-byte reads (rows 2p and 2p + 1, four lanes each) hit every bank once.
#define FG_XSTRIDE (FG_KC + 32)
// A pipeline stage: a chunk's weight rows, then its activation rows.
#define FG_STAGE_BYTES (FG_FEATURES * FG_WSTRIDE + FG_ROWS * FG_XSTRIDE * 2)

// A thread's share of every stage's copies, the same pieces of each chunk: FG_WPIECES 16-byte
// pieces of weight rows (rows wr + j * FG_WROWS_STEP, bytes kw ..) and FG_XPIECES of activation
// rows (rows xr + j * FG_XROWS_STEP, values kx ..); bit j of w_live / x_live: that row exists.
#define FG_WPIECES (FG_FEATURES * FG_KC / 16 / (FG_WARPS * 32))
#define FG_WROWS_STEP (FG_WARPS * 32 / (FG_KC / 16))
#define FG_XPIECES (FG_ROWS * FG_KC / 8 / (FG_WARPS * 32))
#define FG_XROWS_STEP (FG_WARPS * 32 / (FG_KC / 8))
struct FgCopies {
    const uint8_t* w;
    const bf16* x;
    int wr, kw, xr, kx;
    unsigned w_live, x_live;
};

__device__ __forceinline__ FgCopies fg_copies(const uint8_t* __restrict__ w,
                                              const bf16* __restrict__ x, int fb, int row0,
                                              int M, int N, int K) {
    FgCopies c;
    c.wr = threadIdx.x / (FG_KC / 16);
    c.kw = threadIdx.x % (FG_KC / 16) * 16;
    c.xr = threadIdx.x / (FG_KC / 8);
    c.kx = threadIdx.x % (FG_KC / 8) * 8;
    c.w = w + (size_t)(fb + c.wr) * K + c.kw;
    c.x = x + (size_t)(row0 + c.xr) * K + c.kx;
    c.w_live = c.x_live = 0;
#pragma unroll
    for (int j = 0; j < FG_WPIECES; j++) c.w_live |= (fb + c.wr + j * FG_WROWS_STEP < N) << j;
#pragma unroll
    for (int j = 0; j < FG_XPIECES; j++) c.x_live |= (row0 + c.xr + j * FG_XROWS_STEP < M) << j;
    return c;
}

// Starts copying chunk c (K values c * FG_KC ..) of the block's weight and activation rows into
// stage st: rows past N or M and values past K as zeros. K % 16 == 0.
__device__ __forceinline__ void fg_stage(unsigned char* st, const FgCopies& cp, int K, int c) {
    const int k0 = c * FG_KC;
    const bool wk = k0 + cp.kw < K, xk = k0 + cp.kx < K;
#pragma unroll
    for (int j = 0; j < FG_WPIECES; j++) {
        unsigned char* dst = st + (cp.wr + j * FG_WROWS_STEP) * FG_WSTRIDE + cp.kw;
        if (wk && (cp.w_live >> j & 1))
            cp_async16(dst, cp.w + (size_t)j * FG_WROWS_STEP * K + k0);
        else
            *reinterpret_cast<uint4*>(dst) = uint4{};
    }
    bf16* xs = reinterpret_cast<bf16*>(st + FG_FEATURES * FG_WSTRIDE);
#pragma unroll
    for (int j = 0; j < FG_XPIECES; j++) {
        bf16* dst = xs + (cp.xr + j * FG_XROWS_STEP) * FG_XSTRIDE + cp.kx;
        if (xk && (cp.x_live >> j & 1))
            cp_async16(dst, cp.x + (size_t)j * FG_XROWS_STEP * K + k0);
        else
            *reinterpret_cast<uint4*>(dst) = uint4{};
    }
}

// The thread's own activation pieces of stage st (copied by fg_stage, complete) from bf16 to
// f16 times 2^-FG_XSHIFT, in place. Zero pieces stay zero.
__device__ __forceinline__ void fg_x_to_f16(unsigned char* st, const FgCopies& cp) {
    const __nv_bfloat162 down = __floats2bfloat162_rn(0x1p-4f, 0x1p-4f);
    static_assert(FG_XSHIFT == 4, "down is 2^-FG_XSHIFT");
    bf16* xs = reinterpret_cast<bf16*>(st + FG_FEATURES * FG_WSTRIDE);
#pragma unroll
    for (int j = 0; j < FG_XPIECES; j++) {
        uint4* p = reinterpret_cast<uint4*>(xs + (cp.xr + j * FG_XROWS_STEP) * FG_XSTRIDE + cp.kx);
        uint4 v = *p;
        uint32_t* u = reinterpret_cast<uint32_t*>(&v);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            __nv_bfloat162 b = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&u[i]), down);
            const uint32_t d = *reinterpret_cast<const uint32_t*>(&b);
            u[i] = pack_f16(__uint_as_float(d << 16), __uint_as_float(d & 0xffff0000u));
        }
        *p = v;
    }
}

// Waits until at most n committed copy groups are in flight (n < 8).
__device__ __forceinline__ void fg_wait(int n) {
    switch (n) {
        case 0: cp_async_wait<0>(); break;
        case 1: cp_async_wait<1>(); break;
        case 2: cp_async_wait<2>(); break;
        case 3: cp_async_wait<3>(); break;
        case 4: cp_async_wait<4>(); break;
        case 5: cp_async_wait<5>(); break;
        case 6: cp_async_wait<6>(); break;
        default: cp_async_wait<7>(); break;
    }
}

// y[o] as mode says: 0 y = v (f32), 1 y = v (bf16), 2 y += v (f32).
__device__ __forceinline__ void fg_store(void* y, size_t o, float v, int mode) {
    if (mode == 1)
        reinterpret_cast<bf16*>(y)[o] = __float2bfloat16(v);
    else if (mode == 2)
        reinterpret_cast<float*>(y)[o] += v;
    else
        reinterpret_cast<float*>(y)[o] = v;
}

// The warp's sums to y as fg_store's mode says, each times its feature's scale (none: partial
// sums, without the weights' scales, into f32); tile t's features start at f0 + t * tile_step.
template <int TILES>
__device__ __forceinline__ void fg_write(const float (&acc)[TILES][FG_NT][4], void* y,
                                         const float* __restrict__ scale, int f0, int tile_step,
                                         int row0, int live, int N, int mode) {
    const int g = (threadIdx.x & 31) >> 2, q = threadIdx.x & 3;
#pragma unroll
    for (int t = 0; t < TILES; t++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int f = f0 + tile_step * t + 8 * h + g;
            if (f >= N) continue;
            // The activations went in times 2^-FG_XSHIFT.
            const float sc = (scale ? scale[f] : 1.f) * (float)(1 << FG_XSHIFT);
#pragma unroll
            for (int nt = 0; nt < FG_NT; nt++)
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    const int r = 8 * nt + 2 * q + i;
                    if (r < live)
                        fg_store(y, (size_t)(row0 + r) * N + f, acc[t][nt][2 * h + i] * sc, mode);
                }
        }
}

// The main loop over the block's n chunks for NT live 8-row tiles (rows past M are zeros in
// shared memory; tiles past NT are not multiplied): the sums, unscaled, in acc.
template <int NT>
__device__ __forceinline__ void fg_mainloop(float (&acc)[FG_TILES][FG_NT][4],
                                            const FgCopies& cp, int K, int c_begin, int n,
                                            int stages) {
    extern __shared__ __align__(16) unsigned char fg_smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    for (int s = 0; s < stages - 1; s++) {
        if (s < n) fg_stage(fg_smem + s * FG_STAGE_BYTES, cp, K, c_begin + s);
        cp_async_commit();
    }
    // The stage of chunk i; chunk i + stages - 1 (copied while chunk i is multiplied) goes to
    // the one before it.
    int cur = 0;
    for (int i = 0; i < n; i++) {
        unsigned char* ws = fg_smem + cur * FG_STAGE_BYTES;
        const int ahead = (cur == 0 ? stages : cur) - 1;
        fg_wait(stages - 2);  // this thread's copies of chunk i are in
        fg_x_to_f16(ws, cp);
        __syncthreads();  // every thread's, and chunk i - 1's stage is free
        if (i + stages - 1 < n)
            fg_stage(fg_smem + ahead * FG_STAGE_BYTES, cp, K, c_begin + i + stages - 1);
        cp_async_commit();
        cur = cur + 1 == stages ? 0 : cur + 1;
        const __half* xs = reinterpret_cast<const __half*>(ws + FG_FEATURES * FG_WSTRIDE);
#pragma unroll
        for (int u = 0; u < FG_SUB; u++) {
            // Rows g and g + 8 of each of the warp's tiles, 8 values (u * 32 + 8q ..) each.
            uint4 a[2 * FG_TILES];
#pragma unroll
            for (int r = 0; r < 2 * FG_TILES; r++)
                a[r] = fp8x8_to_f16x8(*reinterpret_cast<const uint2*>(
                    ws + (warp * FG_TILES * 16 + 8 * r + g) * FG_WSTRIDE + u * 32 + 8 * q));
            uint4 b[NT];
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
                b[nt] =
                    *reinterpret_cast<const uint4*>(xs + (8 * nt + g) * FG_XSTRIDE + u * 32 + 8 * q);
            // Every accumulator's first mma, then every second one: asm volatile keeps the mmas
            // in this order, and the two into one accumulator would otherwise wait on each other.
#pragma unroll
            for (int half = 0; half < 2; half++)
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int t = 0; t < FG_TILES; t++) {
                        const uint4 lo4 = a[2 * t], hi4 = a[2 * t + 1];
                        const uint32_t af[4] = {half ? lo4.z : lo4.x, half ? hi4.z : hi4.x,
                                                half ? lo4.w : lo4.y, half ? hi4.w : hi4.y};
                        mma_f16(acc[t][nt], af, half ? b[nt].z : b[nt].x,
                                half ? b[nt].w : b[nt].y);
                    }
        }
    }
}

// mode as fg_store's. With gridDim.z > 1 the parts' sums go to parts ([gridDim.z, M, N] f32),
// for gemm_fp8_reduce. K % 16 == 0. Grid (ceil(M / FG_ROWS), ceil(N / FG_FEATURES), parts),
// FG_WARPS warps, stages * FG_STAGE_BYTES of dynamic shared memory (2 <= stages <= 8): chunks
// are copied stages - 1 ahead of the one being multiplied.
extern "C" __global__ void __launch_bounds__(FG_WARPS * 32, FG_MIN_BLOCKS)
    gemm_fp8(const uint8_t* __restrict__ w, const float* __restrict__ scale,
             const bf16* __restrict__ x, void* __restrict__ y, float* __restrict__ parts, int M,
             int N, int K, int chunks_per_split, int stages, int mode) {
    pdl_begin();
    const int warp = threadIdx.x >> 5;
    const int row0 = blockIdx.x * FG_ROWS, live = min(M - row0, FG_ROWS);
    const int fb = blockIdx.y * FG_FEATURES, f0 = fb + warp * FG_TILES * 16;
    const int chunks = (K + FG_KC - 1) / FG_KC;
    const int c_begin = blockIdx.z * chunks_per_split;
    const int n = max(0, min(c_begin + chunks_per_split, chunks) - c_begin);
    const FgCopies cp = fg_copies(w, x, fb, row0, M, N, K);
    float acc[FG_TILES][FG_NT][4] = {};
    switch ((live + 7) / 8) {
        case 1: fg_mainloop<1>(acc, cp, K, c_begin, n, stages); break;
        case 2: fg_mainloop<2>(acc, cp, K, c_begin, n, stages); break;
        case 3: fg_mainloop<3>(acc, cp, K, c_begin, n, stages); break;
        case 4: fg_mainloop<4>(acc, cp, K, c_begin, n, stages); break;
        case 5: fg_mainloop<5>(acc, cp, K, c_begin, n, stages); break;
        case 6: fg_mainloop<6>(acc, cp, K, c_begin, n, stages); break;
        case 7: fg_mainloop<7>(acc, cp, K, c_begin, n, stages); break;
        default: fg_mainloop<8>(acc, cp, K, c_begin, n, stages); break;
    }
    // acc[t][nt] holds (feature f0 + 16 t + g, rows 2q, 2q + 1 of n-tile nt), then feature + 8.
    if (gridDim.z > 1)
        fg_write(acc, parts + (size_t)blockIdx.z * M * N, nullptr, f0, 16, row0, live, N, 0);
    else if (mode == 1)
        fg_write(acc, y, scale, f0, 16, row0, live, N, 1);
    else if (mode == 2)
        fg_write(acc, y, scale, f0, 16, row0, live, N, 2);
    else
        fg_write(acc, y, scale, f0, 16, row0, live, N, 0);
}

// y (as gemm_fp8's mode says) = scale[f] * the sum of gemm_fp8's n_parts partial sums of (row,
// f), added in part order. parts: [n_parts, M, N] f32.
extern "C" __global__ void gemm_fp8_reduce(const float* __restrict__ parts,
                                           const float* __restrict__ scale, void* __restrict__ y,
                                           int M, int N, int n_parts, int mode) {
    pdl_begin();
    const size_t total = (size_t)M * N;
    for (size_t o = (size_t)blockIdx.x * blockDim.x + threadIdx.x; o < total;
         o += (size_t)gridDim.x * blockDim.x) {
        float v = 0.f;
        for (int p = 0; p < n_parts; p++) v += parts[p * total + o];
        fg_store(y, o, v * scale[o % N], mode);
    }
}
