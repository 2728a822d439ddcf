// gemm_fp8 on Hopper (sm_90a only; the host takes it on compute capability 9.0 and gemm_fp8
// elsewhere), with its copies on the Tensor Memory Accelerator: y = x . (w * scale)^T for x
// [M, K] bf16 (64 rows a block) and w [N, K] fp8 e4m3 with a scale a row, gemm_fp8's contract
// (mode; K split into parts, which the cluster of a tile's parts adds itself).
//
// Why TMA (2026-11-28): gemm_fp8_wg, before it, streamed ~18 GB/s an SM (Qwen3-8B's 64-row
// gate+up at 53% of the copy rate on an H200): its 384 threads copied with cp.async two chunks
// ahead, converted the activations to f16 in shared memory and met at a block barrier every
// chunk, so each chunk's latency was paid in turn. Here one producer warp keeps FT_STAGES chunks
// in flight through TMA (weights and activations land swizzled; an mbarrier a stage counts the
// bytes in) and three consumer warpgroups multiply each stage as it lands and free it on a
// second mbarrier; no block-wide barrier in the loop. The weights never depend on the kernel
// before, so the producer issues the first stages' weight copies before its PDL wait.
//
// The products: wgmma m64nNk16 bf16, A (64 features x 16 k) from registers, B (the activations,
// N = 8 NT rows) read by the hardware from the stage as TMA left it. Warp w of warpgroup wg
// holds features 64 wg + 16 w + g and + 8; for each k16 step lane (g, q) reads the step's 16
// bytes of those two rows (the 128-byte swizzle puts the 8 rows' same 16 bytes on different
// banks: one wavefront a warp) and picks bytes 2q, 2q + 1 and 8 + 2q, 9 + 2q, mma's A order.
// e4m3 widens to bf16 exactly by bits: the sign to bit 15 and the 7 other bits to bits 4..10
// give the value times 2^-120 (subnormals too), and a multiply by 2^116 leaves it times 2^-4,
// which gemm_fp8's epilogue (times 2^FG_XSHIFT and the row's scale) undoes. The activations are
// multiplied as they are, bf16: no conversion pass, no second copy.
//
// Shared memory: FT_STAGES stages, each the chunk's FT_FEATURES weight rows of FT_KC bytes (TMA
// box 128 x 192) and its 64 activation rows as two boxes of 64 values (wgmma's K-major layout:
// 8-row groups 1024 bytes apart), all with the 128-byte swizzle, stages 1024-byte aligned; then
// the barriers. Bench-only settings (tests/device/fp8_gemm_bench.cu): FT_STAGES, FT_NO_MATH
// (stream without products), FT_TIMELINE (each block's times).
#define FT_KC 128
#ifndef FT_STAGES
#define FT_STAGES 4
#endif
#define FT_WGS 3
#define FT_FEATURES (64 * FT_WGS)
#define FT_CWARPS (4 * FT_WGS)  // consumer warps; the producer is warp FT_CWARPS
#define FT_THREADS (32 * FT_CWARPS + 32)
#define FT_WBYTES (FT_FEATURES * FT_KC)
#define FT_XBOX (FG_ROWS * 64 * 2)           // one 64-value activation box
#define FT_STAGE_BYTES (FT_WBYTES + 2 * FT_XBOX)
#define FT_SMEM_BYTES (FT_STAGES * FT_STAGE_BYTES + 1024 + 2 * FT_STAGES * 8)
#define FT_TSTRIDE (FT_FEATURES + 4)  // floats a row of the cluster write's sums

// A TMA descriptor (CUtensorMap) as a by-value kernel parameter (__grid_constant__).
struct __align__(64) FtTensorMap {
    unsigned long long v[16];
};

// Where mode 4 (Q/K/V) writes: features below n0 to y ([M, n0] f32), below n0 + n1 to k
// ([M, n1]), the rest to v ([M, N - n0 - n1]).
struct FtQkv {
    float* k;
    float* v;
    int n0, n1;
};

#ifdef FT_TIMELINE  // the bench's per-block timeline: entry, first stage in, main loop done, end
__device__ unsigned long long ft_tl[1024][4];
#define FT_STAMP(i)                                                                     \
    if (threadIdx.x == 0) {                                                             \
        unsigned long long t_;                                                          \
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_));                          \
        ft_tl[blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)][i] = t_; \
    }
#else
#define FT_STAMP(i)
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
static_assert(FG_ROWS == 64 && FT_STAGE_BYTES % 1024 == 0, "the stage layout");

