// gemm_fp8 on Hopper's warpgroup MMA (sm_90a only; the host takes it on compute capability 9.0
// and gemm_fp8 elsewhere): the same product, y = x . (w * scale)^T for x [M, K] bf16 and w
// [N, K] fp8 e4m3 with a scale a row, the same f16 arithmetic (weights widened exactly in
// registers, activations as f16 times 2^-FG_XSHIFT). K's parts (split its own way:
// kernels/gemm_fp8.rs) are added in part order as gemm_fp8_reduce adds them, but by the
// cluster of a tile's parts itself (fh_cluster_write).
//
// Why a second kernel: a block-tiled read of a row-major matrix in runs of 64 bytes a row, as
// gemm_fp8's chunks are, reaches only ~59% of the copy rate with no products at all, 128-byte
// runs ~88% (tests/device/read_pattern_bench.cu, H100). Chunks of FH_KC = 128 bytes over 192
// features and 64 rows need 56 KB a stage, so one block an SM; wgmma is what keeps that one
// block's products cheap (a warpgroup multiplies 64 features by up to 64 rows a k16 step in one
// instruction, reading the activations from shared memory itself).
//
// A block is FH_WGS = 3 warpgroups; warpgroup wg multiplies features 64 (FH_TPW wg + t) (t <
// FH_TPW = 1) of the block's FH_FEATURES = 192 by the row tile. One block streams ~20 GB/s
// (about what a block-tiled read alone does), so what counts is how many SMs a matrix keeps
// busy: 192 features put Qwen3-8B's gate+up in 128 blocks (one wave, no K split) where 256 put
// it in 96, 54 -> 47 us at 64 rows on an H100. The first 256 threads copy and convert the
// activations. A (the weights) comes from registers: warp w of a warpgroup
// holds features 16 w + g and 16 w + g + 8 of a tile, and lane (g, q) widens the 8 bytes
// 32 u + 8 q .. of each row, feeding the first half to k16 step 2 u and the second to 2 u + 1,
// as gemm_fp8 does. So logical k 2 q + e of step 2 u + v is physical 32 u + 8 q + 4 v + e, and
// logical 8 + 2 q + e is physical 32 u + 8 q + 4 v + 2 + e. B (the activations) is read by the
// hardware in logical order, so each thread writes the f16 pairs of the pieces it copied in that
// order: the pair at physical word P (k 2 P, 2 P + 1) goes to core column 4 (P / 16) + P % 4,
// word (P / 4) % 4 of its row.
//
// Shared memory: FH_STAGES stages, each a chunk's FH_FEATURES weight rows of FH_KC bytes (row r's
// 32-byte quarters XOR r % 4, so a half warp's 8-byte reads of rows g = 0..3 hit every bank
// once), the chunk's activation rows as copied (bf16), and the same activations as f16 in
// wgmma's K-major layout without swizzling: core matrices of 8 rows x 16 bytes (128 contiguous
// bytes), core (column c, row group r / 8) at (c * FG_ROWS / 8 + r / 8) * 128. Chunks are
// copied by cp.async FH_STAGES - 1 ahead of the one multiplied.
#define FH_KC 128
#ifndef FH_STAGES
#define FH_STAGES 3
#endif
// Warpgroups a block and 64-feature tiles a warpgroup (FH_WGS x FH_TPW x 64 features a block;
// fp8_gemm_bench.cu builds other shapes to compare); the first FH_XTHREADS threads copy and
// convert the activations.
#ifndef FH_WGS
#define FH_WGS 3
#endif
#ifndef FH_TPW
#define FH_TPW 1
#endif
#define FH_FEATURES (64 * FH_WGS * FH_TPW)
#define FH_THREADS (128 * FH_WGS)
#define FH_XTHREADS 256
#define FH_WROWS (FH_THREADS / (FH_KC / 16))  // weight rows a round of 16-byte copies covers
#define FH_XRAW (FH_FEATURES * FH_KC)
#define FH_XB (FH_XRAW + FG_ROWS * FH_KC * 2)
#define FH_STAGE_BYTES (FH_XB + FG_ROWS * FH_KC * 2)
#define FH_WPIECES (FH_FEATURES * FH_KC / 16 / FH_THREADS)
#define FH_XPIECES (FG_ROWS * FH_KC / 8 / FH_XTHREADS)
#define FH_STEPS (FH_KC / 16)

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
static_assert(FG_ROWS == 64 && FH_FEATURES * FH_KC % (16 * FH_THREADS) == 0 &&
                  FH_THREADS >= FH_XTHREADS,
              "the wgmma tiling");

