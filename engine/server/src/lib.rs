//! The HTTP server (axum): OpenAI and Anthropic APIs, health/readiness, metrics. Routes see the
//! engine only through `EngineHandle`, the text side through hearth-text, the wire shapes through
//! hearth-protocol; HTTP errors are mapped in one place (`error.rs`).

pub mod auth;
pub mod error;
pub mod metrics;
pub mod pipeline;
pub mod routes;
pub mod state;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use tracing::Instrument;

pub use state::AppState;

/// Request bodies above this are refused with 413 (long-context prompts fit well within it).
pub const MAX_BODY_BYTES: usize = 32 << 20;

/// The whole application; tests drive it with `oneshot`, `serve` binds it to a socket.
pub fn app(state: AppState) -> Router {
    let v1 = Router::new()
        .route("/v1/models", get(routes::models::list))
        .route("/v1/chat/completions", post(routes::chat::completions))
        .route("/v1/completions", post(routes::completions::completions))
        .route("/v1/messages", post(routes::anthropic::messages))
        .route(
            "/v1/messages/count_tokens",
            post(routes::anthropic::count_tokens),
        )
        .route("/tokenize", post(routes::tokenize::tokenize))
        .route("/detokenize", post(routes::tokenize::detokenize))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_key,
        ));
    Router::new()
        .route("/health", get(routes::admin::health))
        .route("/ready", get(routes::admin::ready))
        .route("/version", get(routes::admin::version))
        .route("/metrics", get(routes::admin::metrics))
        .merge(v1)
        .fallback(routes::not_found)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(access_log))
        .with_state(state)
}

/// The access log: one line per request with its id, method, path, status and latency (to the
/// response head; streams go on after it). Bodies and headers (keys!) are never logged. The
/// request id is on the span, so everything the handler logs carries it.
async fn access_log(req: Request, next: Next) -> Response {
    static NEXT_ID: AtomicU64 = AtomicU64::new(1);
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    let span = tracing::info_span!("request", id);
    let t = Instant::now();
    let resp = next.run(req).instrument(span.clone()).await;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    if path != "/health" && path != "/metrics" && path != "/ready" {
        tracing::info!(parent: &span, %method, %path, status = resp.status().as_u16(), ms, "access");
    }
    resp
}