__device__ __forceinline__ void ft_bar_init(uint32_t bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void ft_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void ft_expect(uint32_t bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}
// Waits until the barrier's phase of the given parity has completed.
__device__ __forceinline__ void ft_wait(uint32_t bar, uint32_t parity) {
    asm volatile(
        "{\n .reg .pred p;\n FT_WAIT:\n"
        " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
        " @!p bra FT_WAIT;\n}" ::"r"(bar),
        "r"(parity)
        : "memory");
}
// A 2D tile of `map` at (c0 inner, c1 outer) into shared memory at dst, counted on bar.
__device__ __forceinline__ void ft_load(uint32_t dst, const FtTensorMap& map, int c0, int c1,
                                        uint32_t bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

// 16 bytes of shared memory at a (a shared-window address).
__device__ __forceinline__ uint4 ft_lds16(uint32_t a) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(a));
    return v;
}

// The weights of chunk k0 for the block's tile into stage st: its FT_FEATURES rows from fb, or
// for SwiGLU (mode 3, a map of 96-row boxes over [gate; up], nh rows each) gate rows fb .. and
// up rows nh + fb .. (gate rows past nh read up rows, whose sums are never written; up rows past
// the matrix read zeros).
__device__ __forceinline__ void ft_load_w(uint32_t st, const FtTensorMap& wmap, int k0, int fb,
                                          int nh, int mode, uint32_t bar) {
    if (mode == 3) {
        ft_load(st, wmap, k0, fb, bar);
        ft_load(st + FT_WBYTES / 2, wmap, k0, nh + fb, bar);
    } else {
        ft_load(st, wmap, k0, fb, bar);
    }
}

// Two e4m3 (bytes 1 and 3 of t; bytes 0 and 2 ignored) as bf16x2 times 2^-4, exactly.
__device__ __forceinline__ uint32_t ft_bf16x2(uint32_t t) {
    const uint32_t bits = ((t >> 4) & 0x07f007f0u) | (t & 0x80008000u);  // times 2^-120
    const __nv_bfloat162 up = __halves2bfloat162(__ushort_as_bfloat16(0x7980),   // 2^116
                                                 __ushort_as_bfloat16(0x7980));
    const __nv_bfloat162 v = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&bits), up);
    return *reinterpret_cast<const uint32_t*>(&v);
}

// d (64 features x 8 NT rows, f32) += a (64 x 16 bf16, registers) . b (16 x 8 NT bf16, shared
// memory, K-major, 128-byte swizzle).
template <int NT>
__device__ __forceinline__ void ft_mma(float (&d)[FG_NT][4], const uint32_t (&a)[4], uint64_t b);
#define FT_D(i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
#define FT_AB "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b)
template <>
__device__ __forceinline__ void ft_mma<2>(float (&d)[FG_NT][4], const uint32_t (&a)[4],
                                          uint64_t b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7}, "
        "{%8, %9, %10, %11}, %12, 1, 1, 1, 0;\n"
        : FT_D(0), FT_D(1)
        : FT_AB);
}
template <>
__device__ __forceinline__ void ft_mma<4>(float (&d)[FG_NT][4], const uint32_t (&a)[4],
                                          uint64_t b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
        "{%16, %17, %18, %19}, %20, 1, 1, 1, 0;\n"
        : FT_D(0), FT_D(1), FT_D(2), FT_D(3)
        : FT_AB);
}
template <>
__device__ __forceinline__ void ft_mma<8>(float (&d)[FG_NT][4], const uint32_t (&a)[4],
                                          uint64_t b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
        "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, 1, 1, 1, 0;\n"
        : FT_D(0), FT_D(1), FT_D(2), FT_D(3), FT_D(4), FT_D(5), FT_D(6), FT_D(7)
        : FT_AB);
}
#undef FT_D
#undef FT_AB

// A K-major B descriptor with the 128-byte swizzle: start address, 8-row groups 1024 bytes
// apart.
__device__ __forceinline__ uint64_t ft_desc(uint32_t addr) {
    return (uint64_t)((addr & 0x3ffff) >> 4) | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) |
           (1ull << 62);
}

