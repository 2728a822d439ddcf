//! LlamaForCausalLM (also SmolLM2): the plain dense decoder; `attention_bias` adds qkv biases.

use crate::config::HfConfig;
use crate::decoder::Arch;
use crate::LoadError;

pub fn arch(cfg: &HfConfig) -> Result<Arch, LoadError> {
    Ok(Arch::dense(cfg.attention_bias, false))
}
