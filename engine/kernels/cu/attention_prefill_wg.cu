// Causal paged attention for prefill chunks on Hopper's warpgroup MMA (sm_90a only; the host
// takes it on compute capability 9.0 for head_dim 128, attention_prefill.cu's mma.sync kernel
// elsewhere). The contract, grid and numerics are attn_prefill_tc's: one block per (64-row query
// tile, HPB heads of one KV group), a warpgroup (128 threads) per head; Q scaled by
// softmax_scale * log2(e) and rounded to bf16 (f16 for fp8 caches), P rounded the same, S and O
// in f32.
//
// Why (2026-11-29): attn_prefill_tc ran at ~225 TFLOP/s on a lent H200, 39.5% of an fp8 pp8192's
// op time; mma.sync reaches about half of what wgmma does on Hopper. Alone on a lent H200
// (tests/device/run.sh pattn: one 8,192-token prompt at Qwen3-8B's heads, two heads a block) this
// kernel runs at 413 TFLOP/s against attn_prefill_tc's 255 with a bf16 cache, 366 against 224
// with an fp8 one, with the same bits out.
//
// The products: S = Q K^T as wgmma m64n64k16 with Q and K both read from shared memory (K-major:
// a row's dims contiguous), O += P V as m64n128k16 with P from registers (S's accumulators are
// laid out as the A fragments want them) and V read as it is stored, dims contiguous (MN-major,
// the transpose flag). Every tile lands in wgmma's canonical layout with the 128-byte swizzle:
// 64 dims (128 bytes) a row, the row's 16-byte piece c at slot c ^ (row % 8), 8-row groups 1024
// bytes apart, the other 64 dims a box further on. bf16 caches are copied straight there with
// cp.async a tile ahead; fp8 ones are loaded into registers a tile ahead and widened to f16 into
// their place by the thread that loaded them.
//
// The pipeline of a warpgroup (FlashAttention-3's intra-warpgroup overlap): S of tile t is issued
// and then P V of tile t - 1, and tile t's softmax runs while P V multiplies; O is rescaled once
// P V is done. So three tiles' shared memory are live at once: t's K, t - 1's V, and the next
// tile's copies. A tile's copies go out after the products are issued, its block-table entries
// read a tile earlier: with the copies and their table reads before the products, bf16 ran at
// 352 TFLOP/s; after them, 390; with the reads a tile earlier, 413.
//
// tiles[2 i] = sequence, tiles[2 i + 1] = first token row of tile i. `out` is f32, or bf16 when
// out_bf16. Grid: (tiles, n_heads / HPB), 128 * HPB threads, prefill_wg_smem<HPB>() bytes of
// dynamic shared memory (the launcher computes the same). Bench-only setting
// (tests/device/prefill_attn_bench.cu): WG_V_SBO_LBO_SWAP.
//
// Included after attention_prefill.cu, whose key_offset and RowSoftmax (the online softmax,
// shared so that both kernels give the same bits) it uses.
#include "mma.cuh"

#define WG_BQ 64
#define WG_BK 64
#define WG_HD 128
#define WG_BOX (WG_BK * 128)        // one 64-dim box of a K or V tile: WG_BK rows of 128 bytes
#define WG_TILE (2 * WG_BOX)        // a K or V tile of 16-bit values
#define WG_QTILE (2 * WG_BQ * 128)  // a head's Q tile
static_assert(WG_BQ == WG_BK, "Q and K tiles share the swizzled layout (wg_off, WG_BOX)");

