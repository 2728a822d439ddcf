//! Multi-head latent attention (DeepSeek-V3, GLM-4.7-Flash) in the absorbed form: the cache
//! holds one latent row per token (`kv_a_layernorm(c_kv)` and the rotary key); each head's key
//! projection is folded into its query (`q_nope . W_UK`), and its value projection applied to
//! the attention output (`W_UV`), so keys and values are never expanded per head.
//!
//! At load, `q_b_proj` (or `q_proj`) is split into its no-rotary and rotary rows,
//! `kv_a_proj_with_mqa` into the latent and rotary-key rows, and `kv_b_proj` into W_UK
//! (transposed per head) and W_UV.

use hearth_backend::{Backend, MlaShape, RopeSpec};

use crate::host::{rows, transpose_heads};
use crate::layers::{Bufs, Load};
use crate::LoadError;

#[derive(Debug, Clone)]
pub struct MlaDims {
    pub n_heads: usize,
    pub q_lora_rank: Option<usize>,
    pub kv_lora_rank: usize,
    pub nope: usize,
    pub rope_dim: usize,
    pub v_dim: usize,
    pub eps: f32,
    pub scale: f32,
    pub rope: RopeSpec,
}

impl MlaDims {
    pub fn from_config(l: &Load<'_, impl Backend>) -> Result<Self, LoadError> {
        let cfg = l.cfg();
        let path = l.path();
        let nope = cfg.need(path, "qk_nope_head_dim", cfg.qk_nope_head_dim)?;
        let rope_dim = cfg.need(path, "qk_rope_head_dim", cfg.qk_rope_head_dim)?;
        if cfg.attention_bias {
            return Err(LoadError::Unsupported {
                path: path.to_path_buf(),
                what: "attention_bias with multi-head latent attention".into(),
                supported: "MLA without projection biases (DeepSeek-V3, GLM-4.7-Flash)".into(),
            });
        }
        let interleave = cfg.rope_interleave.unwrap_or(true);
        Ok(MlaDims {
            n_heads: cfg.num_attention_heads,
            q_lora_rank: cfg.q_lora_rank,
            kv_lora_rank: cfg.need(path, "kv_lora_rank", cfg.kv_lora_rank)?,
            nope,
            rope_dim,
            v_dim: cfg.need(path, "v_head_dim", cfg.v_head_dim)?,
            eps: cfg.rms_norm_eps as f32,
            scale: cfg.yarn_softmax_mscale() / ((nope + rope_dim) as f32).sqrt(),
            // Interleaved pairs rotate the same dot products as transformers' de-interleaving
            // variant (q and k are permuted alike).
            rope: cfg.rope_with(path, rope_dim, 1.0, !interleave)?,
        })
    }

    /// Width of a latent cache row.
    pub fn latent_width(&self) -> usize {
        self.kv_lora_rank + self.rope_dim
    }
}

pub struct Mla<W> {
    /// `q_a_proj` and `q_a_layernorm`, when queries go through a low rank.
    q_a: Option<(W, W)>,
    q_nope: W,
    q_rope: W,
    kv_latent: W,
    kv_rope: W,
    kv_norm: W,
    /// Per head `[kv_lora_rank, nope]`: W_UK transposed.
    w_uk_t: W,
    /// Per head `[v_dim, kv_lora_rank]`.
    w_uv: W,
    o: W,
}

