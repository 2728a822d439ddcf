//! Glm4MoeForCausalLM (GLM-4.5/4.6/4.7): grouped-query attention with partial rotary (half of
//! each head by default), qkv biases and optional q/k norm, and DeepSeek-style sigmoid-routed
//! experts with a shared expert; the first `first_k_dense_replace` layers are dense.

use std::path::Path;

use crate::config::HfConfig;
use crate::decoder::{Arch, AttnArch};
use crate::deepseek_v3::{sigmoid_experts, sparse_after_dense};
use crate::LoadError;

pub fn arch(path: &Path, cfg: &HfConfig) -> Result<Arch, LoadError> {
    Ok(Arch {
        attention: AttnArch::Gqa {
            qkv_bias: cfg.attention_bias,
            qk_norm: cfg.use_qk_norm.unwrap_or(false),
        },
        moe: Some((sigmoid_experts(path, cfg)?, sparse_after_dense(cfg, 1))),
        default_partial_rotary: 0.5,
    })
}
