//! The decoder configuration every architecture maps onto, and reading config.json.
//! GGUF metadata is first translated into the same config.json shape (`gguf_weights.rs`) so there
//! is one path from a checkpoint's config to a model.

use std::path::Path;

use hearth_backend::{Llama3RopeScaling, RopeSpec};
use serde::Deserialize;

use crate::LoadError;

/// The config.json fields of the supported architectures (names as in transformers).
#[derive(Debug, Clone, Deserialize)]
pub struct HfConfig {
    #[serde(default)]
    pub architectures: Vec<String>,
    #[serde(default)]
    pub model_type: Option<String>,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    #[serde(default)]
    pub head_dim: Option<usize>,
    pub vocab_size: usize,
    #[serde(default = "default_eps")]
    pub rms_norm_eps: f64,
    #[serde(default = "default_theta")]
    pub rope_theta: f64,
    #[serde(default)]
    pub rope_scaling: Option<serde_json::Value>,
    /// transformers 5 writes `rope_theta` and the scaling together here.
    #[serde(default)]
    pub rope_parameters: Option<serde_json::Value>,
    #[serde(default)]
    pub partial_rotary_factor: Option<f64>,
    #[serde(default)]
    pub max_position_embeddings: Option<usize>,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    #[serde(default)]
    pub attention_bias: bool,
    #[serde(default)]
    pub mlp_bias: bool,
    #[serde(default)]
    pub hidden_act: Option<String>,
    #[serde(default)]
    pub quantization_config: Option<serde_json::Value>,
    #[serde(default)]
    pub bos_token_id: Option<serde_json::Value>,
    #[serde(default)]
    pub eos_token_id: Option<serde_json::Value>,

    // Mixture of experts (Qwen3-MoE, GLM-4.x MoE, DeepSeek-V3, GLM-4.7-Flash).
    /// Routed experts: `num_experts` (Qwen3-MoE) or `n_routed_experts` (DeepSeek, GLM).
    #[serde(default, alias = "n_routed_experts", alias = "num_local_experts")]
    pub num_experts: Option<usize>,
    #[serde(default)]
    pub num_experts_per_tok: Option<usize>,
    #[serde(default)]
    pub moe_intermediate_size: Option<usize>,
    #[serde(default)]
    pub norm_topk_prob: Option<bool>,
    #[serde(default)]
    pub n_shared_experts: Option<usize>,
    #[serde(default)]
    pub routed_scaling_factor: Option<f64>,
    #[serde(default)]
    pub n_group: Option<usize>,
    #[serde(default)]
    pub topk_group: Option<usize>,
    #[serde(default)]
    pub scoring_func: Option<String>,
    /// Layers before this one are dense (DeepSeek, GLM).
    #[serde(default)]
    pub first_k_dense_replace: Option<usize>,
    /// "dense" or "sparse" per layer (GLM-4.7-Flash).
    #[serde(default)]
    pub mlp_layer_types: Option<Vec<String>>,
    /// Qwen3-MoE: every `decoder_sparse_step`-th layer is sparse, except `mlp_only_layers`.
    #[serde(default)]
    pub decoder_sparse_step: Option<usize>,
    #[serde(default)]
    pub mlp_only_layers: Option<Vec<usize>>,
    /// GLM-4.x MoE: per-head RMS norm of q and k.
    #[serde(default)]
    pub use_qk_norm: Option<bool>,
    /// Multi-token-prediction layers stored after the decoder layers (not run).
    #[serde(default, alias = "num_mtp_layers")]
    pub num_nextn_predict_layers: Option<usize>,

    // Multi-head latent attention (DeepSeek-V3, GLM-4.7-Flash).
    #[serde(default)]
    pub q_lora_rank: Option<usize>,
    #[serde(default)]
    pub kv_lora_rank: Option<usize>,
    #[serde(default)]
    pub qk_nope_head_dim: Option<usize>,
    #[serde(default)]
    pub qk_rope_head_dim: Option<usize>,
    #[serde(default)]
    pub v_head_dim: Option<usize>,
    #[serde(default)]
    pub rope_interleave: Option<bool>,
}

fn default_eps() -> f64 {
    1e-6
}

fn default_theta() -> f64 {
    10000.0
}

impl HfConfig {
    pub fn from_file(path: &Path) -> Result<Self, LoadError> {
        let text = std::fs::read_to_string(path).map_err(|e| LoadError::io(path, e))?;
        Self::from_json(path, &text)
    }

    pub fn from_json(path: &Path, text: &str) -> Result<Self, LoadError> {
        serde_json::from_str(text).map_err(|e| LoadError::format(path, format!("config: {e}")))
    }

    pub fn architecture(&self) -> &str {
        self.architectures
            .first()
            .map(String::as_str)
            .unwrap_or("(none)")
    }

    pub fn n_kv_heads(&self) -> usize {
        self.num_key_value_heads.unwrap_or(self.num_attention_heads)
    }

    pub fn head_dim(&self) -> usize {
        self.head_dim
            .unwrap_or(self.hidden_size / self.num_attention_heads)
    }

