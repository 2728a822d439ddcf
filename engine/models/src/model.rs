//! The model interface the runtime drives, and picking an architecture for a checkpoint.

use std::path::Path;

use hearth_backend::{Backend, KvCacheSpec};

use crate::batch::ForwardBatch;
use crate::config::HfConfig;
use crate::decoder::Decoder;
use crate::source::WeightSource;
use crate::LoadError;

/// What the runtime and the startup log need to know about a loaded model.
#[derive(Debug, Clone)]
pub struct ModelInfo {
    pub architecture: String,
    pub vocab_size: usize,
    pub num_layers: usize,
    pub max_position_embeddings: Option<usize>,
    /// f32 activation values one token of a forward pass holds at once, summed over all the
    /// buffers the model keeps (the GPU memory plan sizes the activation arena from it).
    pub activation_floats_per_token: usize,
    /// The widest matmul input, in values per token (a GPU backend keeps a bf16 copy of it).
    pub matmul_input_floats_per_token: usize,
    /// The widest fused matmul output per token before it is split (Q+K+V, or gate+up), and
    /// at least the hidden size (a GPU backend may keep a matmul's sum there before adding it).
    pub fused_floats_per_token: usize,
    /// (op, kernel path) pairs for the startup log.
    pub kernel_paths: Vec<(String, String)>,
}

/// A causal language model on backend `B`.
pub trait CausalLm<B: Backend>: Send + Sync {
    fn info(&self) -> &ModelInfo;
    fn kv_spec(&self, num_blocks: usize, block_size: usize) -> KvCacheSpec;
    /// Runs one step and returns logits, `[batch.logits_rows.len(), vocab_size]` row-major.
    fn forward(&self, backend: &B, batch: &ForwardBatch, kv: &mut B::KvCache) -> Vec<f32>;
    /// Runs one step and returns the greedy token of each logits row, computed where the
    /// logits are (on the GPU, only the ids cross to the host).
    fn forward_greedy(&self, backend: &B, batch: &ForwardBatch, kv: &mut B::KvCache) -> Vec<u32> {
        let ids = self.forward_greedy_deferred(backend, batch, kv, false);
        backend.read_ids(ids)
    }
    /// `forward_greedy` that queues the step without waiting for its ids (`Backend::read_ids`
    /// brings them to the host). With `fed`, row i's token is row i of the previous deferred
    /// step's ids, not `batch.tokens` (`Backend::begin_fed_step`): a step can be queued behind
    /// the one that picks its tokens, so the device never waits for the host in between.
    fn forward_greedy_deferred(
        &self,
        backend: &B,
        batch: &ForwardBatch,
        kv: &mut B::KvCache,
        fed: bool,
    ) -> B::Ids;
    /// Runs one step and samples each logits row under `rows` (`Backend::sample_rows`).
    fn forward_sample(
        &self,
        backend: &B,
        batch: &ForwardBatch,
        kv: &mut B::KvCache,
        rows: &[hearth_backend::SampleRow],
    ) -> Vec<u32> {
        let ids = self.forward_sample_deferred(backend, batch, kv, rows, false);
        backend.read_ids(ids)
    }
    /// `forward_sample` that queues the step without waiting for its ids, as
    /// `forward_greedy_deferred` (`fed`: the step's tokens are the previous deferred step's).
    fn forward_sample_deferred(
        &self,
        backend: &B,
        batch: &ForwardBatch,
        kv: &mut B::KvCache,
        rows: &[hearth_backend::SampleRow],
        fed: bool,
    ) -> B::Ids;
}

/// Architectures (config.json `architectures[0]`) this build can run.
pub const SUPPORTED_ARCHITECTURES: &[&str] = &[
    "LlamaForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM",
    "Glm4MoeForCausalLM",
    "Glm4MoeLiteForCausalLM",
    "DeepseekV3ForCausalLM",
];

