//! Launchers of the attention kernels: decode rows and short chunks (the tensor-core kernel of
//! attention_decode_tc.cu, the CUDA-core one of attention_decode.cu for other head layouts, and
//! the merge of their splits), prefill tiles (tensor-core, attention_prefill.cu, or the
//! CUDA-core tiled kernel of attention.cu), and the RoPE + cache write before them.

use cudarc::driver::{CudaFunction, LaunchConfig};

use super::{cfg, Kernels, RopeShape, GEMV_MAX_ROWS};
use crate::BackendError;

/// Heads of `rope_write_kv` per block, a warp each (ROPE_HEADS_PER_BLOCK).
const ROPE_HEADS_PER_BLOCK: usize = 4;
/// Splits per row the decode attention kernel may use (DEC_MAX_SPLITS in attention_decode.cu).
pub const DECODE_MAX_SPLITS: usize = 32;
/// Rows per decode attention launch: its split buffer is sized for this many rows.
pub const DECODE_CHUNK_ROWS: usize = 64;
/// Lanes per key the decode attention kernel comes in (`attn_decode_LPK_HB`).
pub(super) const DECODE_LANES_PER_KEY: [usize; 3] = [8, 16, 32];
/// Query heads per block it comes in.
pub(super) const DECODE_HEADS_PER_BLOCK: [usize; 3] = [1, 2, 4];
/// Keys per split at least, of the CUDA-core and the tensor-core decode kernels
/// (DEC_SPLIT_MIN, DTC_SPLIT_MIN). The tensor-core kernel's: each split's block costs ~3 us
/// beyond its tiles; 64 rows of 1,000-2,000 fp8 keys take 86 us with splits of 256 keys, 80
/// with 384 (16 rows 35 -> 29.5), one row of 1,024 keys 13.6 -> 14.7 (an H200,
/// tests/device/decode_attn_bench.cu).
pub(super) const DECODE_SPLIT_MIN: i32 = 64;
pub(super) const DECODE_TC_SPLIT_MIN: i32 = 384;
/// Launch rows up to which the split merge loads every split's values at once: one round trip
/// instead of one a split (1 row at 8,192 keys: 26 -> 17 us a layer on an H200), but 4% slower
/// from 32 rows on, where the registers it takes cost occupancy.
const DECODE_MERGE_WIDE_ROWS: usize = 8;
/// Warps per block and keys per warp tile of the tensor-core decode kernel (DTC_WARPS, DTC_BK).
pub(super) const DECODE_TC_WARPS: usize = 4;
pub(super) const DECODE_TC_BK: usize = 16;

/// Query heads per KV head, and KV heads, the one-launch decode attention takes
/// (DTC_MAX_GROUP; its arrival counters, DECODE_CHUNK_ROWS of them a KV head).
const ROPE_ATTN_MAX_GROUP: usize = 16;
pub(super) const ROPE_ATTN_MAX_KV_HEADS: usize = 256;
/// Keys up to which a row takes the one-launch attention. Its split merge runs in one block a KV
/// head, where the merge kernel has a block a head: with splits of 128 keys, 32 splits cost more
/// than the two launches it saves (Qwen3-8B shape on an H100, per-request decode after a
/// 2,048-token prompt +1%, after 8,192 -1%), so longer rows take the three kernels (a graph of
/// their own at batch 1, `graph::GraphKey`). Not measured again since splits are 384 keys.
pub const ROPE_ATTN_MAX_KEYS: usize = 4096;

/// The one-launch decode attention's shared memory a block by the rows of its launch, which sets
/// how many blocks share an SM. Few rows have few working blocks, and a small footprint packs
/// them onto few SMs beside the kernel before (launched early by PDL); many rows need every
/// block an SM the registers allow. Measured on a lent H200 (Qwen3-8B shape, fp8 weights and KV
/// cache, in process, output tok/s against the three kernels in one command, 2026-11-29):
/// - up to GEMV_MAX_ROWS rows, ROPE_ATTN_FEW_ROWS_SMEM (2 blocks an SM on Hopper): 2 / 8
///   concurrent +1.2% / +2.4% (the 16 heads' room below -1.9% / +0.5%, 115 KiB +1.7% / -2.3%);
///   tg128 the same with 46, 80 or 115 KiB;
/// - up to ROPE_ATTN_SPREAD_ROWS, room for the largest GQA group (DTC_MAX_GROUP: 4 blocks an SM
///   at head_dim 128): 16 / 32 concurrent +3.5% / +1.9% (80 KiB -3.6% / -9.1% against it; the
///   own group's room +1.5% / +0.8%);
/// - past them, room for the block's own group (Qwen3-8B's 4 heads: 5 an SM): 48 / 64
///   concurrent +0.1% / +0.7% (the 16 heads' room -0.6% / -0.6%).
const ROPE_ATTN_FEW_ROWS_SMEM: usize = 80 * 1024;
const ROPE_ATTN_SPREAD_ROWS: usize = 32;

