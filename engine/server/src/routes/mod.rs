//! Route handlers, one file per API area.

pub mod admin;
pub mod anthropic;
pub mod chat;
pub mod completions;
pub mod models;
pub mod sampling;
pub mod tokenize;

use axum::http::Uri;

use crate::error::{ApiError, ErrorKind};

pub async fn not_found(uri: Uri) -> ApiError {
    ApiError::new(
        ErrorKind::NotFound,
        format!(
            "no route {}: the API serves /v1/chat/completions, /v1/completions, /v1/models, \
             /v1/messages, /tokenize, /detokenize, /health, /ready, /version, /metrics",
            uri.path()
        ),
    )
}
