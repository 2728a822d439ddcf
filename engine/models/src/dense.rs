//! The dense decoder-only transformer shared by Llama, Qwen2 and Qwen3 (pre-norm, GQA attention
//! with rotary embeddings, SwiGLU MLP), written once against the Backend op set. The architecture
//! files only say which optional parts (q/k norm, qkv bias) their checkpoints have.

use hearth_backend::{AttnShape, Backend, KvCacheSpec, RopeSpec, RopeWrite};

use crate::batch::ForwardBatch;
use crate::config::HfConfig;
use crate::model::{CausalLm, ModelInfo};
use crate::source::WeightSource;
use crate::LoadError;

/// Optional parts of a dense layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DenseFlavor {
    pub qkv_bias: bool,
    pub qk_norm: bool,
}

#[derive(Debug, Clone)]
struct Dims {
    hidden: usize,
    inter: usize,
    n_heads: usize,
    n_kv_heads: usize,
    head_dim: usize,
    eps: f32,
    rope: RopeSpec,
}

struct Layer<W> {
    attn_norm: W,
    q: W,
    k: W,
    v: W,
    qkv_bias: Option<[W; 3]>,
    qk_norm: Option<[W; 2]>,
    o: W,
    ffn_norm: W,
    gate: W,
    up: W,
    down: W,
}

pub struct DenseDecoder<B: Backend> {
    info: ModelInfo,
    dims: Dims,
    embed: B::Weight,
    layers: Vec<Layer<B::Weight>>,
    norm: B::Weight,
    /// `None` when tied to the embedding.
    lm_head: Option<B::Weight>,
}

impl<B: Backend> DenseDecoder<B> {
    pub fn load(
        backend: &B,
        src: &dyn WeightSource,
        flavor: DenseFlavor,
    ) -> Result<Self, LoadError> {
        let cfg: &HfConfig = src.config();
        if let Some(act) = cfg.hidden_act.as_deref().filter(|a| *a != "silu") {
            return Err(LoadError::Unsupported {
                path: src.path().to_path_buf(),
                what: format!("hidden_act `{act}`"),
                supported: "silu".into(),
            });
        }
        let dims = Dims {
            hidden: cfg.hidden_size,
            inter: cfg.intermediate_size,
            n_heads: cfg.num_attention_heads,
            n_kv_heads: cfg.n_kv_heads(),
            head_dim: cfg.head_dim(),
            eps: cfg.rms_norm_eps as f32,
            rope: cfg.rope(src.path())?,
        };
        let (h, hd) = (dims.hidden, dims.head_dim);
        let (q_dim, kv_dim) = (dims.n_heads * hd, dims.n_kv_heads * hd);
        let up = |name: &str, shape: &[usize]| -> Result<B::Weight, LoadError> {
            Ok(backend.upload(src.require(name, shape)?)?)
        };
        // Weights read together, uploaded together (a backend may fuse their matmuls).
        let group = |parts: &[(String, [usize; 2])]| -> Result<_, LoadError> {
            let ws = parts
                .iter()
                .map(|(name, shape)| src.require(name, shape))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(backend.upload_group(ws)?.into_iter())
        };
        const ONE_EACH: &str = "upload_group returns one weight per input";
        let embed = up("model.embed_tokens.weight", &[cfg.vocab_size, h])?;
        let mut progress = crate::progress::layers(cfg.num_hidden_layers);
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let p = |s: &str| format!("model.layers.{i}.{s}");
            let qkv_bias = if flavor.qkv_bias {
                Some([
                    up(&p("self_attn.q_proj.bias"), &[q_dim])?,
                    up(&p("self_attn.k_proj.bias"), &[kv_dim])?,
                    up(&p("self_attn.v_proj.bias"), &[kv_dim])?,
                ])
            } else {
                None
            };
            let qk_norm = if flavor.qk_norm {
                Some([
                    up(&p("self_attn.q_norm.weight"), &[hd])?,
                    up(&p("self_attn.k_norm.weight"), &[hd])?,
                ])
            } else {
                None
            };
            let mut qkv = group(&[
                (p("self_attn.q_proj.weight"), [q_dim, h]),
                (p("self_attn.k_proj.weight"), [kv_dim, h]),
                (p("self_attn.v_proj.weight"), [kv_dim, h]),
            ])?;
            let attn_norm = up(&p("input_layernorm.weight"), &[h])?;
            let (q, k, v) = (
                qkv.next().expect(ONE_EACH),
                qkv.next().expect(ONE_EACH),
                qkv.next().expect(ONE_EACH),
            );
            let o = up(&p("self_attn.o_proj.weight"), &[h, q_dim])?;
            let ffn_norm = up(&p("post_attention_layernorm.weight"), &[h])?;
            let mut gate_up = group(&[
                (p("mlp.gate_proj.weight"), [dims.inter, h]),
                (p("mlp.up_proj.weight"), [dims.inter, h]),
            ])?;
            let (gate, up_w) = (
                gate_up.next().expect(ONE_EACH),
                gate_up.next().expect(ONE_EACH),
            );
            layers.push(Layer {
                attn_norm,
                q,
                k,
                v,
                qkv_bias,
                qk_norm,
                o,
                ffn_norm,
                gate,
                up: up_w,
                down: up(&p("mlp.down_proj.weight"), &[h, dims.inter])?,
            });
            progress.inc();
        }
        progress.finish();
        let norm = up("model.norm.weight", &[h])?;
        let lm_head = match src.tensor("lm_head.weight")? {
            Some(w) if !cfg.tie_word_embeddings => Some(backend.upload(w)?),
            _ => None,
        };
        let info = ModelInfo {
            architecture: cfg.architecture().to_owned(),
            vocab_size: cfg.vocab_size,
            num_layers: cfg.num_hidden_layers,
            max_position_embeddings: cfg.max_position_embeddings,
            // x, h, o, down, last + q, attn, normed + k, v + gate, up, act (see forward).
            activation_floats_per_token: 5 * h + 3 * q_dim + 2 * kv_dim + 3 * dims.inter,
            matmul_input_floats_per_token: h.max(q_dim).max(dims.inter),
            fused_floats_per_token: (q_dim + 2 * kv_dim).max(2 * dims.inter),
            kernel_paths: vec![
                ("attention projections", backend.describe(&layers[0].q)),
                ("mlp", backend.describe(&layers[0].gate)),
                (
                    "lm_head",
                    backend.describe(lm_head.as_ref().unwrap_or(&embed)),
                ),
            ]
            .into_iter()
            .map(|(a, b)| (a.to_owned(), b))
            .collect(),
        };
        Ok(DenseDecoder {
            info,
            dims,
            embed,
            layers,
            norm,
            lm_head,
        })
    }
}

