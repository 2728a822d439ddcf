//! The crate's one error type, `SpecError`, and `Issue`: one problem in a spec, by key path.
//!
//! Loading a spec collects every issue it finds (interpolation, unknown keys, bad values,
//! impossible combinations) into one `SpecError::Invalid`, so a user fixes them in one pass.
//! Errors about fetching a model source live here too; they happen after a spec is valid.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// One problem in a spec: the key path (`engine.max_num_seqs`, `deploy.volumes[0]`) and a
/// message that names the bad value and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub key: String,
    pub message: String,
}

impl Issue {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.key, self.message)
        }
    }
}

/// Everything that can go wrong loading a spec or fetching its model.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("{}: cannot read", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: not valid YAML", path.display())]
    Yaml {
        path: PathBuf,
        #[source]
        source: serde_yaml::Error,
    },
    /// Every issue found in the spec, each printed on its own line as `file: key: message`.
    #[error("{}", render_issues(file, issues))]
    Invalid { file: PathBuf, issues: Vec<Issue> },
    #[error("{}:{line}: {message}", path.display())]
    Dotenv {
        path: PathBuf,
        line: usize,
        message: String,
    },
    /// A model source string that is none of the accepted forms.
    #[error("model source {text:?}: {message}")]
    Source { text: String, message: String },
    /// A local model path (or a file inside a fetched package) that is not there.
    #[error("{}: {message}", path.display())]
    NotFound { path: PathBuf, message: String },
    /// An `hf:` source that is not in the local Hugging Face cache.
    #[error("{message}")]
    NotCached { repo: String, message: String },
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    /// An external command (pip) that could not run or failed.
    #[error("{what}: {detail}")]
    Command { what: String, detail: String },
    #[error("{}: not a readable wheel", path.display())]
    Wheel {
        path: PathBuf,
        #[source]
        source: zip::result::ZipError,
    },
}

impl SpecError {
    /// The issues of an `Invalid` error (empty for every other kind).
    pub fn issues(&self) -> &[Issue] {
        match self {
            SpecError::Invalid { issues, .. } => issues,
            _ => &[],
        }
    }

    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        SpecError::Io {
            what: what.into(),
            source,
        }
    }
}

fn render_issues(file: &Path, issues: &[Issue]) -> String {
    let lines: Vec<String> = issues
        .iter()
        .map(|i| format!("{}: {i}", file.display()))
        .collect();
    lines.join("\n")
}

/// Collects issues while a spec is checked; every checker pushes here instead of returning early.
#[derive(Debug, Default)]
pub(crate) struct Issues(Vec<Issue>);

impl Issues {
    pub fn push(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.0.push(Issue::new(key, message));
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether any issue was reported at `key` or below it; cross-field rules skip inputs that
    /// are already wrong, so one mistake is reported once.
    pub fn has(&self, key: &str) -> bool {
        self.0.iter().any(|i| {
            i.key
                .strip_prefix(key)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
        })
    }

    pub fn into_vec(self) -> Vec<Issue> {
        self.0
    }
}

/// A key path one level down: `child("engine", "dtype")` is `engine.dtype`.
pub(crate) fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_prints_one_line_per_issue_with_file_and_key() {
        let e = SpecError::Invalid {
            file: PathBuf::from("specs/x.yaml"),
            issues: vec![
                Issue::new("engine.kv_cache_dtype", "\"fp9\" is not one of auto, fp8"),
                Issue::new("name", "missing"),
            ],
        };
        assert_eq!(
            e.to_string(),
            "specs/x.yaml: engine.kv_cache_dtype: \"fp9\" is not one of auto, fp8\n\
             specs/x.yaml: name: missing"
        );
        assert_eq!(e.issues().len(), 2);
    }

    #[test]
    fn child_paths() {
        assert_eq!(child("", "name"), "name");
        assert_eq!(child("engine", "dtype"), "engine.dtype");
    }
}
