//! The backend error type.

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("weight `{name}`: {message}")]
    Weight { name: String, message: String },
    #[error("backend `{backend}` cannot run {what}")]
    Unsupported { backend: &'static str, what: String },
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    #[error("CUDA: {0}")]
    Cuda(String),
}

#[cfg(feature = "cuda")]
impl From<cudarc::driver::DriverError> for BackendError {
    fn from(e: cudarc::driver::DriverError) -> Self {
        use cudarc::driver::sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY;
        if e.0 == CUDA_ERROR_OUT_OF_MEMORY {
            BackendError::OutOfMemory(format!("GPU: {e}"))
        } else {
            BackendError::Cuda(e.to_string())
        }
    }
}
