//! The engine runtime: sampling, single-sequence generation, and (with the engine-core issue)
//! the core loop thread and `EngineHandle`.

pub mod bench;
mod error;
pub mod generate;
mod gguf_vocab;
pub mod loader;
pub mod sampler;

pub use error::RuntimeError;
pub use generate::{FinishReason, GenStats, Generator};
pub use gguf_vocab::vocab_from_gguf;
pub use loader::{load, LoadRequest, LoadedModel};
pub use sampler::{sample, Rng, SamplingParams};
