//! The attention ops: the decode kernels for single rows and short chunks, the tiled prefill
//! kernels (tensor-core, or CUDA-core for other head sizes) for the 64-row tiles of long chunks,
//! and a decode step's RoPE + cache write + attention in one launch.

use super::buffers::{CudaBuf, CudaKvCache};
use super::kernels::{AttnLaunch, Kernels, RopeShape, RopeWriteLaunch, ROPE_ATTN_MAX_KEYS};
use super::weights::CudaWeight;
use super::{CudaBackend, CudaStep};
use crate::ops::{AttnShape, Backend, RopeWrite};
use crate::BackendError;

impl CudaBackend {
    /// What a launch of the attention kernels reads, writing into `out` (f32 or bf16).
    fn attn_launch(
        cache: &CudaKvCache,
        layer: usize,
        q: &CudaBuf,
        shape: AttnShape,
        step: &CudaStep,
        (out, out_bf16): (u64, bool),
    ) -> AttnLaunch {
        let (k_cache, v_cache) = cache.layer(layer);
        AttnLaunch {
            q: q.f32("attention"),
            k_cache,
            v_cache,
            out,
            tok_seq: step.tok_seq,
            seq_info: step.seq_info,
            block_tables: step.block_tables,
            n_heads: shape.n_heads,
            n_kv_heads: shape.n_kv_heads,
            head_dim: shape.head_dim,
            block_size: cache.spec.block_size,
            scale: shape.scale,
            fp8: cache.fp8(),
            out_bf16,
        }
    }

    /// What a `rope_write_kv` launch reads (uploading the rotary frequencies once).
    pub(super) fn rope_launch(
        &self,
        (q, k, v): (&CudaBuf, &CudaBuf, &CudaBuf),
        p: &RopeWrite<'_, CudaWeight>,
        cache: &CudaKvCache,
        step: &CudaStep,
    ) -> Result<RopeWriteLaunch, BackendError> {
        let inv_freq = self.state().step.inv_freq(&self.stream, &p.rope.inv_freq)?;
        Ok(RopeWriteLaunch {
            q: q.f32("rope_write_kv"),
            k: k.f32("rope_write_kv"),
            v: v.f32("rope_write_kv"),
            norms: p.qk_norm.map_or((0, 0), |[qn, kn]| (qn.ptr(), kn.ptr())),
            eps: p.eps,
            positions: step.positions,
            inv_freq,
            slots: step.slots,
            caches: cache.layer(p.layer),
            fp8: cache.fp8(),
            rows: step.n_tokens,
            shape: RopeShape {
                n_heads: p.n_heads,
                head_dim: p.rope.head_dim,
                rotary_dim: p.rope.rotary_dim,
                neox: p.rope.neox,
            },
            n_kv_heads: p.n_kv_heads,
        })
    }

    /// `Backend::rope_attention`: a decode step (every row its sequence's one new token) in one
    /// launch (`Kernels::rope_attention_decode`), any other as `rope_write_kv` then `attention`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rope_attention_op(
        &self,
        (q, k, v): (&mut CudaBuf, &mut CudaBuf, &CudaBuf),
        p: &RopeWrite<'_, CudaWeight>,
        shape: AttnShape,
        cache: &mut CudaKvCache,
        step: &CudaStep,
        out: &mut CudaBuf,
    ) {
        if !self.fuses_rope_attention(shape, step) {
            self.rope_write_kv((q, k, v), p, cache, step);
            self.attention_op(cache, p.layer, q, shape, step, out);
            return;
        }
        let t0 = self.prof_begin();
        // As `attention_op`: bf16 where the o-projection is a GEMM.
        let out_bf16 = self.matmul_input_bf16(step.n_tokens);
        self.ensure_as(out, q.len, out_bf16);
        let a = Self::attn_launch(cache, p.layer, q, shape, step, (out.ptr, out_bf16));
        let r = self.rope_launch((q, k, v), p, cache, step).and_then(|rl| {
            let parts = self.attn_parts(shape)?;
            self.kernels
                .rope_attention_decode(&rl, &a, step.short_rows, parts)
        });
        self.finish("rope + attention (decode)", t0, r);
    }

    /// Whether `rope_attention` takes one launch for this step: every row its sequence's one new
    /// token (decode rows, padding included), at most `ROPE_ATTN_MAX_KEYS` keys when it is one
    /// row (its merge runs in a block a KV head; with more rows the merges run side by side),
    /// and a layout and setting `Kernels::fuses_rope_attention` takes.
    pub fn fuses_rope_attention(&self, shape: AttnShape, step: &CudaStep) -> bool {
        step.n_tokens >= 1
            && step.n_short_rows == step.n_tokens
            && step.seqs.len() == step.n_tokens
            && step.seqs.iter().all(|s| s[1] == 1)
            && !(step.n_tokens == 1 && long_row(step))
            && self
                .kernels
                .fuses_rope_attention(shape.n_heads, shape.n_kv_heads, shape.head_dim)
    }

    /// `Backend::attention`.
    pub(super) fn attention_op(
        &self,
        cache: &CudaKvCache,
        layer: usize,
        q: &CudaBuf,
        shape: AttnShape,
        step: &CudaStep,
        out: &mut CudaBuf,
    ) {
        let t0 = self.prof_begin();
        // Where the o-projection is a GEMM (bf16 inputs), the tensor-core kernels write the
        // output in bf16, sparing it a conversion pass: the prefill tiles', and the decode
        // rows' and their split merge's where the rows take the tensor-core decode kernel.
        let rows = q.len / (shape.n_heads * shape.head_dim);
        let out_bf16 = self.matmul_input_bf16(rows)
            && Kernels::tc_attention_supports(shape.head_dim)
            && (step.n_short_rows == 0
                || Kernels::decode_tc_supports(shape.n_heads, shape.n_kv_heads, shape.head_dim));
        self.ensure_as(out, q.len, out_bf16);
        let a = Self::attn_launch(cache, layer, q, shape, step, (out.ptr, out_bf16));
        let d = shape.head_dim;
        let r = self.attn_parts(shape).and_then(|parts| {
            // The CUDA-core tiled kernel reads bf16 caches only.
            let tiled = Kernels::tc_attention_supports(d)
                || (Kernels::tiled_attention_supports(d) && !cache.fp8());
            if !tiled {
                return self
                    .kernels
                    .attention_decode(&a, step.all_rows, step.n_tokens, parts);
            }
            self.kernels
                .attention_decode(&a, step.short_rows, step.n_short_rows, parts)?;
            if Kernels::tc_attention_supports(d) {
                self.kernels
                    .attention_tiles_tc(&a, step.tiles, step.n_tiles)
            } else {
                self.kernels.attention_tiles(&a, step.tiles, step.n_tiles)
            }
        });
        let op = if step.n_tiles == 0 {
            "attention (rows)"
        } else {
            "attention (tiles)"
        };
        self.finish(op, t0, r);
    }
}

/// Whether the step's first sequence sees more keys than the one-launch attention takes
/// (`ROPE_ATTN_MAX_KEYS`); at batch 1 such a row has a decode graph of its own.
pub(super) fn long_row(step: &CudaStep) -> bool {
    step.seqs.first().is_some_and(|s| s[2] > ROPE_ATTN_MAX_KEYS)
}
