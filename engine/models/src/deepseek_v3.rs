//! DeepseekV3ForCausalLM: multi-head latent attention (`mla.rs`) and sigmoid-routed experts
//! with a selection bias, grouped top-k, a scaling factor and shared experts; the first
//! `first_k_dense_replace` layers are dense. Its MTP layers are skipped.

use std::path::Path;

use hearth_backend::{MoeRouting, MoeScoring};

use crate::config::HfConfig;
use crate::decoder::{Arch, AttnArch};
use crate::ffn::MoeArch;
use crate::LoadError;

/// DeepSeek-style experts (also GLM-4.x's): sigmoid scores plus `e_score_correction_bias`,
/// `n_group`/`topk_group` grouped selection, `routed_scaling_factor`, `n_shared_experts`.
pub fn sigmoid_experts(path: &Path, cfg: &HfConfig) -> Result<MoeArch, LoadError> {
    if let Some(f) = cfg.scoring_func.as_deref().filter(|f| *f != "sigmoid") {
        return Err(LoadError::Unsupported {
            path: path.to_path_buf(),
            what: format!("scoring_func `{f}`"),
            supported: "sigmoid".into(),
        });
    }
    let n_experts = cfg.need(path, "n_routed_experts", cfg.num_experts)?;
    let expert_inter = cfg.need(path, "moe_intermediate_size", cfg.moe_intermediate_size)?;
    let n_group = cfg.n_group.unwrap_or(1).max(1);
    if n_experts % n_group != 0 {
        return Err(LoadError::Unsupported {
            path: path.to_path_buf(),
            what: format!("{n_experts} experts in {n_group} groups"),
            supported: "n_routed_experts divisible by n_group".into(),
        });
    }
    Ok(MoeArch {
        routing: MoeRouting {
            n_experts,
            top_k: cfg.need(path, "num_experts_per_tok", cfg.num_experts_per_tok)?,
            scoring: MoeScoring::Sigmoid,
            norm_topk_prob: cfg.norm_topk_prob.unwrap_or(true),
            n_group,
            topk_group: cfg.topk_group.unwrap_or(1).clamp(1, n_group),
            routed_scaling_factor: cfg.routed_scaling_factor.unwrap_or(1.0) as f32,
        },
        expert_inter,
        shared_inter: cfg
            .n_shared_experts
            .filter(|&n| n > 0)
            .map(|n| n * expert_inter),
        score_bias: true,
    })
}

/// Layers `first_k_dense_replace..` are sparse.
pub fn sparse_after_dense(cfg: &HfConfig, default_dense: usize) -> Vec<bool> {
    let k = cfg.first_k_dense_replace.unwrap_or(default_dense);
    (0..cfg.num_hidden_layers).map(|i| i >= k).collect()
}

pub fn arch(path: &Path, cfg: &HfConfig) -> Result<Arch, LoadError> {
    Ok(Arch {
        attention: AttnArch::Mla,
        moe: Some((sigmoid_experts(path, cfg)?, sparse_after_dense(cfg, 3))),
        default_partial_rotary: 1.0,
    })
}
