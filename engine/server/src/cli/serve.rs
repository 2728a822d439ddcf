//! `hearth-engine serve --spec FILE`: load the model, start the engine thread, serve HTTP until
//! SIGTERM / Ctrl-C, then drain: stop accepting, abort what is in flight, join the engine.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use hearth_runtime::{EngineHandle, LoadRequest, Loaded};
use hearth_server::metrics::Metrics;
use hearth_server::AppState;
use tracing::info;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Deployment spec (YAML).
    #[arg(long)]
    spec: PathBuf,
    /// Override the spec's server.host.
    #[arg(long)]
    host: Option<String>,
    /// Override the spec's server.port.
    #[arg(long)]
    port: Option<u16>,
}

pub fn run(a: ServeArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let spec = hearth_spec::load(&a.spec)?;
    let req = LoadRequest::from_spec(&spec)?;
    let loaded = hearth_runtime::load(&req)?;
    let cfg = loaded.plan(&req)?;
    let Loaded {
        engine,
        tokenizer,
        chat_template,
        max_model_len,
        mut phases,
        ..
    } = loaded;
    phases.push(("total_load".to_owned(), started.elapsed().as_secs_f64()));
    let engine = hearth_runtime::start(engine, cfg, max_model_len, &tokenizer)?;
    let trie_started = std::time::Instant::now();
    let guided_vocab = Arc::new(hearth_text::guided::TokenVocab::new(&tokenizer));
    tracing::info!(
        tokens = guided_vocab.len(),
        trie_nodes = guided_vocab.trie_nodes(),
        secs = trie_started.elapsed().as_secs_f64(),
        "guided decoding: vocabulary trie built"
    );
    let state = AppState {
        engine: engine.clone(),
        guided_vocab,
        tokenizer: Arc::new(tokenizer),
        template: chat_template.map(Arc::new),
        model_name: spec.served_model_name.as_str().into(),
        max_model_len: engine.max_model_len(),
        api_key: spec.server.api_key.as_ref().map(|k| k.expose().into()),
        tool_parser: spec.engine.tool_call_parser.map(|p| p.as_str().to_owned()),
        reasoning_parser: spec.engine.reasoning_parser.map(|p| p.as_str().to_owned()),
        enable_thinking: spec.engine.enable_thinking,
        default_template_kwargs: Arc::new(spec.engine.default_chat_template_kwargs.clone()),
        metrics: Arc::new(Metrics::new(&spec.served_model_name).with_startup(phases)),
        started,
        ready: Arc::new(AtomicBool::new(false)),
        hang_after_secs: 120.0,
        claude_code_normalization: spec.server.claude_code_normalization,
        strip_date_line: spec.server.strip_date_line,
    };
    let host = a.host.unwrap_or(spec.server.host.clone());
    let port = a.port.unwrap_or(spec.server.port);
    let addr: SocketAddr = format!("{host}:{port}")
        .parse()
        .with_context(|| format!("server address {host}:{port}"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let ready = state.ready.clone();
    let drain_engine = engine.clone();
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding {addr} (is the port in use?)"))?;
        ready.store(true, Ordering::Release);
        info!(%addr, model = %spec.served_model_name, secs = started.elapsed().as_secs_f32(), "phase: ready, serving HTTP");
        axum::serve(listener, hearth_server::app(state))
            .with_graceful_shutdown(shutdown_signal(drain_engine))
            .await
            .context("serving HTTP")
    })?;
    info!("shutting down: aborting requests in flight");
    engine.shutdown();
    Ok(())
}

/// How long in-flight requests may run after SIGTERM before they are aborted.
const DRAIN_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// Resolves on SIGTERM / Ctrl-C: axum then stops accepting and waits for open responses; after
/// `DRAIN_DEADLINE` the engine is shut down, which aborts what is still generating.
async fn shutdown_signal(engine: EngineHandle) {
    wait_for_signal().await;
    info!(
        deadline_secs = DRAIN_DEADLINE.as_secs(),
        "signal received: draining in-flight requests"
    );
    tokio::spawn(async move {
        tokio::time::sleep(DRAIN_DEADLINE).await;
        info!("drain deadline reached: aborting requests in flight");
        let _ = tokio::task::spawn_blocking(move || engine.shutdown()).await;
    });
}

async fn wait_for_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}
