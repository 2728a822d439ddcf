//! The mixture-of-experts and MLA ops on CUDA: their buffers and checks around the kernels of
//! moe.cu and mla.cu (launchers in kernels/moe_mla.rs).

use super::kernels::{
    MlaLaunch, MoeLaunch, MoeShape, MLA_MAX_RANK, MOE_MAX_EXPERTS, MOE_MAX_GROUPS, MOE_MAX_TOPK,
};
use super::weights::contiguous;
use super::{CudaBackend, CudaBuf, CudaKvCache, CudaStep, CudaWeight};
use crate::ops::{Backend, MlaShape, MoeLayer};

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
        let floats = [
            rows * r.n_experts,
            rows * k,
            rows * k,
            rows * k * inter,
            rows * shared_inter,
            rows * hidden,
        ];
        let bytes = floats.iter().map(|f| (f * 4).div_ceil(256) * 256).sum();
        let base = self.fixed_buf(|st| &mut st.moe, bytes);
        let base = base.unwrap_or_else(|e| panic!("CUDA moe scratch: {e}"));
        let mut at = base;
        let [logits_p, ids, weights, act, shared_act, shared_out] =
            floats.map(|f| carve(&mut at, f * 4));
        let mut logits = Self::view(logits_p, floats[0]);
        self.linear(x, prefill, layer.router, None, &mut logits);
        let shared = match layer.shared {
            Some([g, u, d]) => {
                let mut a = Self::view(shared_act, floats[4]);
                let mut o = Self::view(shared_out, floats[5]);
                self.linear_swiglu(x, prefill, g, u, &mut a);
                self.linear(&a, prefill, d, None, &mut o);
                o.ptr
            }
            None => 0,
        };
        self.ensure(out, rows * hidden);
        let launch = MoeLaunch {
            x: x.ptr,
            x_bf16: x.bf16,
            logits: logits.ptr,
            bias: layer.score_bias.map_or(0, |b| b.ptr()),
            ids,
            weights,
            gate_up: gu_ptr,
            down: down_ptr,
            act,
            shared,
            out: out.ptr,
        };
        let shape = MoeShape {
            rows,
            hidden,
            inter,
            routing: r,
        };
        let res = self.kernels.moe(&launch, &shape);
        self.finish("moe (experts)", t0, res);
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
        let r = self
            .kernels
            .linear_heads((x.f32("linear_heads"), wp, out.ptr), (rows, n_heads, n, k));
        self.finish("linear_heads", t0, r);
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
    pub(super) fn mla_attention_op(
        &self,
        cache: &CudaKvCache,
        layer: usize,
        q_latent: &CudaBuf,
        q_rope: &CudaBuf,
        shape: MlaShape,
        step: &CudaStep,
        out: &mut CudaBuf,
    ) {
        let t0 = self.prof_begin();
        assert!(
            shape.kv_lora_rank.is_multiple_of(32) && shape.kv_lora_rank <= MLA_MAX_RANK,
            "mla_attention: kv_lora_rank {} must be a multiple of 32 up to {MLA_MAX_RANK}",
            shape.kv_lora_rank
        );
        let rows = step.n_tokens;
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
        let r = self.kernels.mla_attention(&a, shape, cache.spec.block_size);
        self.finish("mla_attention", t0, r);
    }
}
