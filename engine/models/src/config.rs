//! The decoder configuration every dense architecture maps onto, and reading config.json.
//! GGUF metadata is first translated into the same config.json shape (`gguf_weights.rs`) so there
//! is one path from a checkpoint's config to a model.

use std::path::Path;

use hearth_backend::{Llama3RopeScaling, RopeSpec};
use serde::Deserialize;

use crate::LoadError;

/// The config.json fields shared by Llama, Qwen2 and Qwen3 (names as in transformers).
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

    /// The rotary embedding this config asks for; unknown scaling types are an error.
    pub fn rope(&self, path: &Path) -> Result<RopeSpec, LoadError> {
        let head_dim = self.head_dim();
        let rotary_dim =
            (head_dim as f64 * self.partial_rotary_factor.unwrap_or(1.0)).round() as usize;
        let params = self.rope_parameters.as_ref().filter(|v| v.is_object());
        let theta = params
            .and_then(|p| p.get("rope_theta"))
            .and_then(|v| v.as_f64())
            .unwrap_or(self.rope_theta);
        let rope = |llama3| RopeSpec::new(theta as f32, head_dim, rotary_dim, true, llama3);
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
            other => Err(LoadError::Unsupported {
                path: path.to_path_buf(),
                what: format!("rope_scaling type `{other}`"),
                supported: "default, llama3".into(),
            }),
        }
    }
}