// Keeps the compiler from touching registers an asynchronous MMA may still read or write.
__device__ __forceinline__ void ft_hold(float (&d)[FG_NT][4]) {
#pragma unroll
    for (int i = 0; i < FG_NT; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) asm volatile("" : "+f"(d[i][e])::"memory");
}
__device__ __forceinline__ void ft_hold(uint32_t (&a)[4][4]) {
#pragma unroll
    for (int s = 0; s < 4; s++)
#pragma unroll
        for (int e = 0; e < 4; e++) asm volatile("" : "+r"(a[s][e])::"memory");
}

// Half h of a chunk of a consumer thread: its A fragments of k16 steps 4 h .. 4 h + 3 of the
// stage at `st` (weights at st, rows r0 and r0 + 8, r0 % 8 == g) into a, then those steps'
// wgmma, committed as a group.
template <int NT>
__device__ __forceinline__ void ft_half(float (&acc)[FG_NT][4], uint32_t (&a)[4][4], uint32_t st,
                                        int h, int r0, uint32_t sel) {
    const int g = r0 & 7;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int j = 4 * h + i;
        const uint4 lo = ft_lds16(st + r0 * FT_KC + ((j ^ g) << 4));
        const uint4 hi = ft_lds16(st + (r0 + 8) * FT_KC + ((j ^ g) << 4));
        a[i][0] = ft_bf16x2(__byte_perm(lo.x, lo.y, sel));
        a[i][1] = ft_bf16x2(__byte_perm(hi.x, hi.y, sel));
        a[i][2] = ft_bf16x2(__byte_perm(lo.z, lo.w, sel));
        a[i][3] = ft_bf16x2(__byte_perm(hi.z, hi.w, sel));
    }
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    // Steps 4 h .. are the half's box, 32 bytes a step.
    const uint32_t x0 = st + FT_WBYTES + h * FT_XBOX;
#pragma unroll
    for (int i = 0; i < 4; i++) ft_mma<NT>(acc, a[i], ft_desc(x0 + 32 * i));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// The consumers' main loop over the block's n chunks: sums, unscaled, in acc (acc[nt][e]:
// feature 64 wg + 16 w + g + 8 (e / 2), row 8 nt + 2 q + e % 2, as gemm_fp8's). Each half
// chunk's A fragments are written while the half before it multiplies: before writing them,
// wait until at most one group (that half) is pending, so the same half of the chunk before,
// which read the same registers, is done.
template <int NT>
__device__ __forceinline__ void ft_consume(float (&acc)[FG_NT][4], unsigned char* smem,
                                           uint32_t full0, uint32_t empty0, int n) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, q = lane & 3;
    const int r0 = 64 * (warp >> 2) + 16 * (warp & 3) + (lane >> 2);
    // Bytes 2q and 2q + 1 of the 8 (x, y) into bytes 1 and 3.
    const uint32_t sel = (2 * q) << 4 | (2 * q + 1) << 12 | (2 * q) | (2 * q + 1) << 8;
    uint32_t a[2][4][4];
    for (int i = 0; i < n; i++) {
        const int s = i % FT_STAGES;
        const uint32_t st = (uint32_t)__cvta_generic_to_shared(smem) + s * FT_STAGE_BYTES;
        ft_wait(full0 + 8 * s, (i / FT_STAGES) & 1);
        if (i == 0) FT_STAMP(1);
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        ft_hold(acc);
        ft_hold(a[0]);
#ifndef FT_NO_MATH
        ft_half<NT>(acc, a[0], st, 0, r0, sel);
#endif
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        ft_hold(acc);
        ft_hold(a[1]);
        // Chunk i - 1 is done: its stage is free.
        if (i > 0 && lane == 0) ft_arrive(empty0 + 8 * ((i - 1) % FT_STAGES));
#ifndef FT_NO_MATH
        ft_half<NT>(acc, a[1], st, 1, r0, sel);
#endif
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    ft_hold(acc);
}

// The blocks of this block's cluster, its rank among them; a barrier of all the cluster's
// threads after which their shared-memory writes are visible to each other's reads; four
// floats at shared-memory address `a` of the cluster's block `rank`.
__device__ __forceinline__ unsigned ft_cluster_blocks() {
    unsigned n;
    asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
    return n;
}
__device__ __forceinline__ unsigned ft_cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
__device__ __forceinline__ void ft_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n"
                 ::: "memory");
}
__device__ __forceinline__ float4 ft_remote4(uint32_t a, unsigned rank) {
    uint32_t r;
    float4 v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(r)
                 : "memory");
    return v;
}

