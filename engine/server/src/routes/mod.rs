//! Route handlers, one file per API area.

pub mod admin;
pub mod anthropic;
pub mod chat;
pub mod completions;
mod guided;
pub mod models;
pub mod sampling;
pub mod tokenize;

use axum::http::Uri;

use crate::error::{ApiError, ErrorKind};
use crate::state::AppState;

/// Refuses request fields the API does not define, naming them (OpenAI endpoints).
pub(crate) fn reject_unknown(fields: &[&str], api: &str) -> Result<(), ApiError> {
    match fields.first() {
        None => Ok(()),
        Some(first) => Err(ApiError::bad(
            first,
            format!(
                "unknown field(s): {}; see the OpenAI {api} API",
                fields.join(", ")
            ),
        )),
    }
}

/// 404 unless `model` is the one this server serves.
pub(crate) fn check_model(s: &AppState, model: &str) -> Result<(), ApiError> {
    if model == &*s.model_name {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorKind::NotFound,
        format!(
            "the model `{model}` does not exist; this server serves `{}`",
            s.model_name
        ),
    ))
}

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