/// Whether decode steps run their RoPE + cache write and attention as one launch
/// (HEARTH_ROPE_ATTN=0: the three kernels, to compare).
pub(super) fn rope_attn_from_env() -> bool {
    std::env::var("HEARTH_ROPE_ATTN").as_deref() != Ok("0")
}

/// Keys per shared-memory tile of the tensor-core prefill kernel (TC_BK).
const PREFILL_TC_BK: usize = 64;

impl Kernels {
    /// Dynamic shared memory of the tensor-core prefill kernel (prefill_tc_smem<HD, T, HPB>):
    /// two stages of K and V tiles of bf16 rows padded by 8, or for fp8 one widened K and V
    /// tile pair plus the raw tile copies land in; then a Q tile (64 padded rows) per head.
    pub(super) fn prefill_tc_smem(hd: usize, fp8: bool, hpb: usize) -> usize {
        let tile = PREFILL_TC_BK * (hd + 8) * 2;
        let kv = if fp8 {
            2 * tile + PREFILL_TC_BK * hd
        } else {
            4 * tile
        };
        kv + hpb * tile
    }

    /// Dynamic shared memory of the wgmma prefill kernel (prefill_wg_smem<HPB>), either cache:
    /// 1 KiB to align its swizzled tiles, a 64-row Q tile of 128 dims a head, and three sets of
    /// K and V tiles. 113 KiB for one head: two blocks share an SM.
    pub(super) fn prefill_wg_smem(hpb: usize) -> usize {
        const TILE: usize = PREFILL_TC_BK * 128 * 2;
        1024 + hpb * TILE + 3 * 2 * TILE
    }

