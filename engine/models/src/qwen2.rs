//! Qwen2ForCausalLM: the dense decoder with biases on the q/k/v projections (always present).

use crate::config::HfConfig;
use crate::decoder::Arch;
use crate::LoadError;

pub fn arch(_cfg: &HfConfig) -> Result<Arch, LoadError> {
    Ok(Arch::dense(true, false))
}
