//! `TextError`: the one error type of hearth-text.
//!
//! Every variant names what failed (file, vocab key, template and line) so the message can go
//! straight to a user or an operator's log. HTTP status mapping is the server's business.

use std::path::PathBuf;

/// Boxed error from the `tokenizers` crate (its own `Error` alias is exactly this).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum TextError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{path} is not valid JSON: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },

    /// The `tokenizers` crate refused to load or run a tokenizer.
    #[error("tokenizer {context}: {source}")]
    Tokenizer {
        context: String,
        #[source]
        source: BoxError,
    },

    /// A GGUF vocabulary whose `tokenizer.ggml.model` / `tokenizer.ggml.pre` we cannot reproduce.
    #[error("unsupported GGUF vocabulary (tokenizer.ggml.model = {model:?}, tokenizer.ggml.pre = {pre:?}): {reason}")]
    UnsupportedVocab {
        model: String,
        pre: Option<String>,
        reason: String,
    },

    /// GGUF vocabulary metadata that is inconsistent (lengths differ, ids out of range, ...).
    #[error("invalid GGUF vocabulary: {0}")]
    InvalidVocab(String),

    /// The template does not parse or failed while rendering.
    #[error("chat template {name:?}{}: {message}", line_suffix(*.line))]
    Template {
        name: String,
        line: Option<usize>,
        message: String,
        #[source]
        source: minijinja::Error,
    },

    /// The template itself rejected the conversation through `raise_exception(msg)`; `message` is
    /// the template's own text, meant for the API client.
    #[error("chat template {name:?} rejected the request{}: {message}", line_suffix(*.line))]
    TemplateRaised {
        name: String,
        line: Option<usize>,
        message: String,
    },

    /// A stop string that can never match.
    #[error("invalid stop condition: {0}")]
    InvalidStop(String),
}

fn line_suffix(line: Option<usize>) -> String {
    match line {
        Some(l) => format!(" (line {l})"),
        None => String::new(),
    }
}

impl TextError {
    pub(crate) fn tokenizer(context: impl Into<String>, source: BoxError) -> Self {
        TextError::Tokenizer {
            context: context.into(),
            source,
        }
    }
}
