//! Launchers of the mixture-of-experts kernels (moe.cu, moe_gemm.cu) and the MLA kernels (mla.cu).

use cudarc::driver::LaunchConfig;

use super::{cfg, norm_threads, row_threads, Kernels, RopeShape};
use crate::BackendError;

/// Limits of moe.cu's routing kernel (MOE_MAX_EXPERTS, MOE_MAX_TOPK, MOE_MAX_GROUPS).
pub const MOE_MAX_EXPERTS: usize = 512;
pub const MOE_MAX_TOPK: usize = 32;
pub const MOE_MAX_GROUPS: usize = 64;
/// Warps per block of the expert kernels (MOE_WARPS): one output feature each.
const MOE_WARPS: usize = 8;
/// moe_route_gemv's warps per block (MOE_ROUTE_WARPS), a router row (expert logit) each.
const MOE_ROUTE_WARPS: u32 = 4;
/// moe_tc.cu's sort block (MT_SORT_THREADS, at least MOE_MAX_EXPERTS) and warps per block
/// (MT_WARPS).
const MOE_SORT_THREADS: u32 = 512;
const MOE_TC_WARPS: u32 = 4;
/// Largest latent rank mla.cu takes (MLA_MAX_RANK), and its warps per block.
pub const MLA_MAX_RANK: usize = 512;
const MLA_WARPS: u32 = 4;
/// The (kv_lora_rank, rope_dim) mla_tc.cu is built for (MTC_RANK, MTC_ROPE): DeepSeek-V3's and
/// GLM-4.7-Flash's latent.
pub const MLA_TC_SHAPE: (usize, usize) = (512, 64);
/// W_UV outputs a block of mla_merge_uv (MUV_OUT in mla_tc.cu).
const MLA_UV_OUT: usize = 32;
/// mla_tc.cu's keys per tile, padded row widths, and the m-tiles of its narrow and wide variants.
const MLA_TC_BK: usize = 32;
const MLA_TC_ROW: usize = 512 + 64 + 8;
const MLA_TC_PROW: usize = MLA_TC_BK + 8;
const MLA_TC_MT: [usize; 2] = [2, 4];

/// moe_gemm.cu's tile (MG_BM, MG_BN) and K step (MG_BK): each expert's gathered rows are padded
/// to a multiple of MOE_GEMM_ROWS, and it takes N % MOE_GEMM_COLS == 0, K % MOE_GEMM_K == 0.
pub const MOE_GEMM_ROWS: usize = 128;
const MOE_GEMM_COLS: usize = 256;
const MOE_GEMM_K: usize = 64;
/// moe_gemm.cu's dynamic shared memory (MG_SMEM): four stages of MG_BM + MG_BN rows of
/// MG_LDS = MG_BK + 8 bf16 values.
pub(super) const MOE_GEMM_SMEM: usize = 4 * (MOE_GEMM_ROWS + MOE_GEMM_COLS) * (MOE_GEMM_K + 8) * 2;

/// Where a MoE layer's tensors are on the device.
/// mla_prep's buffers: the latent before its norm (`[rows, rank]` f32), the norm's weight and
/// the normed latent (f32, or bf16 with `latent_bf16`), the query and key rotary parts (f32, in
/// place; the key's `rope.head_dim` wide, filling the cache row past the latent), the step's
/// positions and slots, the RoPE frequencies and the layer's cache.
pub struct MlaPrepLaunch {
    pub k: u64,
    pub kv_norm: u64,
    pub latent: u64,
    pub latent_bf16: bool,
    pub eps: f32,
    pub q_rope: u64,
    pub k_rope: u64,
    pub positions: u64,
    pub inv_freq: u64,
    pub slots: u64,
    pub cache: u64,
    pub fp8: bool,
    pub rows: usize,
    pub rank: usize,
    pub rope: RopeShape,
    /// The absorbed query computed in the same launch (mla_prep's extra blocks), for decode rows.
    pub absorb: Option<MlaAbsorb>,
}

/// linear_heads of the query's non-rotary part (`[rows, n_heads * nope]` f32) by W_UK (`[n_heads
/// * rank, nope]` bf16) into `q_lat` (`[rows, n_heads * rank]` f32).
pub struct MlaAbsorb {
    pub q_nope: u64,
    pub w_uk: u64,
    pub q_lat: u64,
    pub nope: usize,
}