    /// The prefill attention kernel for long chunks, for the startup log's kernel path lines.
    pub fn prefill_attention_kernel(&self) -> &'static str {
        if self.attn_prefill_wg.is_some() {
            "attn_prefill_wg on wgmma for head_dim 128 (HEARTH_PREFILL_ATTN=mma: mma.sync), \
             attn_prefill_tc on mma.sync for 64"
        } else {
            "attn_prefill_tc on mma.sync"
        }
    }

    /// Dynamic shared memory of the tensor-core decode kernel (DtcSmem<HD, T>::BYTES): per warp
    /// two stages of K and V tiles (bf16 rows padded by 8 values, or fp8 rows padded by 16
    /// bytes), at least the warps' merge area.
    pub(super) fn decode_tc_smem(hd: usize, fp8: bool) -> usize {
        let row = if fp8 { hd + 16 } else { (hd + 8) * 2 };
        let merge = DECODE_TC_WARPS * 16 * (hd + 2) * 4;
        (DECODE_TC_WARPS * 2 * 2 * DECODE_TC_BK * row).max(merge)
    }

    /// Dynamic shared memory of the one-launch decode attention (attn_decode_tc_rope) with room
    /// for `group` query heads: the decode kernel's, then the query heads and the key
    /// (DTC_ROPE_SMEM).
    fn decode_tc_rope_smem(hd: usize, fp8: bool, group: usize) -> usize {
        Self::decode_tc_smem(hd, fp8) + (group + 1) * hd * 4
    }

    /// The most dynamic shared memory a one-launch decode attention block is given.
    pub(super) fn rope_attn_max_smem(hd: usize, fp8: bool) -> usize {
        Self::decode_tc_rope_smem(hd, fp8, ROPE_ATTN_MAX_GROUP).max(ROPE_ATTN_FEW_ROWS_SMEM)
    }

    /// The dynamic shared memory of a one-launch decode attention launch of `rows` rows: more
    /// than its blocks use for few rows, so that fewer share an SM (ROPE_ATTN_SPREAD_ROWS).
    fn rope_attn_smem(a: &AttnLaunch, rows: usize) -> usize {
        let own = Self::decode_tc_rope_smem(a.head_dim, a.fp8, a.n_heads / a.n_kv_heads);
        if rows <= GEMV_MAX_ROWS {
            own.max(ROPE_ATTN_FEW_ROWS_SMEM)
        } else if rows <= ROPE_ATTN_SPREAD_ROWS {
            Self::decode_tc_rope_smem(a.head_dim, a.fp8, ROPE_ATTN_MAX_GROUP)
        } else {
            own
        }
    }

    /// Whether a decode step runs its q/k norm + RoPE + cache write and its decode attention
    /// (with the split merge) as one launch, `rope_attention_decode`: a head layout the
    /// tensor-core decode kernel takes, no weight ring (which records the three steps itself),
    /// and not HEARTH_ROPE_ATTN=0.
    pub fn fuses_rope_attention(&self, n_heads: usize, n_kv_heads: usize, head_dim: usize) -> bool {
        self.rope_attn_on
            && self.ring.is_none()
            && Self::decode_tc_supports(n_heads, n_kv_heads, head_dim)
            && n_kv_heads <= ROPE_ATTN_MAX_KV_HEADS
    }

    /// `rope_write_kv` (`r`) then `attention_decode` (`a`) of the `r.rows` rows listed at
    /// `rows`, each its own sequence's one new token, in launches of DECODE_CHUNK_ROWS rows
    /// (attn_decode_tc_rope), with the same bits; `parts` is the split buffer. The caller
    /// checked `fuses_rope_attention`.
    pub fn rope_attention_decode(
        &self,
        r: &RopeWriteLaunch,
        a: &AttnLaunch,
        rows: u64,
        parts: u64,
    ) -> Result<(), BackendError> {
        let [nh, nkv, _, bs] = a.layout();
        let (rd, neox) = (r.shape.rotary_dim as i32, i32::from(r.shape.neox));
        let acc = parts + Self::decode_ml_bytes(a.n_heads) as u64;
        let (kc, vc) = r.caches;
        let ob = i32::from(a.out_bf16);
        let f =
            &self.attn_decode_tc_rope[a.g16()][usize::from(a.fp8)][usize::from(a.head_dim == 128)];
        for start in (0..r.rows).step_by(DECODE_CHUNK_ROWS) {
            let n = (r.rows - start).min(DECODE_CHUNK_ROWS);
            let chunk_rows = rows + 4 * start as u64;
            let c = LaunchConfig {
                grid_dim: (n as u32, a.n_kv_heads as u32, DECODE_MAX_SPLITS as u32),
                block_dim: (32 * DECODE_TC_WARPS as u32, 1, 1),
                shared_mem_bytes: Self::rope_attn_smem(a, n) as u32,
            };
            launch!(
                @fn self,
                f,
                c,
                r.q,
                r.k,
                r.v,
                r.norms.0,
                r.norms.1,
                r.eps,
                r.positions,
                r.inv_freq,
                r.slots,
                kc,
                vc,
                a.out,
                ob,
                parts,
                acc,
                self.attn_arrivals.1,
                chunk_rows,
                a.tok_seq,
                a.seq_info,
                a.block_tables,
                nh,
                nkv,
                bs,
                a.scale,
                rd,
                neox
            )?;
        }
        Ok(())
    }

    /// Whether the tensor-core decode kernel handles this head layout (GQA groups of up to 16
    /// query heads, head_dim 64 or 128).
    pub fn decode_tc_supports(n_heads: usize, n_kv_heads: usize, head_dim: usize) -> bool {
        n_kv_heads > 0
            && n_heads.is_multiple_of(n_kv_heads)
            && n_heads / n_kv_heads <= 16
            && (head_dim == 64 || head_dim == 128)
    }

    /// Whether the decode attention kernel handles this head size.
    pub fn decode_attention_supports(head_dim: usize) -> bool {
        head_dim.is_multiple_of(8) && head_dim <= 256
    }

    /// Causal paged attention of `n_rows` single rows listed at `rows` (decode rows and short
    /// chunks), in launches of DECODE_CHUNK_ROWS rows; `parts` is the split buffer: (max, sum)
    /// pairs then partial outputs, sized by `decode_parts_bytes`.
    pub fn attention_decode(
        &self,
        a: &AttnLaunch,
        rows: u64,
        n_rows: usize,
        parts: u64,
    ) -> Result<(), BackendError> {
        if Self::decode_tc_supports(a.n_heads, a.n_kv_heads, a.head_dim) {
            return self.attention_decode_tc(a, rows, n_rows, parts);
        }
        assert!(
            !a.out_bf16 || n_rows == 0,
            "the CUDA-core decode attention writes f32 rows"
        );
        assert!(
            Self::decode_attention_supports(a.head_dim),
            "decode attention: head_dim {}",
            a.head_dim
        );
        let group = a.n_heads / a.n_kv_heads;
        let hi = match group {
            g if g.is_multiple_of(4) => 2,
            g if g.is_multiple_of(2) => 1,
            _ => 0,
        };
        let heads_per_block = DECODE_HEADS_PER_BLOCK[hi];
        let li = DECODE_LANES_PER_KEY
            .iter()
            .position(|l| 8 * l >= a.head_dim)
            .expect("head_dim <= 256 was checked");
        let [nh, nkv, hd, bs] = a.layout();
        let ml = parts;
        let acc = parts + Self::decode_ml_bytes(a.n_heads) as u64;
        for start in (0..n_rows).step_by(DECODE_CHUNK_ROWS) {
            let n = (n_rows - start).min(DECODE_CHUNK_ROWS) as u32;
            let rows = rows + 4 * start as u64;
            let c = LaunchConfig {
                grid_dim: (
                    n,
                    (a.n_heads / heads_per_block) as u32,
                    DECODE_MAX_SPLITS as u32,
                ),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            launch!(
                @fn self,
                &self.attn_decode[usize::from(a.fp8)][li * 3 + hi],
                c,
                a.q,
                a.k_cache,
                a.v_cache,
                a.out,
                ml,
                acc,
                rows,
                a.tok_seq,
                a.seq_info,
                a.block_tables,
                nh,
                nkv,
                hd,
                bs,
                a.scale
            )?;
            self.decode_merge(a, (rows, n), parts, DECODE_SPLIT_MIN)?;
        }
        Ok(())
    }

    /// `attention_decode` on the tensor cores (attention_decode_tc.cu).
    fn attention_decode_tc(
        &self,
        a: &AttnLaunch,
        rows: u64,
        n_rows: usize,
        parts: u64,
    ) -> Result<(), BackendError> {
        let ml_bytes = Self::decode_ml_bytes(a.n_heads);
        let smem = Self::decode_tc_smem(a.head_dim, a.fp8);
        if n_rows == 1
            && !self.skipping()
            && self.ring_attention(a, (rows, parts, ml_bytes), smem)?
        {
            return Ok(());
        }
        let [nh, nkv, _, bs] = a.layout();
        let ob = i32::from(a.out_bf16);
        let ml = parts;
        let acc = parts + ml_bytes as u64;
        let f = &self.attn_decode_tc[a.g16()][usize::from(a.fp8)][usize::from(a.head_dim == 128)];
        for start in (0..n_rows).step_by(DECODE_CHUNK_ROWS) {
            let n = (n_rows - start).min(DECODE_CHUNK_ROWS) as u32;
            let rows = rows + 4 * start as u64;
            let c = LaunchConfig {
                grid_dim: (n, a.n_kv_heads as u32, DECODE_MAX_SPLITS as u32),
                block_dim: (32 * DECODE_TC_WARPS as u32, 1, 1),
                shared_mem_bytes: smem as u32,
            };
            launch!(
                @fn self,
                f,
                c,
                a.q,
                a.k_cache,
                a.v_cache,
                a.out,
                ml,
                acc,
                rows,
                a.tok_seq,
                a.seq_info,
                a.block_tables,
                nh,
                nkv,
                bs,
                a.scale,
                ob
            )?;
            self.decode_merge(a, (rows, n), parts, DECODE_TC_SPLIT_MIN)?;
        }
        Ok(())
    }

    /// Merges the splits of `n` launch rows at `rows` (attn_decode_merge): the wide form, every
    /// split's values loaded at once, up to DECODE_MERGE_WIDE_ROWS rows, where the merge is
    /// all latency; the serial one (same bits, fewer registers) past that.
    fn decode_merge(
        &self,
        a: &AttnLaunch,
        (rows, n): (u64, u32),
        parts: u64,
        split_min: i32,
    ) -> Result<(), BackendError> {
        let [nh, _, hd, _] = a.layout();
        let acc = parts + Self::decode_ml_bytes(a.n_heads) as u64;
        let wide = n as usize <= DECODE_MERGE_WIDE_ROWS;
        let ob = i32::from(a.out_bf16);
        launch!(
            @fn self,
            &self.attn_decode_merge[usize::from(wide)],
            cfg((n, a.n_heads as u32), 128),
            parts,
            acc,
            a.out,
            rows,
            a.tok_seq,
            a.seq_info,
            nh,
            hd,
            split_min,
            ob
        )
    }

    fn decode_ml_bytes(n_heads: usize) -> usize {
        (DECODE_CHUNK_ROWS * n_heads * DECODE_MAX_SPLITS * 8).div_ceil(256) * 256
    }

    /// Bytes of the split buffer `attention_decode` needs for this head layout.
    pub fn decode_parts_bytes(n_heads: usize, head_dim: usize) -> usize {
        Self::decode_ml_bytes(n_heads)
            + DECODE_CHUNK_ROWS * n_heads * DECODE_MAX_SPLITS * head_dim * 4
    }

    /// Whether the tensor-core prefill kernel handles this head size.
    pub fn tc_attention_supports(head_dim: usize) -> bool {
        head_dim == 64 || head_dim == 128
    }

    /// Causal paged attention of 64-row query tiles on the tensor cores (attention_prefill.cu),
    /// one block per tile and pair of heads of a KV group (one head for odd groups and small
    /// grids).
    pub fn attention_tiles_tc(
        &self,
        a: &AttnLaunch,
        tiles: u64,
        n_tiles: usize,
    ) -> Result<(), BackendError> {
        if n_tiles == 0 {
            return Ok(());
        }
        assert!(
            Self::tc_attention_supports(a.head_dim),
            "tensor-core attention: head_dim {}",
            a.head_dim
        );
        let [nh, nkv, _, bs] = a.layout();
        // Two heads per block (sharing K and V tiles) where the KV group has an even size and
        // the grid still fills every SM with two blocks; else one head per block, for twice
        // the blocks (a 512-token chunk has 8 tiles: 128 blocks of two heads of Qwen3-8B).
        let pairs = (a.n_heads / a.n_kv_heads).is_multiple_of(2);
        let hpb = if pairs && n_tiles * a.n_heads / 2 >= 2 * self.sms {
            2
        } else {
            1
        };
        // The same grid, block and numerics on wgmma (bit for bit: tests/device/run.sh pattn).
        let (f, smem) = match &self.attn_prefill_wg {
            Some(wg) if a.head_dim == 128 => {
                (&wg[hpb - 1][usize::from(a.fp8)], Self::prefill_wg_smem(hpb))
            }
            _ => (
                &self.attn_prefill_tc[hpb - 1][usize::from(a.fp8)][usize::from(a.head_dim == 128)],
                Self::prefill_tc_smem(a.head_dim, a.fp8, hpb),
            ),
        };
        let ob = i32::from(a.out_bf16);
        let c = LaunchConfig {
            grid_dim: (n_tiles as u32, (a.n_heads / hpb) as u32, 1),
            block_dim: (128 * hpb as u32, 1, 1),
            shared_mem_bytes: smem as u32,
        };
        launch!(
            @fn self,
            f,
            c,
            a.q,
            a.k_cache,
            a.v_cache,
            a.out,
            tiles,
            a.seq_info,
            a.block_tables,
            nh,
            nkv,
            bs,
            a.scale,
            ob
        )
    }

    /// Whether the tiled prefill kernel handles this head size.
    pub fn tiled_attention_supports(head_dim: usize) -> bool {
        head_dim.is_multiple_of(16) && head_dim <= 128
    }

    /// Causal paged attention of 64-row query tiles (see attention_prefill in attention.cu).
    pub fn attention_tiles(
        &self,
        a: &AttnLaunch,
        tiles: u64,
        n_tiles: usize,
    ) -> Result<(), BackendError> {
        if n_tiles == 0 {
            return Ok(());
        }
        assert!(!a.out_bf16, "the CUDA-core tiled attention writes f32 rows");
        assert!(
            Self::tiled_attention_supports(a.head_dim),
            "tiled attention: head_dim {}",
            a.head_dim
        );
        let [nh, nkv, hd, bs] = a.layout();
        launch!(
            self,
            attention_prefill,
            cfg((n_tiles as u32, a.n_heads as u32), 128),
            a.q,
            a.k_cache,
            a.v_cache,
            a.out,
            tiles,
            a.seq_info,
            a.block_tables,
            nh,
            nkv,
            hd,
            bs,
            a.scale
        )
    }
}

