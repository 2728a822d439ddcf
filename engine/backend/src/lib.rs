//! DType, weights, the Backend op set, and the CPU backend (the reference every other backend is
//! checked against, and the embedded default's engine).

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
mod dtype;
mod error;
mod moe;
mod ops;
pub mod quant;
pub mod sample;
mod weight;

pub use cpu::CpuBackend;
#[cfg(feature = "cuda")]
pub use cuda::CudaBackend;
pub use dtype::{DType, GgmlType};
pub use error::BackendError;
pub use moe::{route, MoeRouting, MoeScoring, Route};
pub use ops::{
    argmax, AttnMetadata, AttnShape, Backend, ForwardBatch, KvCacheSpec, KvDtype,
    Llama3RopeScaling, MlaShape, MoeLayer, RopeSpec, RopeWrite, SeqAttn, YarnScaling, NO_SLOT,
};
pub use sample::SampleRow;
pub use weight::{HostBytes, HostWeight, WeightData};