pub struct MoeLaunch {
    pub x: u64,
    pub x_bf16: bool,
    /// The router `[E, hidden]` bf16 when routing computes its own logits (moe_route_gemv),
    /// else 0 and `logits` holds them.
    pub router: u64,
    pub logits: u64,
    pub bias: u64,
    pub ids: u64,
    pub weights: u64,
    /// Experts' gate and up rows, `[E, 2 * inter, hidden]` bf16.
    pub gate_up: u64,
    /// Experts' down projections, `[E, hidden, inter]` bf16.
    pub down: u64,
    pub act: u64,
    /// The shared expert's output `[rows, hidden]`, or 0.
    pub shared: u64,
    /// The shared expert's gate, up and down matrices when the GEMV path folds it in as one
    /// more pair a row (its width equal to the experts'), else 0; `act` then holds `rows *
    /// (top_k + 1)` rows.
    pub shared_w: [u64; 3],
    pub out: u64,
    /// The tensor-core decode path's (moe_tc.cu) pairs grouped by expert: each pair's slot and
    /// each slot's pair (i32 `[rows * top_k]`), the active experts (`[min(E, pairs)]` of
    /// (expert, first slot, pairs, 0) i32) and their count, and the experts' outputs by slot
    /// (f32 `[rows * top_k, hidden]`); `act` holds bf16 by slot there.
    pub slot: u64,
    pub order: u64,
    pub experts: u64,
    pub n_active: u64,
    pub y: u64,
}

/// A MoE layer's sizes and routing rule.
pub struct MoeShape<'a> {
    pub rows: usize,
    pub hidden: usize,
    pub inter: usize,
    pub routing: &'a crate::MoeRouting,
}

/// Where an MLA attention call's tensors are.
pub struct MlaLaunch {
    pub q_lat: u64,
    pub q_rope: u64,
    pub cache: u64,
    pub out: u64,
    pub tok_seq: u64,
    pub seq_info: u64,
    pub block_tables: u64,
    pub rows: usize,
    pub fp8: bool,
}

impl Kernels {
    /// Routing: `ids` and `weights` of each row's experts, from `logits` or, with `router`
    /// set, from x (moe_route_gemv).
    pub fn moe_route(&self, a: &MoeLaunch, s: &MoeShape<'_>) -> Result<(), BackendError> {
        let r = s.routing;
        let (rows, k) = (s.rows, r.top_k);
        if rows == 0 {
            return Ok(());
        }
        let (n_e, k_i) = (r.n_experts as i32, k as i32);
        let (sig, norm) = (
            i32::from(r.scoring == crate::MoeScoring::Sigmoid),
            i32::from(r.norm_topk_prob),
        );
        let (ng, tg) = (r.n_group.max(1) as i32, r.topk_group as i32);
        let scale = r.routed_scaling_factor;
        if a.router != 0 {
            // One arrival counter a row.
            assert!(rows <= super::GEMV_MAX_ROWS, "moe_route_gemv: {rows} rows");
            let (xb, h) = (i32::from(a.x_bf16), s.hidden as i32);
            return launch!(
                @fn self,
                &self.moe_route_gemv,
                cfg(
                    (rows as u32, r.n_experts.div_ceil(MOE_ROUTE_WARPS as usize) as u32),
                    MOE_ROUTE_WARPS * 32
                ),
                a.x,
                xb,
                a.router,
                a.bias,
                a.logits,
                self.route_arrivals.1,
                a.ids,
                a.weights,
                h,
                n_e,
                k_i,
                sig,
                norm,
                ng,
                tg,
                scale
            );
        }
        launch!(
            @fn self,
            &self.moe_route,
            cfg((rows as u32, 1), 32),
            a.logits,
            a.bias,
            a.ids,
            a.weights,
            n_e,
            k_i,
            sig,
            norm,
            ng,
            tg,
            scale
        )
    }

