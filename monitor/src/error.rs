//! The monitor library's one error type. Each variant says what was being done and to what;
//! the binary adds nothing but the exit.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("Docker: {what}: {source}")]
    Docker {
        what: String,
        #[source]
        source: bollard::errors::Error,
    },
    #[error("{} is not valid peak.json: {source}", path.display())]
    Peaks {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{} is held by another hearth-monitor (pid {pid}); one monitor writes a logs directory \
         at a time: stop it, or give this one its own --logs",
        dir.display()
    )]
    Locked { dir: PathBuf, pid: String },
    #[error("{0}")]
    Usage(String),
    /// A task of the monitor ended abnormally (a panic): a bug.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    pub fn io(what: &'static str, path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    }

    pub fn docker(what: impl Into<String>, source: bollard::errors::Error) -> Self {
        Error::Docker {
            what: what.into(),
            source,
        }
    }
}
