//! Where a model's weights come from: the `WeightSource` trait the architectures pull tensors
//! through (by their transformers names), and opening a checkpoint path as one.

use std::path::{Path, PathBuf};

use hearth_backend::HostWeight;

use crate::config::HfConfig;
use crate::gguf_weights::GgufWeights;
use crate::safetensors_weights::SafetensorsWeights;
use crate::LoadError;

/// A checkpoint: its config and tensors addressed by transformers names
/// (`model.layers.0.self_attn.q_proj.weight`).
pub trait WeightSource {
    fn path(&self) -> &Path;
    fn config(&self) -> &HfConfig;
    /// Format of the checkpoint, for logs ("gguf Q4_1", "safetensors bf16").
    fn describe(&self) -> String;
    /// The tensor, or `None` if the checkpoint does not have it.
    fn tensor(&self, name: &str) -> Result<Option<HostWeight>, LoadError>;

    /// The parsed GGUF file, for checkpoints that are one (its metadata also holds the
    /// tokenizer), so nothing needs to parse it a second time.
    fn gguf(&self) -> Option<&crate::gguf::GgufFile> {
        None
    }

    /// A tensor the architecture cannot do without, checked against the expected shape.
    fn require(&self, name: &str, shape: &[usize]) -> Result<HostWeight, LoadError> {
        let w = self.tensor(name)?.ok_or_else(|| LoadError::MissingTensor {
            path: self.path().to_path_buf(),
            tensor: name.to_owned(),
        })?;
        if w.shape != shape {
            return Err(LoadError::Shape {
                path: self.path().to_path_buf(),
                tensor: name.to_owned(),
                actual: w.shape,
                expected: shape.to_vec(),
            });
        }
        Ok(w)
    }
}

/// Opens a `.gguf` file or a transformers directory (config.json + safetensors).
pub fn open(path: &Path) -> Result<Box<dyn WeightSource>, LoadError> {
    if path.is_dir() {
        // Refuse what we cannot run before touching (possibly hundreds of GB of) weights.
        let config = HfConfig::from_file(&path.join("config.json"))?;
        crate::model::check_supported(path, &config)?;
        if path.join(crate::random_weights::MARKER).exists() {
            return Ok(Box::new(crate::random_weights::RandomWeights::open(path)?));
        }
        return Ok(Box::new(SafetensorsWeights::open(path)?));
    }
    if path.extension().is_some_and(|e| e == "gguf") {
        return Ok(Box::new(GgufWeights::open(path)?));
    }
    if !path.exists() {
        return Err(LoadError::io(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such file or directory"),
        ));
    }
    Err(LoadError::Unsupported {
        path: PathBuf::from(path),
        what: "this kind of model path".into(),
        supported: "a .gguf file, a directory with config.json and *.safetensors".into(),
    })
}
