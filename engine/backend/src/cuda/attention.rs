//! The attention op: the decode kernels for single rows and short chunks, the tiled prefill
//! kernels (tensor-core, or CUDA-core for other head sizes) for the 64-row tiles of long chunks.

use super::buffers::{matmul_input_bf16, CudaBuf, CudaKvCache};
use super::kernels::{AttnLaunch, Kernels};
use super::{CudaBackend, CudaStep};
use crate::ops::AttnShape;

impl CudaBackend {
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
        // A step of long prefill chunks only (no rows for the decode kernels) gets its output
        // in bf16 from the tensor-core kernel, sparing the o-projection's GEMM a conversion.
        let rows = q.len / (shape.n_heads * shape.head_dim);
        let out_bf16 = step.n_short_rows == 0
            && Kernels::tc_attention_supports(shape.head_dim)
            && matmul_input_bf16(rows);
        self.ensure_as(out, q.len, out_bf16);
        let (k_cache, v_cache) = cache.layer(layer);
        let a = AttnLaunch {
            q: q.f32("attention"),
            k_cache,
            v_cache,
            out: out.ptr,
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
        };
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