impl<W> Mla<W> {
    pub fn load<B: Backend<Weight = W>>(
        l: &Load<'_, B>,
        i: usize,
        d: &MlaDims,
    ) -> Result<Self, LoadError> {
        let p = |s: &str| format!("model.layers.{i}.self_attn.{s}");
        let hidden = l.cfg().hidden_size;
        let (nh, rank, nope, rd) = (d.n_heads, d.kv_lora_rank, d.nope, d.rope_dim);
        let per_head = |start: usize, len: usize, stride: usize| -> Vec<std::ops::Range<usize>> {
            (0..nh)
                .map(|h| h * stride + start..h * stride + start + len)
                .collect()
        };
        let (q_a, q_full, q_in) = match d.q_lora_rank {
            Some(r) => {
                let a = l.up(&p("q_a_proj.weight"), &[r, hidden])?;
                let norm = l.up(&p("q_a_layernorm.weight"), &[r])?;
                let b = l.host(&p("q_b_proj.weight"), &[nh * (nope + rd), r])?;
                (Some((a, norm)), b, "q_b_proj")
            }
            None => {
                let q = l.host(&p("q_proj.weight"), &[nh * (nope + rd), hidden])?;
                (None, q, "q_proj")
            }
        };
        let q_nope = l.up_host(rows(
            &q_full,
            &p(&format!("{q_in}.nope")),
            &per_head(0, nope, nope + rd),
        ))?;
        let q_rope = l.up_host(rows(
            &q_full,
            &p(&format!("{q_in}.rope")),
            &per_head(nope, rd, nope + rd),
        ))?;
        let kv_a = l.host(&p("kv_a_proj_with_mqa.weight"), &[rank + rd, hidden])?;
        let (latent_rows, rope_rows) = (0..rank, rank..rank + rd);
        let kv_latent = l.up_host(rows(
            &kv_a,
            &p("kv_a_proj_with_mqa.latent"),
            std::slice::from_ref(&latent_rows),
        ))?;
        let kv_rope = l.up_host(rows(
            &kv_a,
            &p("kv_a_proj_with_mqa.rope"),
            std::slice::from_ref(&rope_rows),
        ))?;
        let kv_norm = l.up(&p("kv_a_layernorm.weight"), &[rank])?;
        let kv_b = l.host(&p("kv_b_proj.weight"), &[nh * (nope + d.v_dim), rank])?;
        let w_uk = rows(
            &kv_b,
            &p("kv_b_proj.uk"),
            &per_head(0, nope, nope + d.v_dim),
        );
        let w_uk_t = l.up_host(transpose_heads(&w_uk, &p("kv_b_proj.uk_t"), nh))?;
        let w_uv = l.up_host(rows(
            &kv_b,
            &p("kv_b_proj.uv"),
            &per_head(nope, d.v_dim, nope + d.v_dim),
        ))?;
        let o = l.up(&p("o_proj.weight"), &[hidden, nh * d.v_dim])?;
        Ok(Mla {
            q_a,
            q_nope,
            q_rope,
            kv_latent,
            kv_rope,
            kv_norm,
            w_uk_t,
            w_uv,
            o,
        })
    }

    pub fn first_weight(&self) -> &W {
        &self.kv_latent
    }

    /// MLA of layer `i` over the normed input `h`, added to the residual stream `x`.
    #[allow(clippy::too_many_arguments)]
    pub fn forward<B: Backend<Weight = W>>(
        &self,
        b: &B,
        i: usize,
        d: &MlaDims,
        (h, x): (&B::Buf, &mut B::Buf),
        kinds: &[bool],
        step: &B::Step,
        kv: &mut B::KvCache,
        s: &mut Bufs<B::Buf>,
    ) {
        let q_in = match &self.q_a {
            Some((a, norm)) => {
                // The three projections of h in one launch (one read of h on a GPU).
                b.linear_qkv(
                    h,
                    kinds,
                    [a, &self.kv_latent, &self.kv_rope],
                    None,
                    [&mut s.q_a, &mut s.k, &mut s.v],
                );
                b.rms_norm(&s.q_a, norm, d.eps, &mut s.q_a_norm);
                &s.q_a_norm
            }
            None => {
                b.linear(h, kinds, &self.kv_latent, None, &mut s.k);
                b.linear(h, kinds, &self.kv_rope, None, &mut s.v);
                h
            }
        };
        b.linear_pair(
            q_in,
            kinds,
            [&self.q_nope, &self.q_rope],
            [&mut s.q, &mut s.q_rope],
        );
        b.mla_prep(
            kv,
            i,
            (&s.k, &self.kv_norm, d.eps),
            &mut s.latent,
            (&mut s.q_rope, &mut s.v),
            (&s.q, &self.w_uk_t, &mut s.q_latent),
            d.n_heads,
            &d.rope,
            kinds,
            step,
        );
        let shape = MlaShape {
            n_heads: d.n_heads,
            kv_lora_rank: d.kv_lora_rank,
            rope_dim: d.rope_dim,
            scale: d.scale,
        };
        b.mla_attention_uv(
            kv,
            i,
            (&s.q_latent, &s.q_rope),
            shape,
            (step, kinds),
            &self.w_uv,
            (&mut s.attn, &mut s.act),
        );
        b.linear_residual(&s.act, kinds, &self.o, x);
    }
}