// Four floats at shared-memory address `a` summed over the cluster's blocks 0 .. parts - 1 in
// that order.
__device__ __forceinline__ float4 ft_part_sum(uint32_t a, unsigned parts) {
    float4 v = ft_remote4(a, 0);
    for (unsigned p = 1; p < parts; p++) {
        const float4 u = ft_remote4(a, p);
        v.x += u.x, v.y += u.y, v.z += u.z, v.w += u.w;
    }
    return v;
}

// The cluster's blocks (the K parts of one tile, rank = part; one block is a cluster of one)
// each put their sums in shared memory as [row][feature]; then block `rank` adds rows rank,
// rank + parts, .. over the parts in part order (as gemm_fp8_reduce does) and writes them as
// mode says (3: SwiGLU, bf16 silu(gate) * up of the tile's 96 features; 4: Q/K/V apart, as
// qkv says).
__device__ __forceinline__ void ft_cluster_write(const float (&acc)[FG_NT][4], float* tile,
                                                 void* y, const float* __restrict__ scale,
                                                 int fb, int row0, int live, int N, int mode,
                                                 const FtQkv& qkv) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    const int f0 = 64 * (warp >> 2) + 16 * (warp & 3) + g;
    __syncthreads();  // every consumer's products have read their last stage
    if (warp < FT_CWARPS)
#pragma unroll
        for (int nt = 0; nt < FG_NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = 8 * nt + 2 * q + (e & 1);
                if (r < live) tile[r * FT_TSTRIDE + f0 + 8 * (e >> 1)] = acc[nt][e];
            }
    ft_cluster_sync();
    const unsigned parts = ft_cluster_blocks(), rank = ft_cluster_rank();
    const uint32_t base = (uint32_t)__cvta_generic_to_shared(tile);
    const int mine = (live - (int)rank + (int)parts - 1) / (int)parts;
    // SwiGLU's tile is 96 gate then 96 up features: a thread takes 4 of each.
    const int groups = mode == 3 ? FT_FEATURES / 8 : FT_FEATURES / 4;
    for (int i = threadIdx.x; i < mine * groups; i += blockDim.x) {
        const int r = rank + parts * (i / groups), f = 4 * (i % groups);
        const float4 v = ft_part_sum(base + (r * FT_TSTRIDE + f) * 4, parts);
        const float s[4] = {v.x, v.y, v.z, v.w};
        if (mode == 3) {
            const float4 w = ft_part_sum(base + (r * FT_TSTRIDE + FT_FEATURES / 2 + f) * 4, parts);
            const float u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int j = fb + f + e;
                if (j >= N) continue;
                // The activations went in times 2^-FG_XSHIFT; silu_mul_pair's arithmetic.
                const float g = s[e] * (float)(1 << FG_XSHIFT) * scale[j];
                const float x = u[e] * (float)(1 << FG_XSHIFT) * scale[N + j];
                reinterpret_cast<bf16*>(y)[(size_t)(row0 + r) * N + j] =
                    __float2bfloat16(g / (1.f + expf(-g)) * x);
            }
            continue;
        }
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int feat = fb + f + e;
            if (feat >= N) continue;
            const float v = s[e] * (float)(1 << FG_XSHIFT) * scale[feat];
            const size_t row = row0 + r;
            if (mode != 4)
                fg_store(y, row * N + feat, v, mode);
            else if (feat < qkv.n0)
                reinterpret_cast<float*>(y)[row * qkv.n0 + feat] = v;
            else if (feat < qkv.n0 + qkv.n1)
                qkv.k[row * qkv.n1 + feat - qkv.n0] = v;
            else
                qkv.v[row * (N - qkv.n0 - qkv.n1) + feat - qkv.n0 - qkv.n1] = v;
        }
    }
    ft_cluster_sync();  // no block leaves while another still reads its sums
}
#endif

