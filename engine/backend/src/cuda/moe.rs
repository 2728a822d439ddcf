//! The mixture-of-experts and MLA ops on CUDA: their buffers and checks around the kernels of
//! moe.cu, moe_gemm.cu, mla.cu and mla_tc.cu (launchers in kernels/moe_mla.rs).

use super::gemm::Out;
use super::kernels::{
    norm_threads, MlaAbsorb, MlaLaunch, MlaPrepLaunch, MoeLaunch, MoeShape, RopeShape,
    MLA_MAX_RANK, MLA_TC_SHAPE, MOE_GEMM_ROWS, MOE_MAX_EXPERTS, MOE_MAX_GROUPS, MOE_MAX_TOPK,
};
use super::weights::contiguous;
use super::{CudaBackend, CudaBuf, CudaKvCache, CudaStep, CudaWeight};
use crate::ops::{Backend, MlaShape, MoeLayer, RopeSpec};

/// Past this many rows a prefill step's experts run as grouped cuBLASLt GEMMs (each expert's
/// weights read once for all its rows) instead of per-pair dot products.
const MOE_GEMV_MAX_ROWS: usize = 16;

/// Padded rows up to which the grouped expert GEMM runs however little of them is real: at
/// GLM-4.7-Flash's 512-row chunks (random-weight routing: ~4.7x padding) it still beat one
/// cuBLASLt GEMM per expert (pp512 12.6k vs 10.0k tok/s, H100).
const MOE_GEMM_MIN_SLOTS: usize = 16_384;

/// The batched prefill path pads every expert's rows to a multiple of this.
const MOE_PAD_ROWS: usize = 64;

/// Bytes from one expert's gate/up block, and down matrix, to the next.
fn expert_strides(hidden: usize, inter: usize) -> (u64, u64) {
    ((2 * inter * hidden * 2) as u64, (hidden * inter * 2) as u64)
}

/// Sequences with at least this many queries in a step (prefill chunks) take MLA's GEMM path.
const MLA_GEMM_MIN_QUERIES: usize = 64;
/// Sequences with at least this many queries take the wide (64-row) tensor-core MLA tiles.
const MLA_TC_WIDE_MIN: usize = 8;
/// Most splits of a row's keys in MLA's per-row and tensor-core kernels, and the partials' byte
/// budget.
const MLA_MAX_SPLITS: usize = 16;
const MLA_PARTS_BYTES: usize = 64 << 20;
/// The GEMM path's score tile, in bytes.
const MLA_SCORES_BYTES: usize = 256 << 20;
/// The GEMM path's query tiles hold at most this many queries (finer tiles skip more of the
/// keys that only later queries see, but 64-256 measured slower than 512 at an 8k prompt), and
/// their key counts are rounded up to a multiple of MLA_GEMM_KEYS (few distinct plans).
const MLA_GEMM_TILE_QUERIES: usize = 512;
const MLA_GEMM_KEYS: usize = 128;

/// Start of the next 256-byte aligned piece of a carved buffer.
fn carve(at: &mut u64, bytes: usize) -> u64 {
    let p = *at;
    *at += (bytes as u64).div_ceil(256) * 256;
    p
}

impl CudaBackend {
    /// A view of `floats` f32 at `ptr` as an op output.
    fn view(ptr: u64, floats: usize) -> CudaBuf {
        CudaBuf {
            ptr,
            len: 0,
            cap: floats * 4,
            bf16: false,
        }
    }

