//! Grouped-query attention with rotary embeddings (Llama, Qwen2/3, GLM-4.x MoE): Q/K/V
//! projections with optional bias, optional per-head q/k RMS norm, (partial) rotary, the paged
//! KV cache, the output projection.

use hearth_backend::{AttnShape, Backend, RopeSpec, RopeWrite};

use crate::layers::{Bufs, Load};
use crate::LoadError;

/// Head layout and rotary embedding, shared by all layers.
#[derive(Debug, Clone)]
pub struct GqaDims {
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub eps: f32,
    pub rope: RopeSpec,
}

impl GqaDims {
    pub fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }

    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }
}

pub struct Gqa<W> {
    q: W,
    k: W,
    v: W,
    qkv_bias: Option<[W; 3]>,
    qk_norm: Option<[W; 2]>,
    o: W,
}

impl<W> Gqa<W> {
    pub fn load<B: Backend<Weight = W>>(
        l: &Load<'_, B>,
        i: usize,
        d: &GqaDims,
        (qkv_bias, qk_norm): (bool, bool),
    ) -> Result<Self, LoadError> {
        let p = |s: &str| format!("model.layers.{i}.self_attn.{s}");
        let (h, hd) = (l.cfg().hidden_size, d.head_dim);
        let (q_dim, kv_dim) = (d.q_dim(), d.kv_dim());
        let qkv_bias = if qkv_bias {
            Some([
                l.up(&p("q_proj.bias"), &[q_dim])?,
                l.up(&p("k_proj.bias"), &[kv_dim])?,
                l.up(&p("v_proj.bias"), &[kv_dim])?,
            ])
        } else {
            None
        };
        let qk_norm = if qk_norm {
            Some([
                l.up(&p("q_norm.weight"), &[hd])?,
                l.up(&p("k_norm.weight"), &[hd])?,
            ])
        } else {
            None
        };
        let [q, k, v] = l.linear_group([
            (p("q_proj.weight"), [q_dim, h]),
            (p("k_proj.weight"), [kv_dim, h]),
            (p("v_proj.weight"), [kv_dim, h]),
        ])?;
        let o = l.linear(&p("o_proj.weight"), &[h, q_dim])?;
        Ok(Gqa {
            q,
            k,
            v,
            qkv_bias,
            qk_norm,
            o,
        })
    }

    pub fn first_weight(&self) -> &W {
        &self.q
    }

    /// Attention of layer `i`, added to the residual stream `x`: over `norm` (the attention
    /// norm's weight and eps) applied to x, which the projections may fold in, or with `None`
    /// over `h`, which holds the normed input already.
    #[allow(clippy::too_many_arguments)]
    pub fn forward<B: Backend<Weight = W>>(
        &self,
        b: &B,
        i: usize,
        d: &GqaDims,
        norm: Option<(&W, f32)>,
        (h, x): (&mut B::Buf, &mut B::Buf),
        kinds: &[bool],
        step: &B::Step,
        kv: &mut B::KvCache,
        s: &mut Bufs<B::Buf>,
    ) {
        let shape = AttnShape {
            n_heads: d.n_heads,
            n_kv_heads: d.n_kv_heads,
            head_dim: d.head_dim,
            scale: 1.0 / (d.head_dim as f32).sqrt(),
        };
        let biases = self.qkv_bias.as_ref().map(|[bq, bk, bv]| [bq, bk, bv]);
        let ws = [&self.q, &self.k, &self.v];
        let outs = [&mut s.q, &mut s.k, &mut s.v];
        match norm {
            Some((w, eps)) => b.norm_linear_qkv((x, w, eps), h, kinds, ws, biases, outs),
            None => b.linear_qkv(h, kinds, ws, biases, outs),
        }
        let rw = RopeWrite {
            qk_norm: self.qk_norm.as_ref().map(|[qn, kn]| [qn, kn]),
            eps: d.eps,
            n_heads: d.n_heads,
            n_kv_heads: d.n_kv_heads,
            rope: &d.rope,
            layer: i,
        };
        b.rope_attention(
            (&mut s.q, &mut s.k, &s.v),
            &rw,
            shape,
            kv,
            step,
            &mut s.attn,
        );
        b.linear_residual(&s.attn, kinds, &self.o, x);
    }
}
