//! Picking the device and planning its memory. `DeviceBackend` is what the runtime needs of a
//! backend beyond the op set: a label for logs and a KV cache plan. `ModelEngine` hides which
//! backend a loaded model runs on, so the server and tools are not generic over backends.

use hearth_backend::{Backend, CpuBackend};
use hearth_models::{CausalLm, ModelInfo};
use hearth_spec::Device;
use tracing::info;

use crate::bench::BenchResult;
use crate::engine::{EngineConfig, EngineHandle, EngineParts};
use crate::generate::Generator;
use crate::loader::LoadRequest;
use crate::sampler::SamplingParams;
use crate::RuntimeError;

/// Tokens a step may hold by default with chunked prefill (`max_num_batched_tokens`): 8,192, as
/// vLLM's server and SGLang on 80 GB GPUs. On an H100 with this session's prefill kernels it
/// beat 4,096 (one command each): GLM-4.7-Flash at 32 concurrent 8k prompts 716 against 696
/// output tok/s (16,384: 739, with longer decode stalls behind each prefill step), Qwen3-8B at
/// 64 concurrent 1k prompts 4,342 against 4,274.
const DEFAULT_CHUNK_TOKENS: usize = 8192;

/// A backend the runtime can plan for.
pub trait DeviceBackend: Backend + Sized + 'static {
    /// "cpu (16 threads)", "cuda (NVIDIA H100 80GB HBM3)".
    fn label(&self) -> String;
    /// How many KV blocks to allocate, logged with the reasons.
    fn plan_kv_blocks(
        &self,
        req: &LoadRequest,
        model: &dyn CausalLm<Self>,
        limits: StepLimits,
    ) -> Result<usize, RuntimeError>;
}

/// KV cache memory on the CPU backend when `HEARTH_CPU_KV_GIB` does not say (vLLM's CPU backend
/// has the same knob as VLLM_CPU_KVCACHE_SPACE).
const DEFAULT_CPU_KV_GIB: f64 = 1.0;

impl DeviceBackend for CpuBackend {
    fn label(&self) -> String {
        format!("cpu ({} threads)", self.threads())
    }

    fn plan_kv_blocks(
        &self,
        req: &LoadRequest,
        model: &dyn CausalLm<Self>,
        _limits: StepLimits,
    ) -> Result<usize, RuntimeError> {
        let gib = std::env::var("HEARTH_CPU_KV_GIB")
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| *v > 0.0)
            .unwrap_or(DEFAULT_CPU_KV_GIB);
        let per_token = model.kv_spec(1, 1).bytes_per_token(4);
        if req.kv_dtype != hearth_backend::KvDtype::Bf16 {
            tracing::warn!(
                kv_cache_dtype = req.kv_dtype.name(),
                "the CPU backend keeps its KV cache in f32; kv_cache_dtype applies on CUDA"
            );
        }
        let blocks =
            ((gib * (1u64 << 30) as f64) as usize / (per_token * req.block_size.max(1))).max(1);
        info!(
            kv_gib = gib,
            bytes_per_token = per_token,
            "phase: plan memory (CPU KV cache, f32)"
        );
        Ok(blocks)
    }
}

#[cfg(feature = "cuda")]
impl DeviceBackend for hearth_backend::CudaBackend {
    fn label(&self) -> String {
        let name = self.device_info().map(|i| i.name).unwrap_or_default();
        format!("cuda ({name})")
    }

    fn plan_kv_blocks(
        &self,
        req: &LoadRequest,
        model: &dyn CausalLm<Self>,
        limits: StepLimits,
    ) -> Result<usize, RuntimeError> {
        crate::memory_plan::plan_cuda(self, req, model, limits)
    }
}

/// The backend chosen for a load request.
pub enum Picked {
    Cpu(CpuBackend),
    #[cfg(feature = "cuda")]
    Cuda(Box<hearth_backend::CudaBackend>),
}

/// `device: auto` takes the GPU when this build has the CUDA backend and one is usable, else the
/// CPU; `cuda` insists on the GPU; `cpu` never touches it.
pub fn pick(req: &LoadRequest) -> Result<Picked, RuntimeError> {
    let cpu = || -> Result<Picked, RuntimeError> {
        Ok(Picked::Cpu(CpuBackend::new(
            req.threads.unwrap_or(0) as usize
        )?))
    };
    match req.device {
        Device::Cpu => {
            info!("backend: cpu (engine.device cpu)");
            cpu()
        }
        Device::Auto | Device::Cuda => pick_gpu(req, cpu),
    }
}

#[cfg(feature = "cuda")]
fn pick_gpu(
    req: &LoadRequest,
    cpu: impl Fn() -> Result<Picked, RuntimeError>,
) -> Result<Picked, RuntimeError> {
    use hearth_backend::CudaBackend;
    match CudaBackend::probe() {
        Ok(n) => {
            let b = CudaBackend::new(0)?;
            let d = b.device_info()?;
            info!(gpus = n, device = %d.name, total_gib = d.total_bytes as f64 / GIB, "backend: cuda");
            Ok(Picked::Cuda(Box::new(b)))
        }
        Err(why) if req.device == Device::Auto => {
            info!(reason = %why, "backend: cpu (engine.device auto and no usable GPU)");
            cpu()
        }
        Err(why) => Err(RuntimeError::Unsupported(format!(
            "engine.device cuda: {why} (use device: cpu or auto to run without a GPU)"
        ))),
    }
}