    pub(super) fn moe_op(
        &self,
        x: &CudaBuf,
        prefill: &[bool],
        layer: &MoeLayer<'_, CudaWeight>,
        out: &mut CudaBuf,
    ) {
        let t0 = self.prof_begin();
        let r = layer.routing;
        let rows = prefill.len();
        let hidden = x.len / rows.max(1);
        assert!(
            r.n_experts <= MOE_MAX_EXPERTS
                && r.top_k <= MOE_MAX_TOPK
                && r.n_group.max(1) <= MOE_MAX_GROUPS,
            "moe: {} experts, top {} in {} groups is past the kernel's limits ({MOE_MAX_EXPERTS}, \
             {MOE_MAX_TOPK}, {MOE_MAX_GROUPS})",
            r.n_experts,
            r.top_k,
            r.n_group
        );
        let gate_up: Vec<&CudaWeight> = layer.experts.iter().flat_map(|[g, u, _]| [g, u]).collect();
        let downs: Vec<&CudaWeight> = layer.experts.iter().map(|[_, _, d]| d).collect();
        let (Some((gu_ptr, _, gu_cols)), Some((down_ptr, _, inter))) =
            (contiguous(&gate_up), contiguous(&downs))
        else {
            panic!("moe: the experts must be uploaded as two groups (gate/up pairs, downs)");
        };
        assert_eq!(gu_cols, hidden, "moe: expert width vs hidden size");
        let k = r.top_k;
        let shared_inter = layer
            .shared
            .map_or(0, |[g, _, _]| g.matrix().map_or(0, |m| m.1));
        let grouped = rows > MOE_GEMV_MAX_ROWS && prefill.iter().any(|&p| p);
        // Decode batches past the GEMV rows (within which results are batch-invariant) run on
        // tensor cores over each expert's pairs (moe_tc.cu).
        let tc = !grouped && !self.gemv_takes(rows) && self.kernels.moe_tc_fits(hidden, inter);
        // Up to the GEMV rows (x read in f32 like the GEMVs; past that matmuls round it to
        // bf16), the dot-product path computes small routers' logits in its routing launch and
        // folds a shared expert as wide as the routed ones into its two launches.
        let small = !grouped && !tc && self.gemv_takes(rows);
        let fold = small && shared_inter == inter;
        let pairs = rows * k;
        let act_rows = pairs + if fold { rows } else { 0 };
        let floats = [
            rows * r.n_experts,
            pairs,
            pairs,
            act_rows * inter,
            if fold { 0 } else { rows * shared_inter },
            if fold { 0 } else { rows * hidden },
            pairs,
            pairs,
            4 * r.n_experts.min(pairs),
            1,
            if tc { pairs * hidden } else { 0 },
        ];
        let bytes = floats.iter().map(|f| (f * 4).div_ceil(256) * 256).sum();
        let base = self.fixed_buf(|st| &mut st.moe, bytes);
        let base = base.unwrap_or_else(|e| panic!("CUDA moe scratch: {e}"));
        let mut at = base;
        let [logits_p, ids, weights, act, shared_act, shared_out, slot, order, experts, n_active, y] =
            floats.map(|f| carve(&mut at, f * 4));
        let router = match layer.router.matrix() {
            Some((ptr, _, _)) if small => ptr,
            _ => {
                let mut logits = Self::view(logits_p, floats[0]);
                self.linear(x, prefill, layer.router, None, &mut logits);
                0
            }
        };
        let (shared, shared_w) = match layer.shared {
            Some([g, u, d]) if fold => (0, [g.ptr(), u.ptr(), d.ptr()]),
            Some([g, u, d]) => {
                let mut a = Self::view(shared_act, floats[4]);
                let mut o = Self::view(shared_out, floats[5]);
                self.linear_swiglu(x, prefill, g, u, &mut a);
                self.linear(&a, prefill, d, None, &mut o);
                (o.ptr, [0; 3])
            }
            None => (0, [0; 3]),
        };
        self.ensure(out, rows * hidden);
        let launch = MoeLaunch {
            x: x.ptr,
            x_bf16: x.bf16,
            router,
            logits: logits_p,
            bias: layer.score_bias.map_or(0, |b| b.ptr()),
            ids,
            weights,
            gate_up: gu_ptr,
            down: down_ptr,
            act,
            shared,
            shared_w,
            out: out.ptr,
            slot,
            order,
            experts,
            n_active,
            y,
        };
        let shape = MoeShape {
            rows,
            hidden,
            inter,
            routing: r,
        };
        let res = self.kernels.moe_route(&launch, &shape).and_then(|_| {
            if grouped {
                self.moe_grouped(&launch, &shape, expert_strides(hidden, inter))
            } else if tc {
                self.kernels.moe_tc(&launch, &shape)
            } else {
                self.kernels.moe_gemv(&launch, &shape)
            }
        });
        let op = if grouped {
            "moe (grouped GEMMs)"
        } else if tc {
            "moe (grouped tensor-core GEMVs)"
        } else {
            "moe (expert GEMVs)"
        };
        self.finish(op, t0, res);
    }

