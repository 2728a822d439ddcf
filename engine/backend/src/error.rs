//! The backend error type.

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("weight `{name}`: {message}")]
    Weight { name: String, message: String },
    #[error("backend `{backend}` cannot run {what}")]
    Unsupported { backend: &'static str, what: String },
    #[error("out of memory: {0}")]
    OutOfMemory(String),
}
