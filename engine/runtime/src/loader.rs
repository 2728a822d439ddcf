//! From a spec (or a bare model source) to a runnable model: resolve the source, pick the
//! backend, load weights, tokenizer and chat template, and log each phase with its duration and
//! the kernel path each op uses. Formats and devices this build cannot run fail here, at once.

use std::path::PathBuf;
use std::time::Instant;

use hearth_backend::{Backend, KvDtype};
use hearth_models::gguf::GgufFile;
use hearth_models::{CausalLm, WeightSource};
use hearth_spec::{Device, ModelSource, Quantization, ResolvedSpec};
use hearth_text::{ChatTemplate, Tokenizer};
use tracing::{info, warn};

use crate::device::{pick, DeviceBackend, ModelEngine, OnBackend, Picked};
use crate::engine::{EngineConfig, EngineHandle};
use crate::gguf_vocab::vocab_from_gguf;
use crate::RuntimeError;

/// What to load; built from a spec or from command-line flags.
#[derive(Debug, Clone)]
pub struct LoadRequest {
    pub model: ModelSource,
    pub tokenizer: Option<ModelSource>,
    pub chat_template: Option<PathBuf>,
    pub device: Device,
    pub quantization: Option<Quantization>,
    pub threads: Option<u32>,
    pub max_model_len: Option<u32>,
    /// Fraction of GPU memory the engine may use (weights, activations, KV cache).
    pub gpu_memory_utilization: f64,
    /// KV cache element type on a GPU (the spec's kv_cache_dtype; auto = bf16).
    pub kv_dtype: KvDtype,
    pub cache_dir: PathBuf,
    /// Scheduling settings (the spec's vLLM flags).
    pub max_num_seqs: usize,
    pub max_num_batched_tokens: Option<usize>,
    pub block_size: usize,
    pub enable_prefix_caching: bool,
    pub enable_chunked_prefill: bool,
}

impl LoadRequest {
    /// The spec's load settings, or every setting it asks for that this build cannot honour
    /// (capabilities.rs).
    pub fn from_spec(spec: &ResolvedSpec) -> Result<Self, RuntimeError> {
        crate::capabilities::check(&spec.engine)?;
        for line in crate::capabilities::adjustments(&spec.engine) {
            warn!("{line}");
        }
        Ok(LoadRequest {
            model: spec.model.clone(),
            tokenizer: spec.tokenizer.clone(),
            chat_template: spec.chat_template.clone(),
            device: spec.engine.device,
            quantization: spec.engine.quantization,
            threads: spec.engine.threads,
            max_model_len: spec.engine.max_model_len,
            gpu_memory_utilization: spec.engine.gpu_memory_utilization,
            kv_dtype: if spec.engine.kv_cache_dtype.is_fp8() {
                KvDtype::Fp8E4m3
            } else {
                KvDtype::Bf16
            },
            cache_dir: spec.cache_dir.clone(),
            max_num_seqs: spec.engine.max_num_seqs as usize,
            max_num_batched_tokens: spec.engine.max_num_batched_tokens.map(|n| n as usize),
            block_size: spec.engine.block_size as usize,
            enable_prefix_caching: spec.engine.enable_prefix_caching,
            enable_chunked_prefill: spec.engine.enable_chunked_prefill,
        })
    }

    /// A bare model source with defaults (CPU when no GPU backend is built).
    pub fn from_source(model: ModelSource) -> Self {
        LoadRequest {
            model,
            tokenizer: None,
            chat_template: None,
            device: Device::Auto,
            quantization: None,
            threads: None,
            max_model_len: None,
            gpu_memory_utilization: 0.9,
            kv_dtype: KvDtype::Bf16,
            cache_dir: hearth_spec::fetch::default_cache_dir(),
            max_num_seqs: 256,
            max_num_batched_tokens: None,
            block_size: 16,
            enable_prefix_caching: true,
            enable_chunked_prefill: true,
        }
    }
}

/// A model ready to run on a known backend, with everything needed to talk to it in text.
pub struct LoadedModel<B: Backend> {
    pub backend: B,
    pub model: Box<dyn CausalLm<B>>,
    pub tokenizer: Tokenizer,
    pub chat_template: Option<ChatTemplate>,
    pub max_model_len: usize,
    pub path: PathBuf,
    /// (phase, seconds) of loading, for the startup log and metrics.
    pub phases: Vec<(String, f64)>,
}

/// A model ready to run on whichever backend `load` picked.
pub struct Loaded {
    pub engine: Box<dyn ModelEngine>,
    pub tokenizer: Tokenizer,
    pub chat_template: Option<ChatTemplate>,
    pub max_model_len: usize,
    pub path: PathBuf,
    pub phases: Vec<(String, f64)>,
}

impl Loaded {
    /// The engine's scheduling and memory plan for this model.
    pub fn plan(&self, req: &LoadRequest) -> Result<EngineConfig, RuntimeError> {
        self.engine.plan(req, self.max_model_len)
    }
}

impl<B: DeviceBackend> From<LoadedModel<B>> for Loaded
where
    B::KvCache: 'static,
{
    fn from(m: LoadedModel<B>) -> Self {
        Loaded {
            engine: Box::new(OnBackend {
                backend: m.backend,
                model: m.model,
            }),
            tokenizer: m.tokenizer,
            chat_template: m.chat_template,
            max_model_len: m.max_model_len,
            path: m.path,
            phases: m.phases,
        }
    }
}