    /// The prefill path: routes come back to the host, the rows are gathered in expert order
    /// (bf16), the experts' GEMMs run over their rows (gate/up fused, then down), and a combine
    /// kernel sums each row's weighted outputs. The GEMMs are one launch each of moe_gemm.cu
    /// (gate/up with the activation in its epilogue) over every expert's rows (each expert's
    /// run padded to a tile) unless that padding is both past MOE_GEMM_MIN_SLOTS and twice the
    /// rows; otherwise, or for matrix shapes it does not take, cuBLASLt: one batched call over
    /// all experts padded to the longest run when that at most doubles the rows, otherwise one
    /// call per expert. Eager steps only (it synchronizes), which prefill steps are.
    fn moe_grouped(
        &self,
        a: &MoeLaunch,
        s: &MoeShape<'_>,
        (gu_stride, down_stride): (u64, u64),
    ) -> Result<(), super::BackendError> {
        let (rows, k, hidden, inter) = (s.rows, s.routing.top_k, s.hidden, s.inter);
        let n_experts = s.routing.n_experts;
        let pairs = rows * k;
        let mut ids = vec![0i32; pairs];
        self.copy_to_host(a.ids, &mut ids)?;
        let mut counts = vec![0usize; n_experts];
        ids.iter().for_each(|&e| counts[e as usize] += 1);
        // moe_gemm pads each expert's run to a whole tile: taken while that at most doubles the
        // rows or stays within MOE_GEMM_MIN_SLOTS (many experts with a few rows each, as in short
        // chunks of DeepSeek-V3's 256 experts, would otherwise cost a tile of padding each).
        let tiled: usize = counts
            .iter()
            .map(|c| c.next_multiple_of(MOE_GEMM_ROWS))
            .sum();
        let ours = tiled <= (2 * pairs).max(MOE_GEMM_MIN_SLOTS)
            && self.kernels.moe_gemm_fits(2 * inter, hidden)
            && self.kernels.moe_gemm_fits(hidden, inter);
        let longest = counts.iter().copied().max().unwrap_or(0);
        let padded = longest.next_multiple_of(MOE_PAD_ROWS);
        let batched = !ours && n_experts * padded <= 2 * pairs;
        // Each expert's first slot: runs back to back (padded to moe_gemm's tile with ours), or
        // `padded` apart.
        let mut first = vec![0usize; n_experts];
        let mut tiles: Vec<[i32; 2]> = Vec::new();
        let mut next = 0;
        for e in 0..n_experts {
            first[e] = if batched { e * padded } else { next };
            if ours {
                let run = counts[e].next_multiple_of(MOE_GEMM_ROWS);
                tiles.extend(
                    (next..next + run)
                        .step_by(MOE_GEMM_ROWS)
                        .map(|t| [e as i32, t as i32]),
                );
                next += run;
            } else {
                next += counts[e];
            }
        }
        let slots = if batched { n_experts * padded } else { next };
        // Pairs in (expert, pair) order; padding slots read row 0 and are never combined.
        let mut slot = vec![0i32; pairs];
        let mut src_rows = vec![0u32; slots];
        let mut fill = first.clone();
        for (p, &e) in ids.iter().enumerate() {
            let at = &mut fill[e as usize];
            slot[p] = *at as i32;
            src_rows[*at] = (p / k) as u32;
            *at += 1;
        }
        let floats = [
            pairs,
            slots,
            2 * tiles.len(),
            slots * hidden / 2 + 1,
            // moe_gemm fuses the activation into the gate/up GEMM: no f32 gate/up rows.
            if ours { 0 } else { slots * 2 * inter },
            slots * inter / 2 + 1,
            slots * hidden,
        ];
        let bytes = floats.iter().map(|f| (f * 4).div_ceil(256) * 256).sum();
        let mut at = self.fixed_buf(|st| &mut st.moe_grouped, bytes)?;
        let [slot_p, rows_p, tiles_p, xs, gu, act, y] = floats.map(|f| carve(&mut at, f * 4));
        self.copy_to_device_async(slot_p, &slot)?;
        self.copy_to_device_async(rows_p, &src_rows)?;
        if ours {
            let flat: Vec<i32> = tiles.iter().flatten().copied().collect();
            self.copy_to_device_async(tiles_p, &flat)?;
        }
        self.kernels
            .gather_rows((a.x, rows_p, xs), (slots, hidden), (a.x_bf16, true))?;
        // y[slots of e] = x[slots of e] . w_e^T: one grouped launch, one batched GEMM, or one
        // per expert.
        let gemms = |w: u64, stride: u64, x: u64, x_row: usize, y: u64, y_row: usize, k| {
            if ours {
                let ptrs = (w, stride as usize / 2, x, y, tiles_p);
                return self.kernels.moe_gemm(ptrs, (tiles.len(), y_row, k), false);
            }
            let mut st = self.state();
            if batched {
                let offsets = [stride as usize / 2, padded * x_row, padded * y_row];
                return st.gemm.run_batched(
                    w,
                    x,
                    y,
                    (padded, y_row, k),
                    (x_row, y_row),
                    (n_experts, offsets),
                );
            }
            (0..n_experts).filter(|&e| counts[e] > 0).try_for_each(|e| {
                st.gemm.run(
                    w + e as u64 * stride,
                    x + (first[e] * x_row * 2) as u64,
                    y + (first[e] * y_row * 4) as u64,
                    (counts[e], y_row, k),
                )
            })
        };
        if ours {
            let ptrs = (a.gate_up, gu_stride as usize / 2, xs, act, tiles_p);
            self.kernels
                .moe_gemm(ptrs, (tiles.len(), inter, hidden), true)?;
        } else {
            gemms(a.gate_up, gu_stride, xs, hidden, gu, 2 * inter, hidden)?;
            self.kernels
                .silu_mul_pair((gu, act), (slots, inter), (false, true))?;
        }
        gemms(a.down, down_stride, act, inter, y, hidden, inter)?;
        self.kernels
            .moe_combine((y, slot_p, a.weights, a.shared, a.out), (rows, hidden, k))
    }

