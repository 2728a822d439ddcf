//! DType, weights, the Backend op set, and the CPU backend (the reference every other backend is
//! checked against, and the embedded default's engine).

pub mod cpu;
mod dtype;
mod error;
mod ops;
pub mod quant;
mod weight;

pub use cpu::CpuBackend;
pub use dtype::{DType, GgmlType};
pub use error::BackendError;
pub use ops::{
    AttnMetadata, AttnShape, Backend, KvCacheSpec, Llama3RopeScaling, RopeSpec, SeqAttn,
};
pub use weight::{HostWeight, WeightData};