// gemm_fp8's contract over grid (ceil(M / 64), ceil(N / FT_FEATURES), parts), FT_THREADS
// threads, FT_SMEM_BYTES of dynamic shared memory, launched in clusters of gridDim.z blocks
// along z (at most 8; parts of a tile added inside the cluster). wmap: w as a [N, K] uint8
// tensor, box 128 x FT_FEATURES; xmap: x as a [M, K] bf16 tensor, box 64 x 64; both with the
// 128-byte swizzle, zeros out of bounds. Mode 3 (SwiGLU): w is gate and up stored together, N
// rows each ([2 N, K], box 128 x FT_FEATURES / 2; scale 2 N long), the grid's y covers N in
// tiles of FT_FEATURES / 2, and y [M, N] bf16 gets silu(x . gate^T) * (x . up^T). Mode 4
// (Q/K/V): w is the three matrices stored together and the sums go, f32, to y, k and v apart
// (FtQkv; the split the fused GEMM's output would take after). sm_90a only: elsewhere it does
// nothing.
extern "C" __global__ void __launch_bounds__(FT_THREADS, 1)
    gemm_fp8_tma(const __grid_constant__ FtTensorMap wmap, const __grid_constant__ FtTensorMap xmap,
                 const float* __restrict__ scale, void* __restrict__ y, int M, int N, int K,
                 int chunks_per_split, int mode, FtQkv qkv) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(16) unsigned char ft_raw[];
    FT_STAMP(0);
    // Offset, not a cast through an integer, so the compiler keeps shared-memory loads.
    unsigned char* smem = ft_raw + (-(int)__cvta_generic_to_shared(ft_raw) & 1023);
    const uint32_t full0 = (uint32_t)__cvta_generic_to_shared(smem + FT_STAGES * FT_STAGE_BYTES);
    const uint32_t empty0 = full0 + 8 * FT_STAGES;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row0 = blockIdx.x * FG_ROWS, live = min(M - row0, FG_ROWS);
    const int fb = blockIdx.y * (mode == 3 ? FT_FEATURES / 2 : FT_FEATURES);
    const int chunks = (K + FT_KC - 1) / FT_KC;
    const int c_begin = blockIdx.z * chunks_per_split;
    const int n = max(0, min(c_begin + chunks_per_split, chunks) - c_begin);
    if (threadIdx.x == 0) {
        for (int s = 0; s < FT_STAGES; s++) {
            ft_bar_init(full0 + 8 * s, 1);
            ft_bar_init(empty0 + 8 * s, FT_CWARPS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    float acc[FG_NT][4] = {};
    if (warp == FT_CWARPS) {
        if (lane == 0) {
            // The weights first (constant, so before the wait), then the activations.
            const int ahead = min(n, FT_STAGES);
            for (int i = 0; i < ahead; i++) {
                const uint32_t st = (uint32_t)__cvta_generic_to_shared(smem + i * FT_STAGE_BYTES);
                ft_expect(full0 + 8 * i, FT_STAGE_BYTES);
                ft_load_w(st, wmap, (c_begin + i) * FT_KC, fb, N, mode, full0 + 8 * i);
            }
            pdl_wait();
            for (int i = 0; i < n; i++) {
                const int s = i % FT_STAGES;
                const uint32_t st = (uint32_t)__cvta_generic_to_shared(smem + s * FT_STAGE_BYTES);
                const int k0 = (c_begin + i) * FT_KC;
                if (i >= FT_STAGES) {
                    ft_wait(empty0 + 8 * s, ((i / FT_STAGES) & 1) ^ 1);
                    ft_expect(full0 + 8 * s, FT_STAGE_BYTES);
                    ft_load_w(st, wmap, k0, fb, N, mode, full0 + 8 * s);
                }
                ft_load(st + FT_WBYTES, xmap, k0, row0, full0 + 8 * s);
                ft_load(st + FT_WBYTES + FT_XBOX, xmap, k0 + 64, row0, full0 + 8 * s);
            }
        } else {
            pdl_wait();
        }
        pdl_trigger();
    } else {
        pdl_wait();
        pdl_trigger();
        if (live <= 16)
            ft_consume<2>(acc, smem, full0, empty0, n);
        else if (live <= 32)
            ft_consume<4>(acc, smem, full0, empty0, n);
        else
            ft_consume<8>(acc, smem, full0, empty0, n);
        FT_STAMP(2);
    }
    const int f0 = fb + 64 * (warp >> 2) + 16 * (warp & 3);
    if (ft_cluster_blocks() > 1 || mode >= 3)
        ft_cluster_write(acc, reinterpret_cast<float*>(smem), y, scale, fb, row0, live, N, mode,
                         qkv);
    else if (warp < FT_CWARPS) {
        const float(&a1)[1][FG_NT][4] = reinterpret_cast<const float(&)[1][FG_NT][4]>(acc);
        if (mode == 1)
            fg_write(a1, y, scale, f0, 64, row0, live, N, 1);
        else if (mode == 2)
            fg_write(a1, y, scale, f0, 64, row0, live, N, 2);
        else
            fg_write(a1, y, scale, f0, 64, row0, live, N, 0);
    }
    FT_STAMP(3);
#else
    pdl_begin();
#endif
}