    pub(super) fn linear_heads_op(
        &self,
        x: &CudaBuf,
        rows: usize,
        w: &CudaWeight,
        n_heads: usize,
        out: &mut CudaBuf,
    ) {
        let t0 = self.prof_begin();
        let (wp, wr, k) = w.matrix().expect("linear_heads weight must be a matrix");
        let n = wr / n_heads;
        debug_assert_eq!(x.len, rows * n_heads * k);
        self.ensure(out, rows * n_heads * n);
        if self.gemv_takes(rows) {
            let r = self
                .kernels
                .linear_heads((x.f32("linear_heads"), wp, out.ptr), (rows, n_heads, n, k));
            return self.finish("linear_heads (dots)", t0, r);
        }
        // One batched cuBLASLt GEMM: head h reads its weights, its columns of x (bf16) and
        // writes its columns of out.
        let r = self.bf16_copy(x, rows * n_heads * k).and_then(|xs| {
            if self.kernels.skipping() {
                return Ok(());
            }
            self.state().gemm.run_batched(
                wp,
                xs,
                out.ptr,
                (rows, n, k),
                (n_heads * k, n_heads * n),
                (n_heads, [n * k, k, n]),
            )
        });
        self.finish("linear_heads (GEMMs)", t0, r);
    }

    pub(super) fn write_latent_op(
        &self,
        cache: &mut CudaKvCache,
        layer: usize,
        latent: &CudaBuf,
        k_rope: &CudaBuf,
        step: &CudaStep,
    ) {
        let t0 = self.prof_begin();
        assert!(cache.spec.latent, "write_latent needs a latent cache");
        let rows = step.n_tokens;
        let rank = latent.len / rows.max(1);
        let rope = cache.spec.head_dim - rank;
        let r = self.kernels.write_latent(
            (latent.ptr, latent.bf16),
            k_rope.f32("write_latent"),
            step.slots,
            cache.layer(layer).0,
            (rows, rank, rope),
            cache.fp8(),
        );
        self.finish("write_latent", t0, r);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn mla_prep_op(
        &self,
        cache: &mut CudaKvCache,
        layer: usize,
        (k, kv_norm, eps): (&CudaBuf, &CudaWeight, f32),
        latent: &mut CudaBuf,
        (q_rope, k_rope): (&mut CudaBuf, &mut CudaBuf),
        (q_nope, w_uk, q_latent): (&CudaBuf, &CudaWeight, &mut CudaBuf),
        n_heads: usize,
        rope: &RopeSpec,
        prefill: &[bool],
        step: &CudaStep,
    ) {
        let t0 = self.prof_begin();
        assert!(cache.spec.latent, "mla_prep needs a latent cache");
        let rows = step.n_tokens;
        let rank = kv_norm.len();
        assert_eq!(
            (rope.head_dim, rope.head_dim),
            (cache.spec.head_dim - rank, k_rope.len / rows.max(1)),
            "mla_prep: the rotary key fills the cache row past the latent"
        );
        self.ensure_as(latent, k.len, self.matmul_input_bf16(rows));
        // Decode rows take the absorbed query's dot products in the same launch.
        let (wp, wr, nope) = w_uk.matrix().expect("mla_prep: W_UK must be a matrix");
        let absorb = (self.gemv_takes(rows)
            && !q_nope.bf16
            && wr == n_heads * rank
            && norm_threads(rank) <= 256)
            .then(|| {
                self.ensure(q_latent, rows * n_heads * rank);
                MlaAbsorb {
                    q_nope: q_nope.ptr,
                    w_uk: wp,
                    q_lat: q_latent.ptr,
                    nope,
                }
            });
        let fused = absorb.is_some();
        let inv_freq = self.state().step.inv_freq(&self.stream, &rope.inv_freq);
        let r = inv_freq.and_then(|inv_freq| {
            self.kernels.mla_prep(&MlaPrepLaunch {
                k: k.f32("mla_prep"),
                kv_norm: kv_norm.ptr(),
                latent: latent.ptr,
                latent_bf16: latent.bf16,
                eps,
                q_rope: q_rope.f32("mla_prep"),
                k_rope: k_rope.f32("mla_prep"),
                positions: step.positions,
                inv_freq,
                slots: step.slots,
                cache: cache.layer(layer).0,
                fp8: cache.fp8(),
                rows,
                rank,
                rope: RopeShape {
                    n_heads,
                    head_dim: rope.head_dim,
                    rotary_dim: rope.rotary_dim,
                    neox: rope.neox,
                },
                absorb,
            })
        });
        if fused {
            return self.finish("mla_prep + absorbed query", t0, r);
        }
        self.finish("mla_prep", t0, r);
        self.linear_heads_op(q_nope, prefill.len(), w_uk, n_heads, q_latent);
    }

    /// mla_attention into `attn`, then W_UV's linear_heads into `out`. Decode rows on the
    /// tensor-core kernel take the split merge and W_UV as one launch (`mla_merge_uv`), which
    /// writes `out` only: `attn` then holds just the rows that took one split.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn mla_attention_uv_op(
        &self,
        cache: &CudaKvCache,
        layer: usize,
        (q_latent, q_rope): (&CudaBuf, &CudaBuf),
        shape: MlaShape,
        step: &CudaStep,
        w_uv: &CudaWeight,
        (attn, out): (&mut CudaBuf, &mut CudaBuf),
    ) {
        let rows = step.n_tokens;
        let fused = self.kernels.merges_uv()
            && self.gemv_takes(rows)
            && (shape.kv_lora_rank, shape.rope_dim) == MLA_TC_SHAPE
            && step.seqs.iter().all(|s| s[1] < MLA_GEMM_MIN_QUERIES);
        match w_uv.matrix() {
            Some((wp, wr, k)) if fused && k == shape.kv_lora_rank => {
                let n = wr / shape.n_heads;
                self.ensure(out, rows * shape.n_heads * n);
                let uv = Some((wp, n, out.ptr));
                self.mla_attention_op(cache, layer, q_latent, q_rope, shape, step, attn, uv);
            }
            _ => {
                self.mla_attention_op(cache, layer, q_latent, q_rope, shape, step, attn, None);
                self.linear_heads_op(attn, rows, w_uv, shape.n_heads, out);
            }
        }
    }