    /// YaRN's factor on the softmax scale (DeepSeek-V3's `mscale_all_dim`), squared as
    /// transformers applies it; 1 without YaRN.
    pub fn yarn_softmax_mscale(&self) -> f32 {
        let params = self.rope_parameters.as_ref().filter(|v| v.is_object());
        let Some(s) = params.or(self.rope_scaling.as_ref().filter(|v| !v.is_null())) else {
            return 1.0;
        };
        let kind = s
            .get("rope_type")
            .or_else(|| s.get("type"))
            .and_then(|v| v.as_str());
        let num = |k: &str| s.get(k).and_then(|v| v.as_f64());
        match (kind, num("factor"), num("mscale_all_dim")) {
            (Some(k), Some(factor), Some(all)) if k != "default" && all != 0.0 && factor > 1.0 => {
                let m = 0.1 * all * factor.ln() + 1.0;
                (m * m) as f32
            }
            _ => 1.0,
        }
    }

    /// A field the architecture needs, or an error naming it.
    pub fn need<T: Copy>(&self, path: &Path, name: &str, v: Option<T>) -> Result<T, LoadError> {
        v.ok_or_else(|| LoadError::missing_field(path, name))
    }

    /// The rotary embedding this config asks for; unknown scaling types are an error.
    pub fn rope(&self, path: &Path) -> Result<RopeSpec, LoadError> {
        self.rope_with(path, self.head_dim(), 1.0, true)
    }

    /// The rotary embedding over `head_dim`-wide heads, rotating `partial_rotary_factor` of
    /// each (unless the config says), NeoX-style or in interleaved pairs.
    pub fn rope_with(
        &self,
        path: &Path,
        head_dim: usize,
        default_partial: f64,
        neox: bool,
    ) -> Result<RopeSpec, LoadError> {
        let params = self.rope_parameters.as_ref().filter(|v| v.is_object());
        let partial = params
            .and_then(|p| p.get("partial_rotary_factor"))
            .and_then(|v| v.as_f64())
            .or(self.partial_rotary_factor)
            .unwrap_or(default_partial);
        let rotary_dim = (head_dim as f64 * partial) as usize;
        let theta = params
            .and_then(|p| p.get("rope_theta"))
            .and_then(|v| v.as_f64())
            .unwrap_or(self.rope_theta);
        let rope = |llama3| RopeSpec::new(theta as f32, head_dim, rotary_dim, neox, llama3);
        let Some(scaling) = params.or(self.rope_scaling.as_ref().filter(|v| !v.is_null())) else {
            return Ok(rope(None));
        };
        let kind = scaling
            .get("rope_type")
            .or_else(|| scaling.get("type"))
            .and_then(|v| v.as_str())
            .unwrap_or("default");
        let num = |k: &str| scaling.get(k).and_then(|v| v.as_f64()).map(|v| v as f32);
        match kind {
            "default" => Ok(rope(None)),
            "llama3" => {
                let field = |k: &str| {
                    num(k)
                        .ok_or_else(|| LoadError::missing_field(path, &format!("rope_scaling.{k}")))
                };
                Ok(rope(Some(Llama3RopeScaling {
                    factor: field("factor")?,
                    low_freq_factor: field("low_freq_factor")?,
                    high_freq_factor: field("high_freq_factor")?,
                    original_max_position_embeddings: field("original_max_position_embeddings")?,
                })))
            }
            "yarn" => {
                let factor = num("factor")
                    .ok_or_else(|| LoadError::missing_field(path, "rope_scaling.factor"))?;
                let original = num("original_max_position_embeddings").ok_or_else(|| {
                    LoadError::missing_field(path, "rope_scaling.original_max_position_embeddings")
                })?;
                let mscale = |m: Option<f32>| match m {
                    Some(m) if factor > 1.0 => 0.1 * m * factor.ln() + 1.0,
                    _ => 1.0,
                };
                // transformers scales cos and sin by this attention factor; with DeepSeek-V3's
                // and GLM's configs (mscale == mscale_all_dim) it is exactly 1.
                let attention_factor = num("attention_factor").unwrap_or(
                    match (num("mscale"), num("mscale_all_dim")) {
                        (Some(a), Some(b)) if a != 0.0 && b != 0.0 => {
                            mscale(Some(a)) / mscale(Some(b))
                        }
                        _ => mscale(Some(1.0)),
                    },
                );
                if (attention_factor - 1.0).abs() > 1e-6 {
                    return Err(LoadError::Unsupported {
                        path: path.to_path_buf(),
                        what: format!("YaRN attention factor {attention_factor}"),
                        supported: "1 (mscale equal to mscale_all_dim, as DeepSeek-V3 and GLM \
                                    checkpoints set)"
                            .into(),
                    });
                }
                let y = hearth_backend::YarnScaling {
                    factor,
                    original_max_position_embeddings: original,
                    beta_fast: num("beta_fast").filter(|&v| v != 0.0).unwrap_or(32.0),
                    beta_slow: num("beta_slow").filter(|&v| v != 0.0).unwrap_or(1.0),
                    truncate: scaling
                        .get("truncate")
                        .and_then(|v| v.as_bool())
                        .unwrap_or(true),
                };
                Ok(RopeSpec::yarn(theta as f32, head_dim, rotary_dim, neox, y))
            }
            other => Err(LoadError::Unsupported {
                path: path.to_path_buf(),
                what: format!("rope_scaling type `{other}`"),
                supported: "default, llama3, yarn".into(),
            }),
        }
    }
}
