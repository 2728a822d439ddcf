//! The decoder-only transformer every supported architecture is: pre-norm layers of attention
//! (grouped-query with rotary, or multi-head latent) and a feed-forward half (SwiGLU MLP, or a
//! mixture of experts), written once against the Backend op set. The architecture files only
//! say which parts their checkpoints have (`Arch`).

use hearth_backend::{Backend, KvCacheSpec};

use crate::attention::{Gqa, GqaDims};
use crate::batch::ForwardBatch;
use crate::ffn::{Ffn, MoeArch};
use crate::layers::{Bufs, Load};
use crate::mla::{Mla, MlaDims};
use crate::model::{CausalLm, ModelInfo};
use crate::source::WeightSource;
use crate::LoadError;

/// The attention an architecture uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttnArch {
    Gqa {
        qkv_bias: bool,
        qk_norm: bool,
    },
    /// Multi-head latent attention (`mla.rs`).
    Mla,
}

/// What an architecture's layers are made of.
#[derive(Debug, Clone)]
pub struct Arch {
    pub attention: AttnArch,
    /// The experts, and for each layer whether it uses them (the others are dense MLPs).
    pub moe: Option<(MoeArch, Vec<bool>)>,
    /// Rotary dims as a fraction of head_dim when the config does not say (GLM-4.x: 0.5).
    pub default_partial_rotary: f64,
}

impl Arch {
    pub fn dense(qkv_bias: bool, qk_norm: bool) -> Self {
        Arch {
            attention: AttnArch::Gqa { qkv_bias, qk_norm },
            moe: None,
            default_partial_rotary: 1.0,
        }
    }
}

enum AttnDims {
    Gqa(GqaDims),
    Mla(MlaDims),
}

enum Attn<W> {
    Gqa(Gqa<W>),
    Mla(Mla<W>),
}

struct Layer<W> {
    attn_norm: W,
    attn: Attn<W>,
    ffn_norm: W,
    ffn: Ffn<W>,
}

pub struct Decoder<B: Backend> {
    info: ModelInfo,
    dims: AttnDims,
    hidden: usize,
    eps: f32,
    embed: B::Weight,
    layers: Vec<Layer<B::Weight>>,
    norm: B::Weight,
    /// `None` when tied to the embedding.
    lm_head: Option<B::Weight>,
}

impl<B: Backend> Decoder<B> {
    pub fn load(
        backend: &B,
        src: &dyn WeightSource,
        arch: Arch,
        fp8: bool,
    ) -> Result<Self, LoadError> {
        let l = Load {
            b: backend,
            src,
            fp8,
        };
        let cfg = src.config();
        if let Some(act) = cfg.hidden_act.as_deref().filter(|a| *a != "silu") {
            return Err(LoadError::Unsupported {
                path: src.path().to_path_buf(),
                what: format!("hidden_act `{act}`"),
                supported: "silu".into(),
            });
        }
        let h = cfg.hidden_size;
        let eps = cfg.rms_norm_eps as f32;
        let dims = match arch.attention {
            AttnArch::Gqa { .. } => AttnDims::Gqa(GqaDims {
                n_heads: cfg.num_attention_heads,
                n_kv_heads: cfg.n_kv_heads(),
                head_dim: cfg.head_dim(),
                eps,
                rope: cfg.rope_with(
                    src.path(),
                    cfg.head_dim(),
                    arch.default_partial_rotary,
                    true,
                )?,
            }),
            AttnArch::Mla => AttnDims::Mla(MlaDims::from_config(&l)?),
        };
        if let Some(n) = cfg.num_nextn_predict_layers.filter(|&n| n > 0) {
            tracing::info!(
                "skipping {n} multi-token-prediction layer(s) stored after layer {}: not run \
                 (no speculative decoding yet)",
                cfg.num_hidden_layers - 1
            );
        }
        let embed = l.up("model.embed_tokens.weight", &[cfg.vocab_size, h])?;
        let mut progress = crate::progress::layers(cfg.num_hidden_layers);
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let p = |s: &str| format!("model.layers.{i}.{s}");
            let attn = match (&dims, arch.attention) {
                (AttnDims::Gqa(d), AttnArch::Gqa { qkv_bias, qk_norm }) => {
                    Attn::Gqa(Gqa::load(&l, i, d, (qkv_bias, qk_norm))?)
                }
                (AttnDims::Mla(d), _) => Attn::Mla(Mla::load(&l, i, d)?),
                (AttnDims::Gqa(_), AttnArch::Mla) => unreachable!("dims follow the arch"),
            };
            let ffn = match &arch.moe {
                Some((moe, sparse)) if sparse[i] => Ffn::moe(&l, i, moe)?,
                _ => Ffn::dense(&l, i)?,
            };
            layers.push(Layer {
                attn_norm: l.up(&p("input_layernorm.weight"), &[h])?,
                attn,
                ffn_norm: l.up(&p("post_attention_layernorm.weight"), &[h])?,
                ffn,
            });
            progress.inc();
        }
        progress.finish();
        let norm = l.up("model.norm.weight", &[h])?;
        let lm_head = match src.tensor("lm_head.weight")? {
            Some(w) if !cfg.tie_word_embeddings => Some(backend.upload(w)?),
            _ => None,
        };
        let info = model_info(
            backend,
            cfg,
            &arch,
            &dims,
            &layers,
            lm_head.as_ref().unwrap_or(&embed),
        );
        Ok(Decoder {
            info,
            dims,
            hidden: h,
            eps,
            embed,
            layers,
            norm,
            lm_head,
        })
    }
}

