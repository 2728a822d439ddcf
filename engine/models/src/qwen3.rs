//! Qwen3ForCausalLM: the dense decoder with per-head RMS norm on q and k before rotary.

use crate::config::HfConfig;
use crate::dense::DenseFlavor;

pub fn flavor(cfg: &HfConfig) -> DenseFlavor {
    DenseFlavor {
        qkv_bias: cfg.attention_bias,
        qk_norm: true,
    }
}
