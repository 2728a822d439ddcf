//! Sampling flags shared by `hearth-engine generate` and `bench`.

use anyhow::bail;
use clap::Args;
use hearth_runtime::SamplingParams;

#[derive(Debug, Args)]
pub struct SamplingArgs {
    /// 0 = greedy.
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// 0 = off.
    #[arg(long, default_value_t = 0)]
    top_k: usize,
}

impl SamplingArgs {
    /// The flags as request parameters, or an error naming the flag out of range.
    pub fn params(&self) -> anyhow::Result<SamplingParams> {
        if !(0.0..=2.0).contains(&self.temperature) {
            bail!(
                "--temperature {} is out of range (allowed: 0 to 2)",
                self.temperature
            );
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            bail!(
                "--top-p {} is out of range (allowed: greater than 0, at most 1)",
                self.top_p
            );
        }
        Ok(SamplingParams {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            ..Default::default()
        })
    }
}
