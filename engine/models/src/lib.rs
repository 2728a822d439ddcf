//! Checkpoint loaders (GGUF, safetensors directories) and the model architectures, written once
//! against hearth-backend's op set.

pub mod batch;
pub mod config;
mod dense;
pub mod error;
pub mod gguf;
mod gguf_weights;
mod llama;
pub mod model;
mod progress;
mod qwen2;
mod qwen3;
mod safetensors_weights;
pub mod source;

pub use batch::ForwardBatch;
pub use error::LoadError;
pub use gguf_weights::GgufWeights;
pub use model::{load_model, CausalLm, ModelInfo, SUPPORTED_ARCHITECTURES};
pub use source::{open, WeightSource};
