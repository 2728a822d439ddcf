//! Checkpoint loaders (GGUF, safetensors directories) and the model architectures, written once
//! against hearth-backend's op set.

mod attention;
pub mod batch;
pub mod config;
mod decoder;
mod deepseek_v3;
pub mod error;
mod ffn;
pub mod gguf;
mod gguf_weights;
mod glm4_moe;
mod glm4_moe_lite;
mod host;
mod layers;
mod llama;
mod mla;
pub mod model;
mod progress;
mod qwen2;
mod qwen3;
mod qwen3_moe;
pub mod random_weights;
mod safetensors_weights;
pub mod source;

pub use batch::ForwardBatch;
pub use error::LoadError;
pub use gguf_weights::GgufWeights;
pub use model::{
    load_model, load_model_with, CausalLm, LoadOptions, ModelInfo, SUPPORTED_ARCHITECTURES,
};
pub use source::{open, WeightSource};
