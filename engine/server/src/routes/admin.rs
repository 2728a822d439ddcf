//! GET /health, /ready, /version, /metrics.

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde_json::json;

use crate::error::{ApiError, ErrorKind};
use crate::state::AppState;

/// 200 only while the engine loop is alive and making progress: a loop that has work but has
/// not completed a step for `hang_after_secs` is reported as unhealthy.
pub async fn health(State(s): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let stats = s
        .engine
        .stats()
        .ok_or_else(|| ApiError::new(ErrorKind::Unavailable, "the engine loop is not running"))?;
    if stats.secs_since_step > s.hang_after_secs {
        return Err(ApiError::new(
            ErrorKind::Unavailable,
            format!(
                "the engine has work but has not completed a step for {:.0} s (limit {:.0} s)",
                stats.secs_since_step, s.hang_after_secs
            ),
        ));
    }
    Ok((StatusCode::OK, Json(json!({"status": "ok"}))))
}

pub async fn ready(State(s): State<AppState>) -> impl IntoResponse {
    if s.ready.load(Ordering::Acquire) {
        (
            StatusCode::OK,
            Json(json!({"status": "ready", "model": &*s.model_name})),
        )
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "loading"})),
        )
    }
}

pub async fn version() -> impl IntoResponse {
    Json(json!({"version": env!("CARGO_PKG_VERSION"), "engine": "hearth"}))
}

pub async fn metrics(State(s): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let stats = s
        .engine
        .stats()
        .ok_or_else(|| ApiError::new(ErrorKind::Unavailable, "the engine loop is not running"))?;
    Ok((
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.metrics.render(&stats),
    ))
}
