//! Glm4MoeLiteForCausalLM (GLM-4.7-Flash): DeepSeek-V3's layers (MLA, sigmoid-routed experts
//! with a shared expert); which layers are dense comes from `mlp_layer_types` (default: the
//! first one), or `first_k_dense_replace`.

use std::path::Path;

use crate::config::HfConfig;
use crate::decoder::{Arch, AttnArch};
use crate::deepseek_v3::{sigmoid_experts, sparse_after_dense};
use crate::LoadError;

pub fn arch(path: &Path, cfg: &HfConfig) -> Result<Arch, LoadError> {
    let sparse = match &cfg.mlp_layer_types {
        Some(types) => {
            if types.len() != cfg.num_hidden_layers {
                return Err(LoadError::format(
                    path,
                    format!(
                        "config: mlp_layer_types has {} entries for {} layers",
                        types.len(),
                        cfg.num_hidden_layers
                    ),
                ));
            }
            types.iter().map(|t| t == "sparse").collect()
        }
        None => sparse_after_dense(cfg, 1),
    };
    Ok(Arch {
        attention: AttnArch::Mla,
        moe: Some((sigmoid_experts(path, cfg)?, sparse)),
        default_partial_rotary: 1.0,
    })
}