impl<B: Backend> CausalLm<B> for DenseDecoder<B> {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn kv_spec(&self, num_blocks: usize, block_size: usize) -> KvCacheSpec {
        KvCacheSpec {
            num_layers: self.layers.len(),
            num_blocks,
            block_size,
            num_kv_heads: self.dims.n_kv_heads,
            head_dim: self.dims.head_dim,
            dtype: Default::default(),
        }
    }

    fn forward(&self, b: &B, batch: &ForwardBatch, kv: &mut B::KvCache) -> Vec<f32> {
        let logits = self.logits(b, batch, kv);
        b.to_host(&logits)
    }

    fn forward_greedy(&self, b: &B, batch: &ForwardBatch, kv: &mut B::KvCache) -> Vec<u32> {
        let logits = self.logits(b, batch, kv);
        b.argmax_rows(&logits, self.info.vocab_size)
    }

    fn forward_sample(
        &self,
        b: &B,
        batch: &ForwardBatch,
        kv: &mut B::KvCache,
        rows: &[hearth_backend::SampleRow],
    ) -> Vec<u32> {
        let logits = self.logits(b, batch, kv);
        b.sample_rows(&logits, self.info.vocab_size, rows)
    }
}

impl<B: Backend> DenseDecoder<B> {
    /// The step's logits rows, `[batch.logits_rows.len(), vocab]`, in a backend buffer.
    fn logits(&self, b: &B, batch: &ForwardBatch, kv: &mut B::KvCache) -> B::Buf {
        let d = &self.dims;
        let kinds = &batch.attn.prefill[..];
        debug_assert_eq!(kinds.len(), batch.tokens.len());
        let shape = AttnShape {
            n_heads: d.n_heads,
            n_kv_heads: d.n_kv_heads,
            head_dim: d.head_dim,
            scale: 1.0 / (d.head_dim as f32).sqrt(),
        };
        let step = b.begin_step(batch);
        let mut x = b.buf(0);
        b.embedding(&self.embed, &step, &mut x);
        let (mut h, mut q, mut k, mut v) = (b.buf(0), b.buf(0), b.buf(0), b.buf(0));
        let (mut attn, mut o, mut act, mut down) = (b.buf(0), b.buf(0), b.buf(0), b.buf(0));
        b.rms_norm(&x, &self.layers[0].attn_norm, d.eps, &mut h);
        for (i, l) in self.layers.iter().enumerate() {
            let biases = l.qkv_bias.as_ref().map(|[bq, bk, bv]| [bq, bk, bv]);
            b.linear_qkv(
                &h,
                kinds,
                [&l.q, &l.k, &l.v],
                biases,
                [&mut q, &mut k, &mut v],
            );
            let rw = RopeWrite {
                qk_norm: l.qk_norm.as_ref().map(|[qn, kn]| [qn, kn]),
                eps: d.eps,
                n_heads: d.n_heads,
                n_kv_heads: d.n_kv_heads,
                rope: &d.rope,
                layer: i,
            };
            b.rope_write_kv((&mut q, &mut k, &v), &rw, kv, &step);
            b.attention(kv, i, &q, shape, &step, &mut attn);
            b.linear(&attn, kinds, &l.o, None, &mut o);
            b.add_rms_norm(&mut x, &o, &l.ffn_norm, d.eps, &mut h);
            b.linear_swiglu(&h, kinds, &l.gate, &l.up, &mut act);
            b.linear(&act, kinds, &l.down, None, &mut down);
            let next_norm = self
                .layers
                .get(i + 1)
                .map_or(&self.norm, |nl| &nl.attn_norm);
            b.add_rms_norm(&mut x, &down, next_norm, d.eps, &mut h);
        }
        let mut last = b.buf(0);
        b.gather_logits_rows(&h, d.hidden, &step, &mut last);
        let mut logits = b.buf(0);
        let head = self.lm_head.as_ref().unwrap_or(&self.embed);
        // The head always takes the generated-row path: one sampled prompt row would otherwise
        // dequantize the whole vocabulary matrix. Still one path per row, so still invariant.
        let head_kinds = vec![false; batch.logits_rows.len()];
        b.linear(&last, &head_kinds, head, None, &mut logits);
        logits
    }
}
