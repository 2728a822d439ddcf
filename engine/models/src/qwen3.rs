//! Qwen3ForCausalLM: the dense decoder with per-head RMS norm on q and k before rotary.

use crate::config::HfConfig;
use crate::decoder::Arch;
use crate::LoadError;

pub fn arch(cfg: &HfConfig) -> Result<Arch, LoadError> {
    Ok(Arch::dense(cfg.attention_bias, true))
}