/// Sizes the memory plan needs and the kernel paths the startup log names.
fn model_info<B: Backend>(
    b: &B,
    cfg: &crate::config::HfConfig,
    arch: &Arch,
    dims: &AttnDims,
    layers: &[Layer<B::Weight>],
    head: &B::Weight,
) -> ModelInfo {
    let h = cfg.hidden_size;
    let moe = arch.moe.as_ref().map(|(m, _)| m);
    let inter = moe.map_or(0, |m| m.expert_inter.max(m.shared_inter.unwrap_or(0)));
    let inter = inter.max(cfg.intermediate_size);
    let n_experts = moe.map_or(0, |m| m.routing.n_experts);
    // Widest value of each buffer in `Bufs`, plus x, h, the logits row gather and router
    // logits (see forward).
    let (attn_floats, matmul_in, fused) = match dims {
        AttnDims::Gqa(d) => {
            let (q, kv) = (d.q_dim(), d.kv_dim());
            (3 * q + 2 * kv, q, (q + 2 * kv).max(2 * inter))
        }
        AttnDims::Mla(d) => {
            let nh = d.n_heads;
            let q_rank = d.q_lora_rank.unwrap_or(0);
            let lat = nh * d.kv_lora_rank;
            // q, k, v, attn, q_a and q_a_norm, q_rope, latent, q_latent.
            let floats = nh * d.nope.max(d.kv_lora_rank)
                + d.kv_lora_rank
                + d.rope_dim.max(d.kv_lora_rank)
                + lat
                + 2 * q_rank
                + nh * d.rope_dim
                + d.kv_lora_rank
                + lat;
            (floats, q_rank.max(lat).max(nh * d.v_dim), 2 * inter)
        }
    };
    let mut kernel_paths = vec![
        (
            "attention projections",
            match &layers[0].attn {
                Attn::Gqa(g) => b.describe(g.first_weight()),
                Attn::Mla(m) => b.describe(m.first_weight()),
            },
        ),
        ("mlp", b.describe(layers[0].ffn.first_weight())),
    ];
    if matches!(layers[0].attn, Attn::Gqa(_)) {
        kernel_paths.push(("prefill attention", b.describe_prefill_attention()));
    }
    if let Some(l) = layers.iter().find(|l| matches!(l.ffn, Ffn::Moe(_))) {
        kernel_paths.push(("experts", b.describe(l.ffn.first_weight())));
    }
    kernel_paths.push(("lm_head", b.describe(head)));
    ModelInfo {
        architecture: cfg.architecture().to_owned(),
        vocab_size: cfg.vocab_size,
        num_layers: cfg.num_hidden_layers,
        max_position_embeddings: cfg.max_position_embeddings,
        activation_floats_per_token: 5 * h + attn_floats + 3 * inter + n_experts,
        matmul_input_floats_per_token: h.max(matmul_in).max(inter),
        // At least the residual stream: a W8A8 sum for it waits there when its scales are
        // applied by a pass (CUDA, cuBLASLt without outer-vector scales).
        fused_floats_per_token: fused.max(h),
        kernel_paths: kernel_paths
            .into_iter()
            .map(|(a, d)| (a.to_owned(), d))
            .collect(),
    }
}

