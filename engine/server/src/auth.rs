//! API-key check: `Authorization: Bearer KEY` (OpenAI) or `x-api-key: KEY` (Anthropic) on every
//! /v1 route when the spec sets `server.api_key`. The key is never logged.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, ErrorKind};
use crate::state::AppState;

/// Compares without an early exit, so timing does not reveal a prefix of the key.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub async fn require_key(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(key) = state.api_key.as_deref() else {
        return next.run(req).await;
    };
    let headers = req.headers();
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let x_api_key = headers.get("x-api-key").and_then(|v| v.to_str().ok());
    if bearer
        .or(x_api_key)
        .is_some_and(|k| same(k.as_bytes(), key.as_bytes()))
    {
        return next.run(req).await;
    }
    let mut err = ApiError::new(
        ErrorKind::Authentication,
        "missing or wrong API key: send `Authorization: Bearer <key>` or `x-api-key: <key>`",
    );
    if req.uri().path().starts_with("/v1/messages") {
        err = err.anthropic();
    }
    err.into_response()
}