// A thread's share of every chunk's copies: 16-byte pieces of weight rows wr + 32 j (bytes
// kw ..) and of activation rows xr + 16 j (values kx ..), from w and x at the chunk's start;
// `full`: every one of those rows exists (a chunk inside K then needs no checks).
struct FhCopies {
    const uint8_t* w;
    const bf16* x;
    int wr, kw, xr, kx;
    unsigned w_live, x_live;
    bool full;
};

__device__ __forceinline__ int fh_wswz(int row) { return (row & 3) << 5; }

// Starts copying chunk c into stage st: rows past N or M and values past K as zeros.
__device__ __forceinline__ void fh_stage(unsigned char* st, const FhCopies& cp, int K, int c) {
    const int k0 = c * FH_KC;
    const uint8_t* w = cp.w + k0;
    const bf16* x = cp.x + k0;
    unsigned char* wd = st + cp.wr * FH_KC + (cp.kw ^ fh_wswz(cp.wr));
    unsigned char* xd = st + FH_XRAW + (cp.xr * FH_KC + cp.kx) * 2;
    const bool copies_x = FH_THREADS == FH_XTHREADS || threadIdx.x < FH_XTHREADS;
    if (cp.full && k0 + FH_KC <= K) {
#pragma unroll
        for (int j = 0; j < FH_WPIECES; j++, w += FH_WROWS * (size_t)K)
            cp_async16(wd + j * FH_WROWS * FH_KC, w);
        if (copies_x)
#pragma unroll
            for (int j = 0; j < FH_XPIECES; j++, x += 16 * (size_t)K)
                cp_async16(xd + j * 16 * FH_KC * 2, x);
        return;
    }
    const bool wk = k0 + cp.kw < K, xk = k0 + cp.kx < K;
#pragma unroll
    for (int j = 0; j < FH_WPIECES; j++, w += FH_WROWS * (size_t)K) {
        if (wk && (cp.w_live >> j & 1))
            cp_async16(wd + j * FH_WROWS * FH_KC, w);
        else
            *reinterpret_cast<uint4*>(wd + j * FH_WROWS * FH_KC) = uint4{};
    }
    if (!copies_x) return;
#pragma unroll
    for (int j = 0; j < FH_XPIECES; j++, x += 16 * (size_t)K) {
        if (xk && (cp.x_live >> j & 1))
            cp_async16(xd + j * 16 * FH_KC * 2, x);
        else
            *reinterpret_cast<uint4*>(xd + j * 16 * FH_KC * 2) = uint4{};
    }
}

// The thread's activation pieces of stage st (complete) as f16 times 2^-FG_XSHIFT into the
// stage's B operand, in logical k order.
__device__ __forceinline__ void fh_x_to_b(unsigned char* st, const FhCopies& b) {
    if (FH_THREADS != FH_XTHREADS && threadIdx.x >= FH_XTHREADS) return;
    const __nv_bfloat162 down = __floats2bfloat162_rn(0x1p-4f, 0x1p-4f);
    static_assert(FG_XSHIFT == 4, "down is 2^-FG_XSHIFT");
    const int u = b.kx >> 5, q = (b.kx >> 3) & 3;
#pragma unroll
    for (int j = 0; j < FH_XPIECES; j++) {
        const int r = b.xr + j * 16;
        const uint4 v = *reinterpret_cast<const uint4*>(st + FH_XRAW + (r * FH_KC + b.kx) * 2);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
        unsigned char* row = st + FH_XB + (r >> 3) * 128 + (r & 7) * 16 + q * 4;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const __nv_bfloat162 h =
                __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&w[i]), down);
            const uint32_t d = *reinterpret_cast<const uint32_t*>(&h);
            *reinterpret_cast<uint32_t*>(row + (4 * u + i) * (FG_ROWS / 8) * 128) =
                pack_f16(__uint_as_float(d << 16), __uint_as_float(d & 0xffff0000u));
        }
    }
}

// A shared-memory matrix descriptor without swizzling: start address, leading byte offset
// (between core matrices along K), stride byte offset (between core matrices along N).
__device__ __forceinline__ uint64_t fh_desc(const void* p, int lbo, int sbo) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    return (uint64_t)((a & 0x3ffff) >> 4) | ((uint64_t)(lbo >> 4) << 16) |
           ((uint64_t)(sbo >> 4) << 32);
}