    /// MLA attention into `out`; with `uv` (W_UV's bf16 matrix, its outputs a head, and where
    /// they go) the tensor-core path ends in `mla_merge_uv` instead of the merge.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn mla_attention_op(
        &self,
        cache: &CudaKvCache,
        layer: usize,
        q_latent: &CudaBuf,
        q_rope: &CudaBuf,
        shape: MlaShape,
        step: &CudaStep,
        out: &mut CudaBuf,
        uv: Option<(u64, usize, u64)>,
    ) {
        let t0 = self.prof_begin();
        assert!(
            shape.kv_lora_rank.is_multiple_of(32) && shape.kv_lora_rank <= MLA_MAX_RANK,
            "mla_attention: kv_lora_rank {} must be a multiple of 32 up to {MLA_MAX_RANK}",
            shape.kv_lora_rank
        );
        let rows = step.n_tokens;
        assert!(
            rows <= 65_535,
            "mla_attention: {rows} rows in one step (at most 65,535)"
        );
        self.ensure(out, rows * shape.n_heads * shape.kv_lora_rank);
        let a = MlaLaunch {
            q_lat: q_latent.f32("mla_attention"),
            q_rope: q_rope.f32("mla_attention"),
            cache: cache.layer(layer).0,
            out: out.ptr,
            tok_seq: step.tok_seq,
            seq_info: step.seq_info,
            block_tables: step.block_tables,
            rows,
            fp8: cache.fp8(),
        };
        let bs = cache.spec.block_size;
        // Decode-sized launches split each row's keys (merged after); a split count that
        // depends only on the row count keeps captured graphs valid for any context.
        let per_split = rows * shape.n_heads * (shape.kv_lora_rank + 2) * 4;
        let tc = (shape.kv_lora_rank, shape.rope_dim) == MLA_TC_SHAPE;
        // No more splits of the tensor-core kernel than fill the GPU about once with narrow
        // fp8 blocks, two an SM (fewer partials to merge; at 32 decode rows, 8 splits).
        let fill = if tc {
            2 * self.kernels.sms() / (rows * shape.n_heads.div_ceil(32)).max(1)
        } else {
            usize::MAX
        };
        let splits = (MLA_PARTS_BYTES / per_split.max(1))
            .min(fill)
            .clamp(1, MLA_MAX_SPLITS);
        let parts = if splits > 1 {
            self.fixed_buf(|st| &mut st.mla_parts, splits * per_split)
        } else {
            Ok(0)
        };
        let long: Vec<usize> = (0..step.seqs.len())
            .filter(|&s| step.seqs[s][1] >= MLA_GEMM_MIN_QUERIES)
            .collect();
        let min = if long.is_empty() {
            usize::MAX
        } else {
            MLA_GEMM_MIN_QUERIES
        };
        let r = parts
            .and_then(|parts| {
                if tc {
                    self.mla_tc_launches(&a, shape, bs, step, min, (splits, parts), uv)
                } else {
                    self.kernels
                        .mla_attention(&a, shape, bs, min, (splits, parts))
                }
            })
            .and_then(|_| {
                long.iter()
                    .try_for_each(|&s| self.mla_gemm_seq(&a, shape, bs, s, step.seqs[s]))
            });
        let op = match (long.is_empty(), tc) {
            (true, false) => "mla_attention (rows)",
            (true, true) if uv.is_some() => "mla_attention (tensor cores) + W_UV",
            (true, true) => "mla_attention (tensor cores)",
            (false, _) => "mla_attention (GEMMs)",
        };
        self.finish(op, t0, r);
    }

    /// The tensor-core MLA kernel over the sequences with fewer than `max_queries` queries:
    /// narrow tiles for decode rows and short chunks, wide ones for longer chunks, then the
    /// merge of split rows (with `uv`, merged straight into W_UV's products).
    #[allow(clippy::too_many_arguments)]
    fn mla_tc_launches(
        &self,
        a: &MlaLaunch,
        shape: MlaShape,
        block_size: usize,
        step: &CudaStep,
        max_queries: usize,
        parts: (usize, u64),
        uv: Option<(u64, usize, u64)>,
    ) -> Result<(), super::BackendError> {
        let k = &self.kernels;
        // The rows of the sequences with a query count in lo..hi (a launch covers only those:
        // its blocks hold over 100 KB of shared memory, even the ones that would exit).
        let rows = |lo: usize, hi: usize| {
            let mut seqs = step.seqs.iter().filter(|s| (lo..hi).contains(&s[1]));
            let first = seqs.next()?;
            let (start, end) = seqs.fold((first[0], first[0] + first[1]), |(a, b), s| {
                (a.min(s[0]), b.max(s[0] + s[1]))
            });
            Some(start..end)
        };
        let wide = MLA_TC_WIDE_MIN.min(max_queries);
        if let Some(r) = rows(0, wide) {
            k.mla_tc(a, shape, block_size, r, (0, wide), false, parts)?;
        }
        if let Some(r) = rows(wide, max_queries) {
            k.mla_tc(a, shape, block_size, r, (wide, max_queries), true, parts)?;
        }
        match uv {
            Some(uv) => k.mla_merge_uv(a, shape.n_heads, max_queries, parts, uv),
            None if parts.0 > 1 => k.mla_tc_merge(a, shape.n_heads, max_queries, parts),
            None => Ok(()),
        }
    }

    /// One long prefill chunk's MLA as cuBLASLt GEMMs: S = Q K^T over its gathered latent rows,
    /// a causal softmax, O = P V, in query tiles that keep S within MLA_SCORES_BYTES. A tile's
    /// GEMMs stop at the last key its last query sees (rounded up to MLA_GEMM_KEYS): a chunk
    /// after a long context still reads all of it, but not the keys of later queries.
    fn mla_gemm_seq(
        &self,
        a: &MlaLaunch,
        shape: MlaShape,
        block_size: usize,
        seq: usize,
        [query_start, query_len, ctx]: [usize; 3],
    ) -> Result<(), super::BackendError> {
        let (nh, rank, rope) = (shape.n_heads, shape.kv_lora_rank, shape.rope_dim);
        let width = rank + rope;
        let ctx_pad = ctx.next_multiple_of(8);
        let tile =
            (MLA_SCORES_BYTES / (nh * ctx_pad * 4)).clamp(1, query_len.min(MLA_GEMM_TILE_QUERIES));
        let m_max = tile * nh;
        let bytes = [
            ctx_pad * width * 2,
            rank * ctx_pad * 2,
            m_max * width * 2,
            m_max * ctx_pad * 4,
            m_max * ctx_pad * 2,
        ];
        let total = bytes.iter().map(|b| b.div_ceil(256) * 256).sum();
        let mut at = self.fixed_buf(|st| &mut st.mla, total)?;
        let [k, vt, q, s, p] = bytes.map(|b| carve(&mut at, b));
        self.kernels
            .mla_gather(a, seq, (ctx, ctx_pad), (rank, rope, block_size), (k, vt))?;
        let first = ctx - query_len;
        for t0 in (0..query_len).step_by(tile) {
            let rows = tile.min(query_len - t0);
            let m = rows * nh;
            let keys = (first + t0 + rows)
                .next_multiple_of(MLA_GEMM_KEYS)
                .min(ctx_pad);
            self.kernels
                .mla_q_pack(a, (query_start + t0, rows, nh), (rank, rope), q)?;
            if !self.kernels.skipping() {
                self.state().gemm.run(k, q, s, (m, keys, width))?;
            }
            self.kernels
                .mla_softmax((s, p), m, nh, keys, (first, t0), shape.scale)?;
            let out = a.out + ((query_start + t0) * nh * rank * 4) as u64;
            if !self.kernels.skipping() {
                self.state().gemm.run_strided(
                    vt,
                    p,
                    out,
                    (m, rank, keys),
                    [ctx_pad, keys, rank],
                    Out::F32,
                )?;
            }
        }
        Ok(())
    }
}
