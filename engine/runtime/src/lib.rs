//! The engine runtime: the loader, the engine core loop thread behind `EngineHandle`
//! (scheduler -> model runner -> sampler), single-sequence generation for tools, and `bench`.

pub mod bench;
pub mod capabilities;
pub mod device;
pub mod engine;
mod error;
pub mod generate;
mod gguf_vocab;
pub mod loader;
#[cfg(feature = "cuda")]
mod memory_plan;
pub mod request;
pub mod runner;
pub mod sampler;
mod stats;
mod step_trace;

pub use bench::BenchOptions;
pub use device::{DeviceBackend, ModelEngine, StepLimits};
pub use engine::{EngineConfig, EngineHandle, EngineParts, RequestStream, SubmitError};
pub use error::RuntimeError;
pub use generate::{GenStats, Generator};
pub use gguf_vocab::vocab_from_gguf;
pub use loader::{load, load_on, start, LoadRequest, Loaded, LoadedModel};
pub use request::{EngineOutput, FinishReason, RequestId, RequestMetrics, ValidRequest};
pub use sampler::{sample, Rng, SamplingParams};
pub use stats::{EngineStats, ITERATION_TOKEN_BUCKETS};