// Dynamic shared memory, either cache: 1 KiB to align the swizzled tiles, the Q tiles, then three
// sets of (K, V) tiles: tile t's K for S, tile t - 1's V for P V, tile t + 1 landing.
template <int HPB>
__host__ __device__ constexpr int prefill_wg_smem() {
    return 1024 + HPB * WG_QTILE + 3 * 2 * WG_TILE;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Byte offset of 16-byte piece c (of 16: dims 8c .. 8c + 7) of row r in a swizzled tile.
__device__ __forceinline__ int wg_off(int r, int c) {
    return (c >> 3) * WG_BOX + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

// Shared-memory matrix descriptors with the 128-byte swizzle. K-major (Q, K): start, 8-row groups
// 1024 bytes apart (the leading offset unused). MN-major (V, keys as K): atoms of 64 dims x 8 keys
// (1024 bytes); the next 64 dims a box on (leading offset), the next 8 keys 1024 on (stride).
__device__ __forceinline__ uint64_t wg_desc_k(uint32_t addr) {
    return (uint64_t)((addr & 0x3ffff) >> 4) | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) |
           (1ull << 62);
}
__device__ __forceinline__ uint64_t wg_desc_mn(uint32_t addr) {
#ifdef WG_V_SBO_LBO_SWAP
    return (uint64_t)((addr & 0x3ffff) >> 4) | ((uint64_t)(1024 >> 4) << 16) |
           ((uint64_t)(WG_BOX >> 4) << 32) | (1ull << 62);
#else
    return (uint64_t)((addr & 0x3ffff) >> 4) | ((uint64_t)(WG_BOX >> 4) << 16) |
           ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
#endif
}

__device__ __forceinline__ void wg_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wg_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wg_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from touching registers an asynchronous MMA may still read or write.
template <int N>
__device__ __forceinline__ void wg_hold(float (&d)[N][4]) {
#pragma unroll
    for (int i = 0; i < N; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) asm volatile("" : "+f"(d[i][e])::"memory");
}
// A copy of S's accumulators, taken after the wait that completes them (volatile: not hoisted
// above it). The softmax works on the copy: writing the accumulators themselves while P V is in
// flight would make ptxas serialize every wgmma.
__device__ __forceinline__ void wg_take(float (&x)[8][4], const float (&d)[8][4]) {
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) asm volatile("mov.b32 %0, %1;" : "=f"(x[i][e]) : "f"(d[i][e]));
}
__device__ __forceinline__ void wg_hold(uint32_t (&a)[4][4]) {
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) asm volatile("" : "+r"(a[i][e])::"memory");
}

#define WG_D8(d)                                                                              \
    "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), \
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]),            \
        "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]),            \
        "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),            \
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]),            \
        "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
#define WG_R32                                                                                   \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define WG_R64                                                                                    \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "  \
    "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "  \
    "%56, %57, %58, %59, %60, %61, %62, %63}"

// s (64 query rows x 64 keys) = Q (shared, K-major) . K^T (shared, K-major) over one k16 step,
// added to s unless `first`.
template <typename T>
__device__ __forceinline__ void wg_qk(float (&s)[8][4], uint64_t qd, uint64_t kd, bool first) {
    if constexpr (std::is_same<T, fp8>::value)
        asm volatile("{\n .reg .pred p;\n setp.eq.u32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " WG_R32
                     ", %32, %33, p, 1, 1, 0, 0;\n}\n"
                     : WG_D8(s)
                     : "l"(qd), "l"(kd), "r"((uint32_t)first));
    else
        asm volatile("{\n .reg .pred p;\n setp.eq.u32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WG_R32
                     ", %32, %33, p, 1, 1, 0, 0;\n}\n"
                     : WG_D8(s)
                     : "l"(qd), "l"(kd), "r"((uint32_t)first));
}
// o (64 query rows x 128 dims) += P (registers, keys 16 kk ..) . V (shared, MN-major), one k16
// step.
template <typename T>
__device__ __forceinline__ void wg_pv(float (&o)[16][4], const uint32_t (&p)[4], uint64_t vd) {
    float(&lo)[8][4] = reinterpret_cast<float(&)[8][4]>(o[0]);
    float(&hi)[8][4] = reinterpret_cast<float(&)[8][4]>(o[8]);
    if constexpr (std::is_same<T, fp8>::value)
        asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " WG_R64
                     ", {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
                     : WG_D8(lo), WG_D8(hi)
                     : "r"(p[0]), "r"(p[1]), "r"(p[2]), "r"(p[3]), "l"(vd));
    else
        asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WG_R64
                     ", {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
                     : WG_D8(lo), WG_D8(hi)
                     : "r"(p[0]), "r"(p[1]), "r"(p[2]), "r"(p[3]), "l"(vd));
}
#undef WG_D8
#undef WG_R32
#undef WG_R64

