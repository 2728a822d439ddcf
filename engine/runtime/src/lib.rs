//! The engine runtime: sampling, single-sequence generation, and (with the engine-core issue)
//! the core loop thread and `EngineHandle`.

pub mod bench;
mod error;
pub mod generate;
pub mod sampler;

pub use error::RuntimeError;
pub use generate::{FinishReason, GenStats, Generator};
pub use sampler::{sample, Rng, SamplingParams};