#[cfg(not(feature = "cuda"))]
fn pick_gpu(
    req: &LoadRequest,
    cpu: impl Fn() -> Result<Picked, RuntimeError>,
) -> Result<Picked, RuntimeError> {
    if req.device == Device::Cuda {
        return Err(RuntimeError::Unsupported(
            "engine.device cuda: this build has no CUDA backend (build with --features cuda; \
             supported here: cpu, auto)"
                .into(),
        ));
    }
    info!("backend: cpu (engine.device auto; this build has no CUDA backend)");
    cpu()
}

/// The largest step the engine will run: what activation memory must cover.
#[derive(Debug, Clone, Copy)]
pub struct StepLimits {
    pub max_model_len: usize,
    pub max_num_batched_tokens: usize,
    pub max_num_seqs: usize,
}

#[cfg(feature = "cuda")]
pub(crate) const GIB: f64 = (1u64 << 30) as f64;

/// A loaded model on whichever backend was picked.
pub trait ModelEngine: Send {
    fn backend_label(&self) -> String;
    fn info(&self) -> &ModelInfo;
    /// The engine's scheduling and memory plan, logged with its reasons.
    fn plan(&self, req: &LoadRequest, max_model_len: usize) -> Result<EngineConfig, RuntimeError>;
    /// Starts the engine thread (allocating the KV cache).
    fn start(
        self: Box<Self>,
        cfg: EngineConfig,
        max_model_len: usize,
        eos_ids: Vec<u32>,
    ) -> Result<EngineHandle, RuntimeError>;
    /// Logits of every prompt position from one prefill pass, `[prompt.len(), vocab]`.
    fn prompt_logits(&self, prompt: &[u32]) -> Result<Vec<f32>, RuntimeError>;
    /// `n` greedy tokens after `prompt`.
    fn greedy(&self, prompt: &[u32], n: usize) -> Result<Vec<u32>, RuntimeError>;
    /// llama-bench style ppN / tgN runs on an empty cache.
    fn bench(&self, o: &crate::bench::BenchOptions) -> Result<Vec<BenchResult>, RuntimeError>;
}

pub(crate) struct OnBackend<B: Backend> {
    pub backend: B,
    pub model: Box<dyn CausalLm<B>>,
}

impl<B: DeviceBackend> ModelEngine for OnBackend<B>
where
    B::KvCache: 'static,
{
    fn backend_label(&self) -> String {
        self.backend.label()
    }

    fn info(&self) -> &ModelInfo {
        self.model.info()
    }

    fn plan(&self, req: &LoadRequest, max_model_len: usize) -> Result<EngineConfig, RuntimeError> {
        let block_size = req.block_size.max(1);
        let max_num_batched_tokens = req
            .max_num_batched_tokens
            .unwrap_or(if req.enable_chunked_prefill {
                DEFAULT_CHUNK_TOKENS
            } else {
                max_model_len
            })
            .max(req.max_num_seqs.min(max_model_len));
        let limits = StepLimits {
            max_model_len,
            max_num_batched_tokens,
            max_num_seqs: req.max_num_seqs,
        };
        let budget_blocks = self
            .backend
            .plan_kv_blocks(req, self.model.as_ref(), limits)?;
        // No point in more blocks than every sequence at full length needs.
        let useful_blocks = req.max_num_seqs * max_model_len.div_ceil(block_size);
        let num_blocks = budget_blocks
            .min(useful_blocks)
            .max(max_model_len.div_ceil(block_size));
        info!(
            num_blocks,
            kv_tokens = num_blocks * block_size,
            "KV cache capacity"
        );
        Ok(EngineConfig {
            max_num_seqs: req.max_num_seqs,
            max_num_batched_tokens,
            block_size,
            num_blocks,
            enable_prefix_caching: req.enable_prefix_caching,
            enable_chunked_prefill: req.enable_chunked_prefill,
            kv_dtype: req.kv_dtype,
            run_ahead: crate::engine::run_ahead_from_env(),
        })
    }

    fn start(
        self: Box<Self>,
        cfg: EngineConfig,
        max_model_len: usize,
        eos_ids: Vec<u32>,
    ) -> Result<EngineHandle, RuntimeError> {
        let parts = EngineParts {
            backend: self.backend,
            model: self.model,
            max_model_len,
            eos_ids,
        };
        EngineHandle::start(parts, cfg)
    }

    fn prompt_logits(&self, prompt: &[u32]) -> Result<Vec<f32>, RuntimeError> {
        let mut gen = Generator::new(&self.backend, self.model.as_ref(), prompt.len() + 1)?;
        Ok(gen.prefill_logits(prompt))
    }

    fn greedy(&self, prompt: &[u32], n: usize) -> Result<Vec<u32>, RuntimeError> {
        let mut gen = Generator::new(&self.backend, self.model.as_ref(), prompt.len() + n + 1)?;
        let mut out = Vec::with_capacity(n);
        gen.generate(prompt, n, &SamplingParams::default(), &[], |t| {
            out.push(t);
            true
        })?;
        Ok(out)
    }

    fn bench(&self, o: &crate::bench::BenchOptions) -> Result<Vec<BenchResult>, RuntimeError> {
        crate::bench::run(&self.backend, self.model.as_ref(), o)
    }
}