template <typename T, int HPB>
__device__ __forceinline__ void attn_prefill_wg_body(
    const float* __restrict__ q, const T* __restrict__ kc, const T* __restrict__ vc,
    void* __restrict__ out, const uint32_t* __restrict__ tiles,
    const uint32_t* __restrict__ seq_info, const uint32_t* __restrict__ block_tables, int n_heads,
    int n_kv_heads, int block_size, float scale, int out_bf16) {
    constexpr bool FP8 = std::is_same<T, fp8>::value;
    constexpr int NT = 128 * HPB;
    using Mma = MmaFor<T>;
    extern __shared__ __align__(16) unsigned char wg_raw_smem[];
    // Offset, not a cast through an integer, so the compiler keeps shared-memory accesses.
    unsigned char* smem =
        wg_raw_smem + (-(int)__cvta_generic_to_shared(wg_raw_smem) & 1023);
    const uint32_t s0 = (uint32_t)__cvta_generic_to_shared(smem);
    unsigned char* kv = smem + HPB * WG_QTILE;  // tile sets: K at +0, V at +WG_TILE

    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, wgi = threadIdx.x >> 7;
    const int h = blockIdx.y * HPB + wgi;
    const uint32_t* info = seq_info + 4 * tiles[2 * blockIdx.x];
    const int row0 = tiles[2 * blockIdx.x + 1];
    const int q_start = info[0], q_len = info[1], ctx_len = info[2];
    const uint32_t* table = block_tables + info[3];
    const int tile_rows = min(WG_BQ, q_start + q_len - row0);
    const int base_pos = ctx_len - q_len - q_start;
    const int max_pos = base_pos + row0 + tile_rows - 1;
    const int kvh = h / (n_heads / n_kv_heads);
    const int kv_dim = n_kv_heads * WG_HD;
    const int g = lane >> 2, tig = lane & 3;
    const int r_lo = warp * 16 + g, r_hi = r_lo + 8;
    const int pos_lo = base_pos + row0 + r_lo, pos_hi = pos_lo + 8;
    const int n_tiles = max_pos / WG_BK + 1;

    // A thread's copies of a tile: IT 16-byte pieces of key rows (PIECES a row), the same ones
    // of K and V. Their cache slots are looked up one tile ahead, so that the block table's
    // reads are not waited for when the copies are issued.
    constexpr int PIECES = WG_HD * (int)sizeof(T) / 16;
    constexpr int IT = WG_BK * PIECES / NT;
    uint32_t slots[IT];
    // The slots of tile t's keys (past max_pos: max_pos's row, masked out of S).
    auto lookup = [&](int t) {
        if (t >= n_tiles) return;
#pragma unroll
        for (int i = 0; i < IT; i++) {
            const int key = min(t * WG_BK + (int)(threadIdx.x + i * NT) / PIECES, max_pos);
            slots[i] = (uint32_t)(key_offset(table, key, max_pos, block_size, 1, 0, 0));
        }
    };
    auto src = [&](int i) {  // the cache offset (in elements) of piece i
        constexpr int VEC = 16 / (int)sizeof(T);
        return (size_t)slots[i] * kv_dim + kvh * WG_HD + (threadIdx.x + i * NT) % PIECES * VEC;
    };
    auto stage_k = [&](int t) -> unsigned char* {  // tile t's K (its V at + WG_TILE)
        return kv + (t % 3) * 2 * WG_TILE;
    };
    // bf16: tile t's copies straight into the swizzled tiles of its stage with cp.async, as one
    // commit group (empty past the last tile, so that every wait counts the same groups).
    auto issue = [&](int t) {
        if (t < n_tiles) {
#pragma unroll
            for (int i = 0; i < IT; i++) {
                const int x = threadIdx.x + i * NT, at = wg_off(x / PIECES, x % PIECES);
                cp_async16(stage_k(t) + at, kc + src(i));
                cp_async16(stage_k(t) + WG_TILE + at, vc + src(i));
            }
        }
        cp_async_commit();
    };
    // fp8: tile t's pieces into registers, then (once the set tile t - 3 used is free) widened
    // to f16 into the swizzled tiles of its set by the thread that loaded them, so no barrier
    // waits for the loads and no raw copy goes through shared memory.
    uint4 kr[FP8 ? IT : 1], vr[FP8 ? IT : 1];
    auto fetch = [&](int t) {
        if (t >= n_tiles) return;
#pragma unroll
        for (int i = 0; i < IT; i++) {
            kr[i] = __ldg(reinterpret_cast<const uint4*>(kc + src(i)));
            vr[i] = __ldg(reinterpret_cast<const uint4*>(vc + src(i)));
        }
    };
    auto put = [&](int t) {
        unsigned char* dk = stage_k(t);
#pragma unroll
        for (int i = 0; i < IT; i++) {
            // Piece i's 16 fp8 values are the 16-bit tiles' pieces 2 c and 2 c + 1.
            const int x = threadIdx.x + i * NT, j = x / PIECES, c = 2 * (x % PIECES);
            auto widen = [&](int at, uint32_t a, uint32_t b) {
                *reinterpret_cast<uint4*>(dk + at) = fp8x8_to_f16x8(make_uint2(a, b));
            };
            widen(wg_off(j, c), kr[i].x, kr[i].y);
            widen(wg_off(j, c + 1), kr[i].z, kr[i].w);
            widen(WG_TILE + wg_off(j, c), vr[i].x, vr[i].y);
            widen(WG_TILE + wg_off(j, c + 1), vr[i].z, vr[i].w);
        }
    };
    lookup(0);
    if constexpr (FP8) {
        fetch(0);
    } else {
        issue(0);
    }
    lookup(1);

    // This warpgroup's Q tile: rows past the tile zero, scaled, rounded, swizzled.
    unsigned char* qs = smem + wgi * WG_QTILE;
    {
        const float qscale = scale * 1.4426950408889634f;
        const int t = threadIdx.x & 127;
#pragma unroll
        for (int i = 0; i < WG_BQ * 16 / 128; i++) {
            const int x = t + 128 * i, r = x / 16, c = x % 16;
            uint4 v = make_uint4(0, 0, 0, 0);
            if (r < tile_rows) {
                const float4* qr = reinterpret_cast<const float4*>(
                    q + ((size_t)(row0 + r) * n_heads + h) * WG_HD + 8 * c);
                const float4 a = qr[0], b = qr[1];
                v = make_uint4(Mma::pack(a.x * qscale, a.y * qscale),
                               Mma::pack(a.z * qscale, a.w * qscale),
                               Mma::pack(b.x * qscale, b.y * qscale),
                               Mma::pack(b.z * qscale, b.w * qscale));
            }
            *reinterpret_cast<uint4*>(qs + wg_off(r, c)) = v;
        }
    }
    const uint32_t q_addr = s0 + wgi * WG_QTILE;

    float o[16][4], acc_s[8][4] = {};
    uint32_t pa[4][4], pn[4][4];
#pragma unroll
    for (int n = 0; n < 16; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    RowSoftmax sm;

    // Issues S = Q K(t)^T.
    auto issue_s = [&](int t) {
        wg_fence();
        const uint32_t k_addr = (uint32_t)__cvta_generic_to_shared(stage_k(t));
#pragma unroll
        for (int i = 0; i < 8; i++) {  // k16 step i: its box, 32 bytes a step within it
            const uint32_t off = (i >> 2) * WG_BOX + 32 * (i & 3);
            wg_qk<T>(acc_s, wg_desc_k(q_addr + off), wg_desc_k(k_addr + off), i == 0);
        }
        wg_commit();
    };
    // Issues O += P V(t) with pa.
    auto issue_pv = [&](int t) {
        wg_fence();
        const uint32_t v_addr = (uint32_t)__cvta_generic_to_shared(stage_k(t) + WG_TILE);
#pragma unroll
        for (int kk = 0; kk < 4; kk++) wg_pv<T>(o, pa[kk], wg_desc_mn(v_addr + kk * 2048));
        wg_commit();
    };
    // Tile t's (keys from k0) mask and online softmax (attn_prefill_tc's), on a copy of S: P
    // into pn, O's factors into c_lo / c_hi.
    float c_lo = 1.f, c_hi = 1.f;
    auto softmax = [&](int k0) {
        float s[8][4];
        wg_take(s, acc_s);
        const RowSoftmax::Tile t = sm.update(s, k0, pos_lo, pos_hi, g, tig);
        c_lo = t.c_lo;
        c_hi = t.c_hi;
        sm.probs<Mma>(s, t, pn);
    };
    // O rescaled every tile: skipping it where no row's max grew (attn_prefill_tc's branch)
    // makes ptxas serialize the wgmmas.
    auto rescale = [&]() {
#pragma unroll
        for (int n = 0; n < 16; n++) {
            o[n][0] *= c_lo;
            o[n][1] *= c_lo;
            o[n][2] *= c_hi;
            o[n][3] *= c_hi;
        }
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
#pragma unroll
            for (int e = 0; e < 4; e++) pa[kk][e] = pn[kk][e];
        // Done here, not sunk past the next S's issue (ptxas would serialize the wgmmas).
        wg_hold(o);
        wg_hold(pa);
    };

    // Makes this thread's writes (Q, widened tiles) and landed copies visible to the tensor
    // cores, once the block's barrier after it has passed.
    auto publish = [] { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); };
    // One tile: S(t) and P V(t - 1) issued, `between` (which must not touch the products'
    // registers) while they run, then tile t's softmax while P V runs, and O rescaled.
    auto step = [&](int t, auto between) {
        issue_s(t);
        issue_pv(t - 1);
        between();
        wg_wait<1>();  // S(t) is done; P V(t - 1) may still run
        softmax(t * WG_BK);
        wg_wait<0>();
        wg_hold(o);
        wg_hold(pa);
        rescale();
    };
    // The first tile (no P V before it) is peeled: a branch around a wgmma in the loop makes
    // ptxas wait for every wgmma.
    auto first = [&](auto between) {
        issue_s(0);
        between();
        wg_wait<0>();
        softmax(0);
        rescale();  // O is zero: only P moves
    };
    // Tile t + 1's loads go out after tile t's products are issued, into the set tile t - 2
    // used (every warpgroup is done with it), with tile t + 2's lookups.
    auto arrive = [&](int t) {
        if constexpr (FP8) {
            put(t);
        } else {
            cp_async_wait<0>();
        }
        publish();
        __syncthreads();  // tile t is in; every warpgroup is done with tile t - 2
    };
    auto next = [&](int t) {
        if constexpr (FP8) {
            fetch(t + 1);
        } else {
            issue(t + 1);
        }
        lookup(t + 2);
    };
    arrive(0);
    first([&] { next(0); });
    for (int t = 1; t < n_tiles; t++) {
        arrive(t);
        step(t, [&] { next(t); });
    }
    issue_pv(n_tiles - 1);
    wg_wait<0>();
    wg_hold(o);

    float inv_lo, inv_hi;
    sm.finish(inv_lo, inv_hi);
    auto store = [&](int r, int d, float a, float b) {
        const size_t at = ((size_t)(row0 + r) * n_heads + h) * WG_HD + d;
        if (out_bf16)
            *reinterpret_cast<__nv_bfloat162*>(static_cast<bf16*>(out) + at) =
                __floats2bfloat162_rn(a, b);
        else
            *reinterpret_cast<float2*>(static_cast<float*>(out) + at) = make_float2(a, b);
    };
#pragma unroll
    for (int n = 0; n < 16; n++) {
        const int d = 8 * n + 2 * tig;
        if (r_lo < tile_rows) store(r_lo, d, o[n][0] * inv_lo, o[n][1] * inv_lo);
        if (r_hi < tile_rows) store(r_hi, d, o[n][2] * inv_hi, o[n][3] * inv_hi);
    }
}
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG_BODY(T, HPB)                                                                          \
    attn_prefill_wg_body<T, HPB>(q, kc, vc, out, tiles, seq_info, block_tables, n_heads,         \
                                 n_kv_heads, block_size, scale, out_bf16)
#else
#define WG_BODY(T, HPB)
#endif
#define ATTN_PREFILL_WG(NAME, T, HPB)                                                            \
    extern "C" __global__ void __launch_bounds__(128 * HPB, 1) NAME(                             \
        const float* __restrict__ q, const T* __restrict__ kc, const T* __restrict__ vc,         \
        void* __restrict__ out, const uint32_t* __restrict__ tiles,                              \
        const uint32_t* __restrict__ seq_info, const uint32_t* __restrict__ block_tables,        \
        int n_heads, int n_kv_heads, int block_size, float scale, int out_bf16) {                \
        pdl_begin();                                                                             \
        WG_BODY(T, HPB);                                                                         \
    }
ATTN_PREFILL_WG(attn_prefill_wg_128, bf16, 1)
ATTN_PREFILL_WG(attn_prefill_wg_fp8_128, fp8, 1)
ATTN_PREFILL_WG(attn_prefill_wg_h2_128, bf16, 2)
ATTN_PREFILL_WG(attn_prefill_wg_h2_fp8_128, fp8, 2)
#undef ATTN_PREFILL_WG
#undef WG_BODY