/// The decode attention kernels of one cache type, in `attn_decode` order.
/// A tensor-core decode kernel's forms, `[group][cache][head_dim]`: KV groups of up to 8 query
/// heads (`{prefix}_{hd}`) and of 9 to 16 (`_g16`), bf16 and fp8 caches (`_fp8`), head_dim 64
/// and 128.
pub(super) fn decode_tc_variants(
    f: &dyn Fn(&str) -> Result<CudaFunction, BackendError>,
    prefix: &str,
) -> Result<[[[CudaFunction; 2]; 2]; 2], BackendError> {
    let one = |g16: bool, fp8: bool, hd: usize| {
        let (c, g) = (if fp8 { "_fp8" } else { "" }, if g16 { "_g16" } else { "" });
        f(&format!("{prefix}{c}{g}_{hd}"))
    };
    let cache =
        |g16: bool, fp8: bool| Ok::<_, BackendError>([one(g16, fp8, 64)?, one(g16, fp8, 128)?]);
    let group = |g16: bool| Ok::<_, BackendError>([cache(g16, false)?, cache(g16, true)?]);
    Ok([group(false)?, group(true)?])
}

pub(super) fn decode_variants(
    f: &dyn Fn(&str) -> Result<CudaFunction, BackendError>,
    prefix: &str,
) -> Result<Vec<CudaFunction>, BackendError> {
    DECODE_LANES_PER_KEY
        .iter()
        .flat_map(|l| DECODE_HEADS_PER_BLOCK.map(|h| (*l, h)))
        .map(|(l, h)| f(&format!("{prefix}_{l}_{h}")))
        .collect()
}