// Keeps the compiler from touching registers an asynchronous MMA may still read or write.
__device__ __forceinline__ void fh_hold(float (&d)[FG_NT][4]) {
#pragma unroll
    for (int i = 0; i < FG_NT; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) asm volatile("" : "+f"(d[i][e])::"memory");
}
__device__ __forceinline__ void fh_hold(uint32_t (&a)[4]) {
#pragma unroll
    for (int e = 0; e < 4; e++) asm volatile("" : "+r"(a[e])::"memory");
}

// Every accumulator and A fragment of the main loop, held.
__device__ __forceinline__ void fh_hold_all(float (&acc)[FH_TPW][FG_NT][4],
                                            uint32_t (&a)[FH_STEPS][FH_TPW][4]) {
#pragma unroll
    for (int t = 0; t < FH_TPW; t++) {
        fh_hold(acc[t]);
#pragma unroll
        for (int s = 0; s < FH_STEPS; s++) fh_hold(a[s][t]);
    }
}

// d (64 features x 8 NT rows, f32) += a (64 x 16, f16 in registers) . b (16 x 8 NT, f16 in
// shared memory): scale-d 1 (add), A and B unscaled, B K-major.
template <int NT>
__device__ __forceinline__ void fh_mma(float (&d)[FG_NT][4], const uint32_t (&a)[4], uint64_t b);
#define FH_D(i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
#define FH_AB "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b)
template <>
__device__ __forceinline__ void fh_mma<2>(float (&d)[FG_NT][4], const uint32_t (&a)[4],
                                          uint64_t b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7}, "
        "{%8, %9, %10, %11}, %12, 1, 1, 1, 0;\n"
        : FH_D(0), FH_D(1)
        : FH_AB);
}
template <>
__device__ __forceinline__ void fh_mma<4>(float (&d)[FG_NT][4], const uint32_t (&a)[4],
                                          uint64_t b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
        "{%16, %17, %18, %19}, %20, 1, 1, 1, 0;\n"
        : FH_D(0), FH_D(1), FH_D(2), FH_D(3)
        : FH_AB);
}
template <>
__device__ __forceinline__ void fh_mma<8>(float (&d)[FG_NT][4], const uint32_t (&a)[4],
                                          uint64_t b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, 1, 1, 1, 0;\n"
        : FH_D(0), FH_D(1), FH_D(2), FH_D(3), FH_D(4), FH_D(5), FH_D(6), FH_D(7)
        : FH_AB);
}
#undef FH_D
#undef FH_AB

