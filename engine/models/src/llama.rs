//! LlamaForCausalLM (also SmolLM2): the plain dense decoder; `attention_bias` adds qkv biases.

use crate::config::HfConfig;
use crate::dense::DenseFlavor;

pub fn flavor(cfg: &HfConfig) -> DenseFlavor {
    DenseFlavor {
        qkv_bias: cfg.attention_bias,
        qk_norm: false,
    }
}
