//! Qwen2ForCausalLM: the dense decoder with biases on the q/k/v projections (always present).

use crate::config::HfConfig;
use crate::dense::DenseFlavor;

pub fn flavor(_cfg: &HfConfig) -> DenseFlavor {
    DenseFlavor {
        qkv_bias: true,
        qk_norm: false,
    }
}