// The main loop over the block's n chunks with wgmma n = 8 NT (rows past M feed only sums that
// are not written): the sums, unscaled, in acc (acc[t][nt][e]: feature 128 wg + 64 t + 16 w +
// g + 8 (e / 2), row 8 nt + 2 q + e % 2: gemm_fp8's with tiles 64 features apart).
template <int NT>
__device__ __forceinline__ void fh_mainloop(float (&acc)[FH_TPW][FG_NT][4], const FhCopies& cp,
                                            int K, int c_begin, int n) {
    extern __shared__ __align__(128) unsigned char fh_smem[];
    const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    for (int s = 0; s < FH_STAGES - 1; s++) {
        if (s < n) fh_stage(fh_smem + s * FH_STAGE_BYTES, cp, K, c_begin + s);
        cp_async_commit();
    }
    // The thread's two weight rows of tile 0 (tile 1's are 64 rows on; r % 4 is the same),
    // bytes 8 q .. of each 32.
    const int r0 = 64 * FH_TPW * (threadIdx.x >> 7) + 16 * ((threadIdx.x >> 5) & 3) + g;
    const int a0 = r0 * FH_KC + 8 * q, a1 = a0 + 8 * FH_KC, swz = fh_wswz(r0);
    uint32_t a[FH_STEPS][FH_TPW][4];  // [k16 step][tile]
    int cur = 0;
    for (int i = 0; i < n; i++) {
        unsigned char* st = fh_smem + cur * FH_STAGE_BYTES;
        cp_async_wait<FH_STAGES - 2>();  // this thread's copies of chunk i are in
        fh_x_to_b(st, cp);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // for wgmma's reads
        // Chunk i - 1's products are done: its stage is free, its A registers may change.
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        fh_hold_all(acc, a);
        __syncthreads();  // every thread's copies and B operand of chunk i are in
        const int ahead = (cur == 0 ? FH_STAGES : cur) - 1;
        if (i + FH_STAGES - 1 < n)
            fh_stage(fh_smem + ahead * FH_STAGE_BYTES, cp, K, c_begin + i + FH_STAGES - 1);
        cp_async_commit();
        if (++cur == FH_STAGES) cur = 0;
#pragma unroll
        for (int u = 0; u < FH_KC / 32; u++)
#pragma unroll
            for (int t = 0; t < FH_TPW; t++) {
                const int o = 64 * t * FH_KC + (32 * u ^ swz);
                const uint4 lo = fp8x8_to_f16x8(*reinterpret_cast<const uint2*>(st + a0 + o));
                const uint4 hi = fp8x8_to_f16x8(*reinterpret_cast<const uint2*>(st + a1 + o));
                const uint32_t s0[4] = {lo.x, hi.x, lo.y, hi.y}, s1[4] = {lo.z, hi.z, lo.w, hi.w};
#pragma unroll
                for (int e = 0; e < 4; e++) a[2 * u][t][e] = s0[e], a[2 * u + 1][t][e] = s1[e];
            }
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        const uint64_t b0 = fh_desc(st + FH_XB, (FG_ROWS / 8) * 128, 128);
#pragma unroll
        for (int s = 0; s < FH_STEPS; s++)
#pragma unroll
            for (int t = 0; t < FH_TPW; t++)
                // Step s's two core columns start 2 s columns in (the address field counts 16
                // bytes).
                fh_mma<NT>(acc[t], a[s][t], b0 + ((2 * s * (FG_ROWS / 8) * 128) >> 4));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    fh_hold_all(acc, a);
}

// Split-K inside a thread block cluster: a launch whose clusters span gridDim.z (the parts of
// K, at most 8) adds the parts' sums through distributed shared memory instead of writing them
// for gemm_fp8_reduce, which at 64 rows moved as many bytes again as a third of the weights
// (gate+up: 25 MB of partial sums for 100 MB of weights, 15 of its 73 us on an H100).
__device__ __forceinline__ unsigned fh_cluster_blocks() {
    unsigned n;
    asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
    return n;
}
__device__ __forceinline__ unsigned fh_cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
// Every thread of every block of the cluster arrives; shared-memory writes before it are
// visible to the cluster's reads after it.
__device__ __forceinline__ void fh_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n"
                 ::: "memory");
}
// Four floats at shared-memory address `a` of the cluster's block `rank`.
__device__ __forceinline__ float4 fh_remote4(uint32_t a, unsigned rank) {
    uint32_t r;
    float4 v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(r)
                 : "memory");
    return v;
}

// Floats a row of a block's sums in shared memory: 260 puts rows 2 q apart (a warp's stores)
// on banks 8 q apart.
#define FH_TSTRIDE (FH_FEATURES + 4)

// The cluster's blocks (the K parts of one tile, rank = part) each put their sums in shared
// memory as [row][feature]; then block `rank` adds rows rank, rank + parts, .. over the parts
// in part order (as gemm_fp8_reduce does, so the same values) and writes them as mode says.
__device__ __forceinline__ void fh_cluster_write(const float (&acc)[FH_TPW][FG_NT][4], void* y,
                                                 const float* __restrict__ scale, int fb,
                                                 int row0, int live, int N, int mode) {
    extern __shared__ __align__(128) unsigned char fh_smem[];
    float* tile = reinterpret_cast<float*>(fh_smem);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    const int f0 = 64 * FH_TPW * (warp >> 2) + 16 * (warp & 3) + g;
    __syncthreads();  // every warpgroup's products have read their last stage
#pragma unroll
    for (int t = 0; t < FH_TPW; t++)
#pragma unroll
        for (int nt = 0; nt < FG_NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = 8 * nt + 2 * q + (e & 1);
                if (r < live) tile[r * FH_TSTRIDE + f0 + 64 * t + 8 * (e >> 1)] = acc[t][nt][e];
            }
    fh_cluster_sync();
    const unsigned parts = fh_cluster_blocks(), rank = fh_cluster_rank();
    const uint32_t base = (uint32_t)__cvta_generic_to_shared(tile);
    const int mine = (live - (int)rank + (int)parts - 1) / (int)parts;
    for (int i = threadIdx.x; i < mine * (FH_FEATURES / 4); i += blockDim.x) {
        const int r = rank + parts * (i / (FH_FEATURES / 4)), f = 4 * (i % (FH_FEATURES / 4));
        const uint32_t a = base + (r * FH_TSTRIDE + f) * 4;
        float4 v = fh_remote4(a, 0);
        for (unsigned p = 1; p < parts; p++) {
            const float4 u = fh_remote4(a, p);
            v.x += u.x, v.y += u.y, v.z += u.z, v.w += u.w;
        }
        const float s[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int feat = fb + f + e;
            // The activations went in times 2^-FG_XSHIFT.
            if (feat < N)
                fg_store(y, (size_t)(row0 + r) * N + feat,
                         s[e] * (float)(1 << FG_XSHIFT) * scale[feat], mode);
        }
    }
    fh_cluster_sync();  // no block leaves while another still reads its sums
}
#endif

