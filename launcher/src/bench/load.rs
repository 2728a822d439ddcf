//! One batch of requests kept at a fixed concurrency (closed loop: each of `c` workers sends
//! its next request when its previous one finished), every answer streamed and timed. The
//! prompts are made before the clock starts; the output length is fixed with `ignore_eos`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use hearth_protocol::openai::{CompletionRequest, Prompt};
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::Env;
use crate::client::{stream, Target};

/// What every request of a run shares.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub http: reqwest::Client,
    pub target: Target,
    pub model: String,
}

/// One request's measurements.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RequestResult {
    /// Why it failed; `None` when it succeeded.
    pub error: Option<String>,
    pub prompt_tokens: Option<u32>,
    pub output_tokens: u32,
    /// Prompt tokens the server reported as served from its prefix cache.
    pub cached_tokens: Option<u32>,
    pub ttft_s: Option<f64>,
    pub e2e_s: f64,
    /// Decode tok/s this request saw (tokens after the first over the time after the first).
    pub decode_tok_s: Option<f64>,
    #[serde(skip)]
    pub itls_s: Vec<f64>,
}

/// A finished (or interrupted) batch.
#[derive(Debug, Default)]
pub struct Batch {
    pub results: Vec<RequestResult>,
    pub wall_s: f64,
    pub interrupted: bool,
}

/// Sends one streamed completion of exactly `output_len` tokens and measures it.
pub async fn request(ctx: &Ctx, prompt: Prompt, output_len: u32) -> RequestResult {
    let mut req = CompletionRequest {
        model: ctx.model.clone(),
        prompt,
        max_tokens: Some(output_len),
        ..Default::default()
    };
    req.sampling.temperature = Some(0.0);
    req.sampling.ignore_eos = Some(true);
    match stream::completion(&ctx.http, &ctx.target, &req).await {
        Ok(o) => RequestResult {
            error: None,
            prompt_tokens: o.prompt_tokens(),
            output_tokens: o.completion_tokens(),
            cached_tokens: o
                .usage
                .and_then(|u| u.prompt_tokens_details)
                .map(|d| d.cached_tokens),
            ttft_s: o.timing.ttft(),
            e2e_s: o.timing.e2e,
            decode_tok_s: o.decode_tok_s(),
            itls_s: o.timing.itls(),
        },
        Err(e) => RequestResult {
            error: Some(e.to_string()),
            ..Default::default()
        },
    }
}

/// Runs every prompt with at most `concurrency` in flight; stops early on Ctrl-C.
pub async fn run(
    env: &mut Env<'_>,
    prompts: Vec<Prompt>,
    concurrency: usize,
    output_len: u32,
) -> Batch {
    let (ctx, progress) = (env.ctx, env.progress);
    let prompts: Arc<[Prompt]> = prompts.into();
    let next = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let start = Instant::now();
    let mut workers = JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (ctx, prompts, next, tx) = (ctx.clone(), prompts.clone(), next.clone(), tx.clone());
        workers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(p) = prompts.get(i) else { break };
                let r = request(&ctx, p.clone(), output_len).await;
                if tx.send(r).is_err() {
                    break;
                }
            }
        });
    }
    drop(tx);
    let mut batch = Batch::default();
    loop {
        tokio::select! {
            r = rx.recv() => match r {
                Some(r) => {
                    progress.done(r.error.is_some());
                    batch.results.push(r);
                }
                None => break,
            },
            () = env.stop.wait() => {
                workers.abort_all();
                batch.interrupted = true;
                break;
            }
        }
    }
    batch.wall_s = start.elapsed().as_secs_f64();
    batch
}