impl AttnLaunch {
    /// Which tensor-core decode form takes this head layout: 0 for KV groups of up to 8 query
    /// heads (one 8-column tile of them), 1 for 9 to 16 (two).
    fn g16(&self) -> usize {
        usize::from(self.n_heads / self.n_kv_heads > 8)
    }

    /// (n_heads, n_kv_heads, head_dim, block_size) as the kernels take them.
    fn layout(&self) -> [i32; 4] {
        [
            self.n_heads,
            self.n_kv_heads,
            self.head_dim,
            self.block_size,
        ]
        .map(|v| v as i32)
    }
}

/// Everything one attention launch reads.
pub struct AttnLaunch {
    pub q: u64,
    pub k_cache: u64,
    pub v_cache: u64,
    pub out: u64,
    pub tok_seq: u64,
    pub seq_info: u64,
    pub block_tables: u64,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub block_size: usize,
    pub scale: f32,
    /// fp8 e4m3 caches (else bf16).
    pub fp8: bool,
    /// `out` is bf16 (else f32): the tensor-core kernels (prefill tiles, decode rows and their
    /// split merge) write bf16, so a step asks for it only when those write every row.
    pub out_bf16: bool,
}

impl Kernels {
    /// q/k norms (when `norms` are not 0), rotary embedding of q and k in place, and k, v into
    /// the caches at `slots`, for `rows` rows (see rope_write_kv in attention.cu).
    pub fn rope_write_kv(&self, a: &RopeWriteLaunch) -> Result<(), BackendError> {
        let RopeShape {
            n_heads,
            head_dim,
            rotary_dim,
            neox,
        } = a.shape;
        assert!(head_dim <= 256, "rope_write_kv: head_dim {head_dim}");
        let (nh, nkv, hd, rd, neox) = (
            n_heads as i32,
            a.n_kv_heads as i32,
            head_dim as i32,
            rotary_dim as i32,
            neox as i32,
        );
        if a.rows == 1 && !self.skipping() && self.ring_rope(a)? {
            return Ok(());
        }
        let (kc, vc) = a.caches;
        launch!(
            @fn self,
            &self.rope_write_kv[usize::from(a.fp8)],
            cfg(
                (
                    a.rows as u32,
                    (n_heads + a.n_kv_heads).div_ceil(ROPE_HEADS_PER_BLOCK) as u32,
                ),
                32 * ROPE_HEADS_PER_BLOCK as u32,
            ),
            a.q,
            a.k,
            a.v,
            a.norms.0,
            a.norms.1,
            a.eps,
            a.positions,
            a.inv_freq,
            a.slots,
            kc,
            vc,
            nh,
            nkv,
            hd,
            rd,
            neox
        )
    }
}

/// Everything one `rope_write_kv` launch reads.
pub struct RopeWriteLaunch {
    pub q: u64,
    pub k: u64,
    pub v: u64,
    /// q_norm and k_norm weights, or (0, 0).
    pub norms: (u64, u64),
    pub eps: f32,
    pub positions: u64,
    pub inv_freq: u64,
    pub slots: u64,
    pub caches: (u64, u64),
    /// fp8 e4m3 caches (else bf16).
    pub fp8: bool,
    pub rows: usize,
    /// The rotary layout, with n_heads the query heads.
    pub shape: RopeShape,
    pub n_kv_heads: usize,
}
