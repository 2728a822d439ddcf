//! Qwen3MoeForCausalLM: Qwen3's attention (q/k norm) with softmax top-k routed experts and no
//! shared expert; every `decoder_sparse_step`-th layer is sparse, except `mlp_only_layers`.

use std::path::Path;

use hearth_backend::{MoeRouting, MoeScoring};

use crate::config::HfConfig;
use crate::decoder::{Arch, AttnArch};
use crate::ffn::MoeArch;
use crate::LoadError;

pub fn arch(path: &Path, cfg: &HfConfig) -> Result<Arch, LoadError> {
    let n_experts = cfg.need(path, "num_experts", cfg.num_experts)?;
    let step = cfg.decoder_sparse_step.unwrap_or(1).max(1);
    let dense_only = cfg.mlp_only_layers.clone().unwrap_or_default();
    let sparse = (0..cfg.num_hidden_layers)
        .map(|i| !dense_only.contains(&i) && n_experts > 0 && (i + 1) % step == 0)
        .collect();
    let moe = MoeArch {
        routing: MoeRouting {
            n_experts,
            top_k: cfg.need(path, "num_experts_per_tok", cfg.num_experts_per_tok)?,
            scoring: MoeScoring::Softmax,
            norm_topk_prob: cfg.norm_topk_prob.unwrap_or(false),
            n_group: 1,
            topk_group: 1,
            routed_scaling_factor: 1.0,
        },
        expert_inter: cfg.need(path, "moe_intermediate_size", cfg.moe_intermediate_size)?,
        shared_inter: None,
        score_bias: false,
    };
    Ok(Arch {
        attention: AttnArch::Gqa {
            qkv_bias: cfg.attention_bias,
            qk_norm: true,
        },
        moe: Some((moe, sparse)),
        default_partial_rotary: 1.0,
    })
}