/// How to load a checkpoint beyond what it says itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadOptions {
    /// Quantize the linear layers' matrices (attention and MLP projections; not the embedding
    /// or the LM head) to fp8 e4m3 with a scale a row as they load (vLLM's online
    /// `--quantization fp8`). Dense architectures from safetensors only.
    pub fp8: bool,
}

/// Builds the model for `src`'s architecture, or says which architectures are supported.
pub fn load_model<B: Backend + 'static>(
    backend: &B,
    src: &dyn WeightSource,
) -> Result<Box<dyn CausalLm<B>>, LoadError> {
    load_model_with(backend, src, LoadOptions::default())
}

/// `load_model` with `opts`.
pub fn load_model_with<B: Backend + 'static>(
    backend: &B,
    src: &dyn WeightSource,
    opts: LoadOptions,
) -> Result<Box<dyn CausalLm<B>>, LoadError> {
    let cfg = src.config();
    check_supported(src.path(), cfg)?;
    let path = src.path();
    let arch = match cfg.architecture() {
        "LlamaForCausalLM" => crate::llama::arch(cfg)?,
        "Qwen2ForCausalLM" => crate::qwen2::arch(cfg)?,
        "Qwen3ForCausalLM" => crate::qwen3::arch(cfg)?,
        "Qwen3MoeForCausalLM" => crate::qwen3_moe::arch(path, cfg)?,
        "Glm4MoeForCausalLM" => crate::glm4_moe::arch(path, cfg)?,
        "Glm4MoeLiteForCausalLM" => crate::glm4_moe_lite::arch(path, cfg)?,
        "DeepseekV3ForCausalLM" => crate::deepseek_v3::arch(path, cfg)?,
        other => return Err(unsupported(path, other)),
    };
    if opts.fp8 {
        let dense = arch.moe.is_none() && !matches!(arch.attention, crate::decoder::AttnArch::Mla);
        if !dense {
            return Err(LoadError::Unsupported {
                path: path.to_path_buf(),
                what: format!(
                    "engine.quantization fp8 for {} from {}",
                    cfg.architecture(),
                    src.describe()
                ),
                supported: "fp8 quantizes the dense architectures (LlamaForCausalLM, \
                            Qwen2ForCausalLM, Qwen3ForCausalLM), from safetensors or GGUF (a \
                            GGUF's quantized matrices are dequantized first)"
                    .into(),
            });
        }
    }
    Ok(Box::new(Decoder::load(backend, src, arch, opts.fp8)?))
}

/// Fails at once, naming the architecture or weight format and listing what is supported.
pub fn check_supported(path: &Path, cfg: &HfConfig) -> Result<(), LoadError> {
    if !is_supported(cfg.architecture()) {
        return Err(unsupported(path, cfg.architecture()));
    }
    if let Some(q) = &cfg.quantization_config {
        let method = q
            .get("quant_method")
            .and_then(|m| m.as_str())
            .unwrap_or("unknown");
        return Err(LoadError::Unsupported {
            path: path.to_path_buf(),
            what: format!("weight quantization `{method}`"),
            supported: "unquantized f32/f16/bf16 safetensors, GGUF F32/F16/BF16/Q4_0/Q4_1/Q8_0/\
                        Q4_K/Q5_K/Q6_K"
                .into(),
        });
    }
    Ok(())
}

fn unsupported(path: &Path, arch: &str) -> LoadError {
    LoadError::UnsupportedArchitecture {
        path: path.to_path_buf(),
        architecture: arch.to_owned(),
        supported: SUPPORTED_ARCHITECTURES.join(", "),
    }
}

/// Used by tests and tools that want to know without loading.
pub fn is_supported(arch: &str) -> bool {
    SUPPORTED_ARCHITECTURES.contains(&arch)
}

#[cfg(test)]
mod tests {
    #[test]
    fn supported_list_names_the_families() {
        assert!(super::is_supported("Qwen3ForCausalLM"));
        assert!(super::is_supported("Glm4MoeForCausalLM"));
        assert!(!super::is_supported("MixtralForCausalLM"));
    }
}
