//! The loader and model error type: every variant names the file and the tensor or field at fault.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Format { path: PathBuf, message: String },
    #[error("{path}: required field `{field}` is missing")]
    MissingField { path: PathBuf, field: String },
    #[error("{path}: tensor `{tensor}` is missing")]
    MissingTensor { path: PathBuf, tensor: String },
    #[error("{path}: tensor `{tensor}` has shape {actual:?}, expected {expected:?}")]
    Shape {
        path: PathBuf,
        tensor: String,
        actual: Vec<usize>,
        expected: Vec<usize>,
    },
    #[error("{path}: architecture `{architecture}` is not supported yet (supported: {supported})")]
    UnsupportedArchitecture {
        path: PathBuf,
        architecture: String,
        supported: String,
    },
    #[error("{path}: {what} is not supported yet (supported: {supported})")]
    Unsupported {
        path: PathBuf,
        what: String,
        supported: String,
    },
    #[error(transparent)]
    Backend(#[from] hearth_backend::BackendError),
}

impl LoadError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        LoadError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub fn format(path: &Path, message: impl Into<String>) -> Self {
        LoadError::Format {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }

    pub fn missing_field(path: &Path, field: &str) -> Self {
        LoadError::MissingField {
            path: path.to_path_buf(),
            field: field.to_owned(),
        }
    }

    /// Prefixes a format error with the metadata key being read.
    pub(crate) fn in_context(self, key: &str) -> Self {
        match self {
            LoadError::Format { path, message } => LoadError::Format {
                path,
                message: format!("metadata `{key}`: {message}"),
            },
            other => other,
        }
    }
}