// gemm_fp8's contract (mode, parts) over grid (ceil(M / FG_ROWS), ceil(N / FH_FEATURES),
// parts), FH_THREADS threads, without its stages: chunks of FH_KC values, FH_STAGES * FH_STAGE_BYTES of
// dynamic shared memory. Launched in clusters of gridDim.z blocks along z (at most 8), as the
// engine does, the parts are added inside each cluster and `parts` is not touched; otherwise
// they go to `parts` for gemm_fp8_reduce. sm_90a only: elsewhere it does nothing.
extern "C" __global__ void __launch_bounds__(FH_THREADS, 1)
    gemm_fp8_wg(const uint8_t* __restrict__ w, const float* __restrict__ scale,
                const bf16* __restrict__ x, void* __restrict__ y, float* __restrict__ parts,
                int M, int N, int K, int chunks_per_split, int mode) {
    pdl_begin();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    const int warp = threadIdx.x >> 5;
    const int row0 = blockIdx.x * FG_ROWS, live = min(M - row0, FG_ROWS);
    const int fb = blockIdx.y * FH_FEATURES;
    const int chunks = (K + FH_KC - 1) / FH_KC;
    const int c_begin = blockIdx.z * chunks_per_split;
    const int n = max(0, min(c_begin + chunks_per_split, chunks) - c_begin);
    FhCopies cp;
    cp.wr = threadIdx.x / (FH_KC / 16);
    cp.kw = threadIdx.x % (FH_KC / 16) * 16;
    cp.xr = threadIdx.x / (FH_KC / 8);
    cp.kx = threadIdx.x % (FH_KC / 8) * 8;
    cp.w = w + (size_t)(fb + cp.wr) * K + cp.kw;
    cp.x = x + (size_t)(row0 + cp.xr) * K + cp.kx;
    cp.w_live = cp.x_live = 0;
#pragma unroll
    for (int j = 0; j < FH_WPIECES; j++) cp.w_live |= (fb + cp.wr + j * FH_WROWS < N) << j;
#pragma unroll
    for (int j = 0; j < FH_XPIECES; j++) cp.x_live |= (row0 + cp.xr + j * 16 < M) << j;
    cp.full = fb + FH_FEATURES <= N && row0 + FG_ROWS <= M;
    float acc[FH_TPW][FG_NT][4] = {};
    if (live <= 16)
        fh_mainloop<2>(acc, cp, K, c_begin, n);
    else if (live <= 32)
        fh_mainloop<4>(acc, cp, K, c_begin, n);
    else
        fh_mainloop<8>(acc, cp, K, c_begin, n);
    // Warp w's tiles: features 128 (w / 4) + 16 (w % 4) + 64 t.
    const int f0 = fb + 64 * FH_TPW * (warp >> 2) + 16 * (warp & 3);
    if (fh_cluster_blocks() > 1)
        fh_cluster_write(acc, y, scale, fb, row0, live, N, mode);
    else if (gridDim.z > 1)
        fg_write(acc, parts + (size_t)blockIdx.z * M * N, nullptr, f0, 64, row0, live, N, 0);
    else if (mode == 1)
        fg_write(acc, y, scale, f0, 64, row0, live, N, 1);
    else if (mode == 2)
        fg_write(acc, y, scale, f0, 64, row0, live, N, 2);
    else
        fg_write(acc, y, scale, f0, 64, row0, live, N, 0);
#endif
}