/// Starts the engine thread for a loaded model (the tokenizer stays with the caller).
pub fn start(
    engine: Box<dyn ModelEngine>,
    cfg: EngineConfig,
    max_model_len: usize,
    tokenizer: &Tokenizer,
) -> Result<EngineHandle, RuntimeError> {
    engine.start(cfg, max_model_len, tokenizer.eos_ids().to_vec())
}

/// Default context when neither the spec nor the checkpoint says.
const FALLBACK_MAX_MODEL_LEN: usize = 4096;

/// Resolves the source, picks the backend (`engine.device`), and loads the model onto it.
pub fn load(req: &LoadRequest) -> Result<Loaded, RuntimeError> {
    check_request(req)?;
    Ok(match pick(req)? {
        Picked::Cpu(b) => load_on(req, b)?.into(),
        #[cfg(feature = "cuda")]
        Picked::Cuda(b) => load_on(req, *b)?.into(),
    })
}

fn check_request(req: &LoadRequest) -> Result<(), RuntimeError> {
    match crate::capabilities::quantization(req.quantization) {
        None => Ok(()),
        Some(why) => Err(RuntimeError::Unsupported(why)),
    }
}

/// Loads onto a given backend.
pub fn load_on<B: DeviceBackend>(
    req: &LoadRequest,
    backend: B,
) -> Result<LoadedModel<B>, RuntimeError> {
    check_request(req)?;
    let t_start = Instant::now();
    let mut phases = Vec::new();
    let t = Instant::now();
    let path = hearth_spec::fetch::resolve_local(&req.model, &req.cache_dir)?;
    phases.push(("resolve_source".to_owned(), t.elapsed().as_secs_f64()));
    info!(source = %req.model, path = %path.display(), secs = t.elapsed().as_secs_f32(), "resolved model source");
    info!(backend = %backend.label(), "backend ready");

    let t = Instant::now();
    let src = hearth_models::open(&path)?;
    info!(format = %src.describe(), "opened checkpoint");
    let opts = hearth_models::LoadOptions {
        fp8: req.quantization == Some(Quantization::Fp8),
    };
    let model = hearth_models::load_model_with(&backend, src.as_ref(), opts)?;
    let info = model.info();
    phases.push(("load_weights".to_owned(), t.elapsed().as_secs_f64()));
    info!(
        architecture = %info.architecture,
        layers = info.num_layers,
        secs = t.elapsed().as_secs_f32(),
        "phase: load weights"
    );
    for (op, path) in &info.kernel_paths {
        info!(op = %op, kernel = %path, "kernel path");
    }

    let t = Instant::now();
    let tokenizer = load_tokenizer(req, src.as_ref())?;
    let chat_template = load_template(req, &tokenizer)?;
    phases.push(("load_tokenizer".to_owned(), t.elapsed().as_secs_f64()));
    info!(
        vocab = tokenizer.vocab_size(),
        chat_template = chat_template.is_some(),
        secs = t.elapsed().as_secs_f32(),
        "phase: load tokenizer"
    );

    let model_max = info
        .max_position_embeddings
        .unwrap_or(FALLBACK_MAX_MODEL_LEN);
    let max_model_len = match req.max_model_len {
        Some(n) if n as usize > model_max => {
            return Err(RuntimeError::Unsupported(format!(
                "engine.max_model_len {n} exceeds the model's max_position_embeddings {model_max}"
            )))
        }
        Some(n) => n as usize,
        None => model_max,
    };
    info!(
        max_model_len,
        secs = t_start.elapsed().as_secs_f32(),
        "phase: ready"
    );
    Ok(LoadedModel {
        backend,
        model,
        tokenizer,
        chat_template,
        max_model_len,
        path,
        phases,
    })
}

/// The spec's tokenizer override, else the checkpoint's own (a GGUF's metadata, already parsed,
/// or tokenizer.json beside the weights).
fn load_tokenizer(req: &LoadRequest, src: &dyn WeightSource) -> Result<Tokenizer, RuntimeError> {
    let path = match &req.tokenizer {
        Some(s) => hearth_spec::fetch::resolve_local(s, &req.cache_dir)?,
        None => match src.gguf() {
            Some(gguf) => return Ok(Tokenizer::from_gguf(&vocab_from_gguf(gguf))?),
            None => src.path().to_path_buf(),
        },
    };
    if path.is_dir() {
        return Ok(Tokenizer::from_file(path.join("tokenizer.json"))?);
    }
    if path.extension().is_some_and(|e| e == "gguf") {
        let gguf = GgufFile::open(&path)?;
        return Ok(Tokenizer::from_gguf(&vocab_from_gguf(&gguf))?);
    }
    Ok(Tokenizer::from_file(&path)?)
}

fn load_template(req: &LoadRequest, tok: &Tokenizer) -> Result<Option<ChatTemplate>, RuntimeError> {
    let source = match &req.chat_template {
        Some(p) => Some(std::fs::read_to_string(p).map_err(|e| {
            RuntimeError::Unsupported(format!("chat_template {}: {e}", p.display()))
        })?),
        None => tok.chat_template().map(str::to_owned),
    };
    let Some(source) = source else {
        return Ok(None);
    };
    let bos = tok.bos_token().map(str::to_owned);
    let eos = tok.eos_token().map(str::to_owned);
    Ok(Some(ChatTemplate::new(&source, bos, eos)?))
}
