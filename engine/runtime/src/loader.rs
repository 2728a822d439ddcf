//! From a spec (or a bare model source) to a runnable model: resolve the source, pick the
//! backend, load weights, tokenizer and chat template, and log each phase with its duration and
//! the kernel path each op uses. Formats and devices this build cannot run fail here, at once.

use std::path::{Path, PathBuf};
use std::time::Instant;

use hearth_backend::{Backend, CpuBackend};
use hearth_models::{CausalLm, GgufWeights};
use hearth_spec::{Device, ModelSource, Quantization, ResolvedSpec};
use hearth_text::{ChatTemplate, Tokenizer};
use tracing::info;

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
    pub cache_dir: PathBuf,
}

impl LoadRequest {
    pub fn from_spec(spec: &ResolvedSpec) -> Self {
        LoadRequest {
            model: spec.model.clone(),
            tokenizer: spec.tokenizer.clone(),
            chat_template: spec.chat_template.clone(),
            device: spec.engine.device,
            quantization: spec.engine.quantization,
            threads: spec.engine.threads,
            max_model_len: spec.engine.max_model_len,
            cache_dir: spec.cache_dir.clone(),
        }
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
            cache_dir: hearth_spec::fetch::default_cache_dir(),
        }
    }
}

/// A model ready to run, with everything needed to talk to it in text.
pub struct LoadedModel<B: Backend> {
    pub backend: B,
    pub model: Box<dyn CausalLm<B>>,
    pub tokenizer: Tokenizer,
    pub chat_template: Option<ChatTemplate>,
    pub max_model_len: usize,
    pub path: PathBuf,
}

/// Default context when neither the spec nor the checkpoint says.
const FALLBACK_MAX_MODEL_LEN: usize = 4096;

/// Loads onto the CPU backend, the one backend of this build.
pub fn load(req: &LoadRequest) -> Result<LoadedModel<CpuBackend>, RuntimeError> {
    let t_start = Instant::now();
    if req.device == Device::Cuda {
        return Err(RuntimeError::Unsupported(
            "engine.device cuda: this build has no CUDA backend yet (supported: cpu, auto)".into(),
        ));
    }
    if let Some(q) = req.quantization {
        return Err(RuntimeError::Unsupported(format!(
            "engine.quantization {}: this build runs unquantized safetensors and GGUF blocks only \
             (supported: none, gguf)",
            q.as_str()
        )));
    }
    let t = Instant::now();
    let path = hearth_spec::fetch::resolve_local(&req.model, &req.cache_dir)?;
    info!(source = %req.model, path = %path.display(), secs = t.elapsed().as_secs_f32(), "resolved model source");

    let backend = CpuBackend::new(req.threads.unwrap_or(0) as usize)?;
    info!(
        backend = backend.name(),
        threads = backend.threads(),
        "backend chosen (device auto -> cpu: no GPU backend in this build)"
    );

    let t = Instant::now();
    let src = hearth_models::open(&path)?;
    info!(format = %src.describe(), "opened checkpoint");
    let model = hearth_models::load_model(&backend, src.as_ref())?;
    let info = model.info();
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
    let tokenizer = load_tokenizer(req, &path)?;
    let chat_template = load_template(req, &tokenizer)?;
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
    })
}

fn load_tokenizer(req: &LoadRequest, model_path: &Path) -> Result<Tokenizer, RuntimeError> {
    let path = match &req.tokenizer {
        Some(src) => hearth_spec::fetch::resolve_local(src, &req.cache_dir)?,
        None => model_path.to_path_buf(),
    };
    if path.is_dir() {
        return Ok(Tokenizer::from_file(path.join("tokenizer.json"))?);
    }
    if path.extension().is_some_and(|e| e == "gguf") {
        let gguf = GgufWeights::open(&path)?;
        return Ok(Tokenizer::from_gguf(&vocab_from_gguf(gguf.file()))?);
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