impl<B: Backend> CausalLm<B> for Decoder<B> {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn kv_spec(&self, num_blocks: usize, block_size: usize) -> KvCacheSpec {
        let (num_kv_heads, head_dim, latent) = match &self.dims {
            AttnDims::Gqa(d) => (d.n_kv_heads, d.head_dim, false),
            AttnDims::Mla(d) => (1, d.latent_width(), true),
        };
        KvCacheSpec {
            num_layers: self.layers.len(),
            num_blocks,
            block_size,
            num_kv_heads,
            head_dim,
            dtype: Default::default(),
            latent,
        }
    }

    fn forward(&self, b: &B, batch: &ForwardBatch, kv: &mut B::KvCache) -> Vec<f32> {
        let logits = self.logits(b, batch, kv, false);
        if batch.logits_rows.is_empty() {
            return Vec::new();
        }
        b.to_host(&logits)
    }

    fn forward_greedy_deferred(
        &self,
        b: &B,
        batch: &ForwardBatch,
        kv: &mut B::KvCache,
        fed: bool,
    ) -> B::Ids {
        let logits = self.logits(b, batch, kv, fed);
        b.argmax_deferred(&logits, self.info.vocab_size)
    }

    fn forward_sample_deferred(
        &self,
        b: &B,
        batch: &ForwardBatch,
        kv: &mut B::KvCache,
        rows: &[hearth_backend::SampleRow],
        fed: bool,
    ) -> B::Ids {
        let logits = self.logits(b, batch, kv, fed);
        b.sample_rows_deferred(&logits, self.info.vocab_size, rows)
    }
}

impl<B: Backend> Decoder<B> {
    /// The step's logits rows, `[batch.logits_rows.len(), vocab]`, in a backend buffer; with
    /// `fed`, the step's tokens are the last deferred greedy ids (`Backend::begin_fed_step`).
    fn logits(&self, b: &B, batch: &ForwardBatch, kv: &mut B::KvCache, fed: bool) -> B::Buf {
        let kinds = &batch.attn.prefill[..];
        debug_assert_eq!(kinds.len(), batch.tokens.len());
        let step = if fed {
            b.begin_fed_step(batch)
        } else {
            b.begin_step(batch)
        };
        let mut x = b.buf(0);
        b.embedding(&self.embed, &step, &mut x);
        let mut h = b.buf(0);
        let mut s = Bufs::new(b);
        // Whether h holds the next norm's output already: a MoE layer's output is added into
        // x by that norm (add_rms_norm). Otherwise the next half layer norms x itself, where
        // its first projections can fold the norm in.
        let mut normed = false;
        for (i, l) in self.layers.iter().enumerate() {
            let attn_norm = (!normed).then_some((&l.attn_norm, self.eps));
            // The output projections add straight into the residual stream x.
            match (&l.attn, &self.dims) {
                (Attn::Gqa(a), AttnDims::Gqa(d)) => a.forward(
                    b,
                    i,
                    d,
                    attn_norm,
                    (&mut h, &mut x),
                    kinds,
                    &step,
                    kv,
                    &mut s,
                ),
                (Attn::Mla(a), AttnDims::Mla(d)) => {
                    if let Some((w, eps)) = attn_norm {
                        b.rms_norm(&x, w, eps, &mut h);
                    }
                    a.forward(b, i, d, (&h, &mut x), kinds, &step, kv, &mut s)
                }
                _ => unreachable!("layers follow the dims"),
            }
            let ffn_norm = (&l.ffn_norm, self.eps);
            normed = !l.ffn.forward(b, ffn_norm, (&mut h, &mut x), kinds, &mut s);
            if normed {
                let next_norm = self
                    .layers
                    .get(i + 1)
                    .map_or(&self.norm, |nl| &nl.attn_norm);
                b.add_rms_norm(&mut x, &s.down, next_norm, self.eps, &mut h);
            }
        }
        if !normed {
            b.rms_norm(&x, &self.norm, self.eps, &mut h);
        }
        let mut last = b.buf(0);
        if batch.logits_rows.is_empty() {
            // A step of prompt chunks none of which ends its prompt: the cache is filled, no
            // logits are wanted (and a zero-row matmul is no kernel launch).
            return last;
        }
        b.gather_logits_rows(&h, self.hidden, &step, &mut last);
        let mut logits = b.buf(0);
        let head = self.lm_head.as_ref().unwrap_or(&self.embed);
        // The head always takes the generated-row path: one sampled prompt row would otherwise
        // dequantize the whole vocabulary matrix. Still one path per row, so still invariant.
        let head_kinds = vec![false; batch.logits_rows.len()];
        b.linear(&last, &head_kinds, head, None, &mut logits);
        logits
    }
}