    /// Every routed (row, expert) pair's SwiGLU as dot products from the experts' weights, then
    /// the weighted combine (plus the shared expert's output) into `out`.
    pub fn moe_gemv(&self, a: &MoeLaunch, s: &MoeShape<'_>) -> Result<(), BackendError> {
        let (rows, k) = (s.rows, s.routing.top_k);
        if rows == 0 {
            return Ok(());
        }
        let folded = a.shared_w[0] != 0;
        let routed = rows * k;
        let (k_i, routed_i) = (k as i32, routed as i32);
        let (h, i) = (s.hidden as i32, s.inter as i32);
        let xb = i32::from(a.x_bf16);
        let pairs = routed + if folded { rows } else { 0 };
        let [s_gate, s_up, s_down] = a.shared_w;
        launch!(
            @fn self,
            &self.moe_gate_up,
            cfg((pairs as u32, s.inter.div_ceil(MOE_WARPS) as u32), (MOE_WARPS * 32) as u32),
            a.x,
            xb,
            a.ids,
            a.gate_up,
            s_gate,
            s_up,
            a.act,
            h,
            i,
            k_i,
            routed_i
        )?;
        // A row's choices (with the folded shared expert) times the features a block takes.
        // moe_down reads the ids before it waits for moe_gate_up, which is sound only because
        // moe_gate_up runs between the routing and it (see moe.cu).
        let n = k + usize::from(folded);
        let features = (MOE_WARPS / n).max(1);
        launch!(
            @fn self,
            &self.moe_down,
            cfg(
                (rows as u32, s.hidden.div_ceil(features) as u32),
                (features * n * 32) as u32
            ),
            a.act,
            a.ids,
            a.weights,
            a.down,
            a.shared,
            s_down,
            a.out,
            h,
            i,
            k_i,
            routed_i
        )
    }

    /// Whether the decode path's tensor-core kernels (moe_tc.cu) take experts of this shape (off
    /// with HEARTH_MOE_DECODE=gemv: moe_gemv).
    pub fn moe_tc_fits(&self, hidden: usize, inter: usize) -> bool {
        self.moe_tc_on && hidden.is_multiple_of(8) && inter.is_multiple_of(8)
    }

    /// The decode path on tensor cores: the pairs grouped by expert on the device (moe_sort),
    /// each active expert's gate/up and down run once over its pairs, then moe_combine. Needs
    /// the MoeLaunch's sorted-path buffers.
    pub fn moe_tc(&self, a: &MoeLaunch, s: &MoeShape<'_>) -> Result<(), BackendError> {
        let (rows, k) = (s.rows, s.routing.top_k);
        if rows == 0 {
            return Ok(());
        }
        let pairs = rows * k;
        let active = s.routing.n_experts.min(pairs) as u32;
        let (h, i, k_i) = (s.hidden as i32, s.inter as i32, k as i32);
        let (pairs_i, n_e) = (pairs as i32, s.routing.n_experts as i32);
        launch!(
            @fn self,
            &self.moe_sort,
            cfg((1, 1), MOE_SORT_THREADS),
            a.ids,
            pairs_i,
            n_e,
            a.slot,
            a.order,
            a.experts,
            a.n_active
        )?;
        let xb = i32::from(a.x_bf16);
        let threads = MOE_TC_WARPS * 32;
        launch!(
            @fn self,
            &self.moe_gate_up_tc,
            cfg((s.inter.div_ceil(16) as u32, active), threads),
            a.x,
            xb,
            a.order,
            a.experts,
            a.n_active,
            a.gate_up,
            a.act,
            h,
            i,
            k_i
        )?;
        launch!(
            @fn self,
            &self.moe_down_tc,
            cfg((s.hidden.div_ceil(32) as u32, active), threads),
            a.act,
            a.experts,
            a.n_active,
            a.down,
            a.y,
            h,
            i
        )?;
        self.moe_combine(
            (a.y, a.slot, a.weights, a.shared, a.out),
            (rows, s.hidden, k),
        )
    }

    /// Whether moe_gemm takes an (n, k) expert matrix.
    pub fn moe_gemm_fits(&self, n: usize, k: usize) -> bool {
        self.moe_gemm_on && n.is_multiple_of(MOE_GEMM_COLS) && k.is_multiple_of(MOE_GEMM_K)
    }

    /// y[slots, n] (f32) = x[slots, k] (bf16) . W_e^T for each tile of MOE_GEMM_ROWS slots:
    /// `tiles[i]` = (expert e, first slot) of tile i, W_e = w + e * w_stride bf16 [n, k] (see
    /// moe_gemm.cu). With `silu`, W_e is a gate/up matrix [2 n, k] and y the activation
    /// silu(gate) * up in bf16 [slots, n].
    pub fn moe_gemm(
        &self,
        (w, w_stride, x, y, tiles): (u64, usize, u64, u64, u64),
        (n_tiles, n, k): (usize, usize, usize),
        silu: bool,
    ) -> Result<(), BackendError> {
        let cols = if silu { 2 * n } else { n };
        assert!(
            self.moe_gemm_fits(cols, k),
            "moe_gemm: {cols} x {k} expert matrices"
        );
        if n_tiles == 0 {
            return Ok(());
        }
        let (stride, n_i, k_i) = (w_stride as i64, n as i32, k as i32);
        let func = if silu {
            &self.moe_gemm_silu
        } else {
            &self.moe_gemm
        };
        launch!(
            @fn self,
            func,
            LaunchConfig {
                grid_dim: ((cols / MOE_GEMM_COLS) as u32, n_tiles as u32, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: MOE_GEMM_SMEM as u32,
            },
            w,
            stride,
            x,
            y,
            tiles,
            n_i,
            k_i
        )
    }

    /// out[row] = sum_j weights[row, j] * y[slot[row, j]] (+ shared[row]) over `rows` rows.
    pub fn moe_combine(
        &self,
        (y, slot, weights, shared, out): (u64, u64, u64, u64, u64),
        (rows, hidden, top_k): (usize, usize, usize),
    ) -> Result<(), BackendError> {
        let (h, k) = (hidden as i32, top_k as i32);
        launch!(
            self,
            moe_combine,
            cfg((rows as u32, hidden.div_ceil(256) as u32), 256),
            y,
            slot,
            weights,
            shared,
            out,
            h,
            k
        )
    }

    /// out[r, h * n + j] = x[r, h * k ..] . w[h * n + j] for `rows` rows of `n_heads` heads.
    pub fn linear_heads(
        &self,
        (x, w, out): (u64, u64, u64),
        (rows, n_heads, n, k): (usize, usize, usize, usize),
    ) -> Result<(), BackendError> {
        let (nh, n_i, k_i) = (n_heads as i32, n as i32, k as i32);
        launch!(
            self,
            linear_heads,
            cfg((n.div_ceil(8) as u32, (rows * n_heads) as u32), 256),
            x,
            w,
            out,
            nh,
            n_i,
            k_i
        )
    }

    /// Writes `rows` latent rows `[latent (rank) | k_rope (rope)]` at `slots` of a latent cache.
    #[allow(clippy::too_many_arguments)]
    pub fn write_latent(
        &self,
        (latent, latent_bf16): (u64, bool),
        k_rope: u64,
        slots: u64,
        cache: u64,
        (rows, rank, rope): (usize, usize, usize),
        fp8: bool,
    ) -> Result<(), BackendError> {
        let (lb, r, p) = (i32::from(latent_bf16), rank as i32, rope as i32);
        launch!(
            @fn self,
            &self.write_latent[usize::from(fp8)],
            cfg((rows as u32, 1), row_threads(rank + rope)),
            latent,
            lb,
            k_rope,
            slots,
            cache,
            r,
            p
        )
    }

    /// MLA's per-token preparation (mla.cu's mla_prep): a block per row, as many threads as
    /// the latent's RMS norm takes alone; with `absorb`, those blocks of 256 threads (whose
    /// norm sums match: the extra threads add zeros) beside linear_heads'.
    pub fn mla_prep(&self, a: &MlaPrepLaunch) -> Result<(), BackendError> {
        let r = &a.rope;
        let (nh, hd, rd, neox) = (
            r.n_heads as i32,
            r.head_dim as i32,
            r.rotary_dim as i32,
            i32::from(r.neox),
        );
        let (lb, rank, rows) = (i32::from(a.latent_bf16), a.rank as i32, a.rows as i32);
        assert!(a.rank.is_multiple_of(4), "mla_prep: rank {}", a.rank);
        let (grid, threads, q) = match &a.absorb {
            Some(q) => {
                assert!(
                    norm_threads(a.rank) <= 256,
                    "mla_prep: rank {} needs more threads than the absorb's blocks",
                    a.rank
                );
                let grid = (a.rank.div_ceil(8), a.rows * (1 + r.n_heads));
                (grid, 256, (q.q_nope, q.w_uk, q.q_lat, q.nope as i32))
            }
            None => ((a.rows, 1), norm_threads(a.rank), (0, 0, 0, 0)),
        };
        let (q_nope, w_uk, q_lat, nope) = q;
        launch!(
            @fn self,
            &self.mla_prep[usize::from(a.fp8)],
            cfg((grid.0 as u32, grid.1 as u32), threads),
            a.k,
            a.kv_norm,
            a.latent,
            lb,
            a.eps,
            a.q_rope,
            a.k_rope,
            a.positions,
            a.inv_freq,
            nh,
            hd,
            rd,
            neox,
            a.slots,
            a.cache,
            rank,
            q_nope,
            w_uk,
            q_lat,
            nope,
            rows
        )
    }

    /// MLA over the latent cache: one block per (head, row); rows up to 65,535 per launch.
    /// Rows of sequences with at least `gemm_min_queries` queries are left to the GEMM path.
    pub fn mla_attention(
        &self,
        a: &MlaLaunch,
        shape: crate::MlaShape,
        block_size: usize,
        gemm_min_queries: usize,
        (splits, parts): (usize, u64),
    ) -> Result<(), BackendError> {
        let gmq = gemm_min_queries.min(i32::MAX as usize) as i32;
        let (nh, r, p, bs) = (
            shape.n_heads as i32,
            shape.kv_lora_rank as i32,
            shape.rope_dim as i32,
            block_size as i32,
        );
        launch!(
            @fn self,
            &self.mla_attention[usize::from(a.fp8)],
            LaunchConfig {
                grid_dim: (shape.n_heads as u32, a.rows as u32, splits as u32),
                block_dim: (MLA_WARPS * 32, 1, 1),
                shared_mem_bytes: 0,
            },
            a.q_lat,
            a.q_rope,
            a.cache,
            a.out,
            a.tok_seq,
            a.seq_info,
            a.block_tables,
            nh,
            r,
            p,
            bs,
            shape.scale,
            gmq,
            parts
        )?;
        if splits == 1 {
            return Ok(());
        }
        let (r, ns) = (shape.kv_lora_rank as i32, splits as i32);
        launch!(
            self,
            mla_merge,
            cfg((shape.n_heads as u32, a.rows as u32), 128),
            parts,
            a.out,
            a.tok_seq,
            a.seq_info,
            nh,
            r,
            ns,
            gmq
        )
    }

    /// Sequence `seq`'s `ctx` latent rows as K `[ctx_pad, width]` and V^T `[rank, ctx_pad]`
    /// (bf16, zero past ctx).
    #[allow(clippy::too_many_arguments)]
    pub fn mla_gather(
        &self,
        a: &MlaLaunch,
        seq: usize,
        (ctx, ctx_pad): (usize, usize),
        (rank, rope, block_size): (usize, usize, usize),
        (k, vt): (u64, u64),
    ) -> Result<(), BackendError> {
        let (s, c, cp, r, p, bs) = (
            seq as i32,
            ctx as i32,
            ctx_pad as i32,
            rank as i32,
            rope as i32,
            block_size as i32,
        );
        launch!(
            @fn self,
            &self.mla_gather[usize::from(a.fp8)],
            cfg((ctx_pad as u32, 1), 256),
            a.cache,
            a.seq_info,
            a.block_tables,
            s,
            c,
            cp,
            r,
            p,
            bs,
            k,
            vt
        )
    }

    /// Q `[rows * n_heads, rank + rope]` bf16 from rows `row0..` of q_lat and q_rope.
    pub fn mla_q_pack(
        &self,
        a: &MlaLaunch,
        (row0, rows, n_heads): (usize, usize, usize),
        (rank, rope): (usize, usize),
        q: u64,
    ) -> Result<(), BackendError> {
        let (r0, nh, r, p) = (row0 as i32, n_heads as i32, rank as i32, rope as i32);
        launch!(
            self,
            mla_q_pack,
            cfg(((rows * n_heads) as u32, 1), 128),
            a.q_lat,
            a.q_rope,
            r0,
            nh,
            r,
            p,
            q
        )
    }

    /// Causal softmax of `m` score rows of `ctx_pad` into bf16 probabilities.
    #[allow(clippy::too_many_arguments)]
    pub fn mla_softmax(
        &self,
        (s, p): (u64, u64),
        m: usize,
        n_heads: usize,
        ctx_pad: usize,
        (first, t0): (usize, usize),
        scale: f32,
    ) -> Result<(), BackendError> {
        let (nh, cp, f, t) = (n_heads as i32, ctx_pad as i32, first as i32, t0 as i32);
        launch!(
            self,
            mla_softmax,
            cfg((m as u32, 1), 256),
            s,
            p,
            nh,
            cp,
            f,
            t,
            scale
        )
    }

    /// Dynamic shared memory of mla_tc (MtcSmem<MT, T>::BYTES): Q, two stages of latent rows
    /// (fp8: one, plus one widened f16 tile), four partial score tiles, P, and three floats a
    /// row.
    pub(super) fn mla_tc_smem(wide: bool, fp8: bool) -> usize {
        let m = 16 * MLA_TC_MT[usize::from(wide)];
        let (q, tile) = (m * MLA_TC_ROW * 2, MLA_TC_BK * MLA_TC_ROW * 2);
        let stages = if fp8 {
            MLA_TC_BK * (MLA_TC_ROW - 8)
        } else {
            2 * tile
        };
        let widened = if fp8 { tile } else { 0 };
        q + stages + widened + 4 * m * MLA_TC_BK * 4 + m * MLA_TC_PROW * 2 + 3 * m * 4
    }

    /// Tensor-core MLA for the sequences whose query count is in `queries`, whose rows lie in
    /// `rows` (the narrow variant tiles 32 (token, head) rows, the wide one 64), with `splits`
    /// shares of each sequence's keys at most (`parts` holds rows x heads x splits x (rank + 2)
    /// floats when splits > 1; [`Self::mla_tc_merge`] then combines them).
    #[allow(clippy::too_many_arguments)]
    pub fn mla_tc(
        &self,
        a: &MlaLaunch,
        shape: crate::MlaShape,
        block_size: usize,
        rows: std::ops::Range<usize>,
        (q_min, q_max): (usize, usize),
        wide: bool,
        (splits, parts): (usize, u64),
    ) -> Result<(), BackendError> {
        let m = 16 * MLA_TC_MT[usize::from(wide)];
        let head_groups = shape.n_heads.div_ceil(m) as u32;
        let (nh, bs) = (shape.n_heads as i32, block_size as i32);
        let (lo, hi) = (q_min as i32, q_max.min(i32::MAX as usize) as i32);
        let row0 = rows.start as i32;
        launch!(
            @fn self,
            &self.mla_tc[usize::from(a.fp8)][usize::from(wide)],
            LaunchConfig {
                grid_dim: (rows.len() as u32, head_groups, splits as u32),
                block_dim: ((8 * m) as u32, 1, 1),
                shared_mem_bytes: Self::mla_tc_smem(wide, a.fp8) as u32,
            },
            a.q_lat,
            a.q_rope,
            a.cache,
            a.out,
            parts,
            a.tok_seq,
            a.seq_info,
            a.block_tables,
            nh,
            bs,
            shape.scale,
            row0,
            lo,
            hi
        )
    }

    /// Combines mla_tc's split partials into the output rows that took several splits, of the
    /// sequences with fewer than `q_max` queries.
    pub fn mla_tc_merge(
        &self,
        a: &MlaLaunch,
        n_heads: usize,
        q_max: usize,
        (splits, parts): (usize, u64),
    ) -> Result<(), BackendError> {
        let (nh, ns) = (n_heads as i32, splits as i32);
        let q_max = q_max.min(i32::MAX as usize) as i32;
        launch!(
            self,
            mla_tc_merge,
            cfg((n_heads as u32, a.rows as u32), (MLA_TC_SHAPE.0 / 2) as u32),
            parts,
            a.out,
            a.tok_seq,
            a.seq_info,
            nh,
            ns,
            q_max
        )
    }

    /// Whether the merge and W_UV run as one launch (`mla_merge_uv`; not with
    /// HEARTH_MLA_MERGE_UV=0).
    pub fn merges_uv(&self) -> bool {
        self.mla_merge_uv.is_some()
    }

    /// [`Self::mla_tc_merge`] and `linear_heads` by W_UV (bf16 `[n_heads * n, 512]` at `w`) in
    /// one launch: `out[r, h * n + j]` for `a.rows` rows. Rows that took one split are read from
    /// `a.out`, where mla_tc wrote them.
    pub fn mla_merge_uv(
        &self,
        a: &MlaLaunch,
        n_heads: usize,
        q_max: usize,
        (splits, parts): (usize, u64),
        (w, n, out): (u64, usize, u64),
    ) -> Result<(), BackendError> {
        let f = self
            .mla_merge_uv
            .as_ref()
            .expect("mla_merge_uv called with HEARTH_MLA_MERGE_UV=0");
        let (nh, ns, n_i) = (n_heads as i32, splits as i32, n as i32);
        let q_max = q_max.min(i32::MAX as usize) as i32;
        launch!(
            @fn self,
            f,
            cfg(
                (n.div_ceil(MLA_UV_OUT) as u32, (a.rows * n_heads) as u32),
                (MLA_TC_SHAPE.0 / 2) as u32
            ),
            parts,
            a.out,
            w,
            out,
            a.tok_seq,
            a.seq_info,
            nh,
            ns,
            q_max,
            n_i
        )
    }
}
