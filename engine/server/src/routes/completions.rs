//! POST /v1/completions: raw prompts (text or token ids, one or several) without the chat
//! template; JSON or (for one prompt) SSE, through the same text pipeline as chat (no parsers).

use std::convert::Infallible;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use hearth_protocol::openai::common::{FinishReason as WireFinish, Usage};
use hearth_protocol::openai::completions::{
    CompletionChoice, CompletionLogprobs, CompletionRequest, CompletionResponse, Prompt,
};
use hearth_runtime::{EngineOutput, FinishReason, RequestStream, ValidRequest};
use hearth_text::{StopChecker, Tokenizer};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::StreamExt;

use super::sampling::{self, TextOptions};
use crate::error::{ApiError, ErrorKind};
use crate::pipeline::SampleText;
use crate::state::AppState;

struct Plan {
    id: String,
    created: u64,
    n: usize,
    text: TextOptions,
    logprobs: Option<usize>,
    echo: bool,
    include_usage: bool,
}

pub async fn completions(
    State(s): State<AppState>,
    body: Result<Json<CompletionRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(req) = body?;
    super::reject_unknown(&req.unknown_fields(), "completions")?;
    super::check_model(&s, &req.model)?;
    if req.suffix.is_some() {
        return Err(ApiError::bad(
            "suffix",
            "suffix (fill-in-the-middle) is not supported; omit it",
        ));
    }
    if req.best_of.is_some_and(|b| b > 1) {
        return Err(ApiError::bad("best_of", "best_of is not supported; use n"));
    }
    let (mut params, n, text) = sampling::params(&req.sampling)?;
    if let Some(k) = req.logprobs {
        if k > 20 {
            return Err(ApiError::bad(
                "logprobs",
                format!("logprobs is {k}; allowed: 0 to 20"),
            ));
        }
        params.logprobs = Some(k as usize);
    }
    let add_special = req.add_special_tokens.unwrap_or(true);
    let encode = |t: &str| {
        s.tokenizer
            .encode(t, add_special)
            .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()))
    };
    let prompts: Vec<Vec<u32>> = match &req.prompt {
        Prompt::Text(t) => vec![encode(t)?],
        Prompt::Texts(ts) => ts.iter().map(|t| encode(t)).collect::<Result<_, _>>()?,
        Prompt::Tokens(ids) => vec![ids.clone()],
        Prompt::TokenBatches(b) => b.clone(),
    };
    if prompts.is_empty() || prompts.iter().any(Vec::is_empty) {
        return Err(ApiError::bad(
            "prompt",
            "prompt is empty; send text or at least one token id",
        ));
    }
    let vocab = s.tokenizer.vocab_size() as u32;
    if let Some(bad) = prompts.iter().flatten().find(|&&t| t >= vocab) {
        return Err(ApiError::bad(
            "prompt",
            format!(
                "token id {bad} is out of range; allowed: 0 to {}",
                vocab - 1
            ),
        ));
    }
    let max_tokens = req.max_tokens.unwrap_or(16) as usize;
    if max_tokens == 0 {
        return Err(ApiError::bad(
            "max_tokens",
            "max_tokens is 0; allowed: at least 1",
        ));
    }
    for p in &prompts {
        if p.len() + max_tokens > s.max_model_len {
            return Err(ApiError::bad(
                "max_tokens",
                format!(
                    "this model's maximum context length is {} tokens, but {} were requested ({} \
                     in the prompt, {} for the completion)",
                    s.max_model_len,
                    p.len() + max_tokens,
                    p.len(),
                    max_tokens
                ),
            ));
        }
    }
    if req.is_stream() && prompts.len() > 1 {
        return Err(ApiError::bad(
            "prompt",
            "streaming takes one prompt; send several prompts without stream",
        ));
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let plan = Plan {
        id: format!("cmpl-{now:x}{:06x}", std::process::id()),
        created: now,
        n,
        text,
        logprobs: params.logprobs,
        echo: req.echo.unwrap_or(false),
        include_usage: req.include_usage(),
    };
    let mut streams = Vec::with_capacity(prompts.len());
    for p in &prompts {
        let r = ValidRequest {
            prompt: p.clone(),
            params: params.clone(),
            max_tokens,
            n,
            cache_salt: req.cache_salt.clone(),
            guide: None,
        };
        streams.push((p.clone(), s.engine.submit(r)?));
    }
    if req.is_stream() {
        let (prompt, stream) = streams.remove(0);
        return Ok(stream_response(s, plan, prompt, stream).into_response());
    }
    let mut choices = Vec::new();
    let (mut prompt_tokens, mut completion, mut cached) = (0usize, 0usize, 0usize);
    for (pi, (prompt, stream)) in streams.into_iter().enumerate() {
        prompt_tokens += prompt.len();
        let (mut c, used, hit) = collect(&s, &plan, &prompt, stream).await?;
        completion += used;
        cached += hit;
        for ch in &mut c {
            ch.index += (pi * plan.n) as u32;
        }
        choices.extend(c);
    }
    Ok(Json(CompletionResponse {
        id: plan.id.clone(),
        object: Default::default(),
        created: plan.created,
        model: s.model_name.to_string(),
        choices,
        usage: Some(
            Usage::new(prompt_tokens as u32, completion as u32).with_cached_tokens(cached as u32),
        ),
    })
    .into_response())
}

fn sample_text<'t>(tok: &'t Tokenizer, plan: &Plan) -> Result<SampleText<'t>, ApiError> {
    let stop = StopChecker::new(
        plan.text.stop.clone(),
        Vec::new(),
        plan.text.include_stop_str,
    )
    .map_err(|e| ApiError::bad("stop", e.to_string()))?;
    Ok(SampleText::new(
        tok,
        stop,
        None,
        None,
        plan.text.skip_special,
    ))
}

fn wire_finish(r: FinishReason) -> WireFinish {
    match r {
        FinishReason::Length => WireFinish::Length,
        FinishReason::Stop | FinishReason::Abort => WireFinish::Stop,
    }
}

/// Legacy (completions-style) logprobs for one output token.
fn push_logprobs(acc: &mut CompletionLogprobs, tok: &Tokenizer, o: &EngineOutput, offset: usize) {
    let Some(lp) = &o.logprobs else { return };
    let piece = |t: u32| tok.token_to_piece(t).unwrap_or_default();
    acc.tokens.push(piece(lp.sampled.token));
    acc.token_logprobs.push(Some(lp.sampled.logprob));
    acc.text_offset.push(offset as u32);
    acc.top_logprobs.push(Some(
        lp.top.iter().map(|t| (piece(t.token), t.logprob)).collect(),
    ));
}

async fn collect(
    s: &AppState,
    plan: &Plan,
    prompt: &[u32],
    mut stream: RequestStream,
) -> Result<(Vec<CompletionChoice>, usize, usize), ApiError> {
    let tok = s.tokenizer.clone();
    let echo = if plan.echo {
        tok.decode(prompt, false).unwrap_or_default()
    } else {
        String::new()
    };
    let mut texts = (0..plan.n)
        .map(|_| sample_text(&tok, plan))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out: Vec<String> = vec![echo; plan.n];
    let mut lps: Vec<CompletionLogprobs> = vec![CompletionLogprobs::default(); plan.n];
    let mut finish: Vec<Option<FinishReason>> = vec![None; plan.n];
    let (mut used, mut cached) = (0, 0);
    while let Some(o) = stream.next().await {
        let i = o.index;
        if finish[i].is_some() {
            continue;
        }
        push_logprobs(&mut lps[i], &tok, &o, out[i].len());
        let d = texts[i]
            .push(o.token)
            .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()))?;
        out[i].push_str(&d.content);
        let ended = o
            .finish
            .or(texts[i].stopped.as_ref().map(|_| FinishReason::Stop));
        if let Some(r) = ended {
            out[i].push_str(&texts[i].finish().content);
            finish[i] = Some(r);
            if let Some(m) = o.metrics {
                used += m.generated_tokens;
                cached = cached.max(m.cached_tokens);
                s.metrics.observe(&m, r);
            }
            if finish.iter().all(Option::is_some) {
                break;
            }
        }
    }
    let choices = out
        .into_iter()
        .zip(lps)
        .enumerate()
        .map(|(i, (text, lp))| CompletionChoice {
            index: i as u32,
            text,
            logprobs: plan.logprobs.map(|_| lp),
            finish_reason: Some(wire_finish(finish[i].unwrap_or(FinishReason::Abort))),
        })
        .collect();
    Ok((choices, used, cached))
}

fn stream_response(
    s: AppState,
    plan: Plan,
    prompt: Vec<u32>,
    mut stream: RequestStream,
) -> Sse<impl tokio_stream::Stream<Item = Result<Event, Infallible>>> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    tokio::spawn(async move {
        let tok = s.tokenizer.clone();
        let model = s.model_name.to_string();
        let send = |choices: Vec<CompletionChoice>, usage: Option<Usage>| {
            let c = CompletionResponse {
                id: plan.id.clone(),
                object: Default::default(),
                created: plan.created,
                model: model.clone(),
                choices,
                usage,
            };
            tx.send(Event::default().data(serde_json::to_string(&c).unwrap_or_default()))
                .is_ok()
        };
        let mut texts = match (0..plan.n)
            .map(|_| sample_text(&tok, &plan))
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(t) => t,
            Err(e) => {
                let _ = tx.send(Event::default().data(e.body().to_string()));
                return;
            }
        };
        if plan.echo {
            let echo = tok.decode(&prompt, false).unwrap_or_default();
            for i in 0..plan.n {
                let c = CompletionChoice {
                    index: i as u32,
                    text: echo.clone(),
                    logprobs: None,
                    finish_reason: None,
                };
                if !send(vec![c], None) {
                    return;
                }
            }
        }
        let mut done = vec![false; plan.n];
        let (mut used, mut cached) = (0, 0);
        while let Some(o) = stream.next().await {
            let i = o.index;
            if done[i] {
                continue;
            }
            let mut lp = CompletionLogprobs::default();
            push_logprobs(&mut lp, &tok, &o, 0);
            let mut text = texts[i]
                .push(o.token)
                .map(|d| d.content)
                .unwrap_or_default();
            let ended = o
                .finish
                .or(texts[i].stopped.as_ref().map(|_| FinishReason::Stop));
            if ended.is_some() {
                text.push_str(&texts[i].finish().content);
            }
            if !text.is_empty() || ended.is_some() {
                let c = CompletionChoice {
                    index: i as u32,
                    text,
                    logprobs: plan.logprobs.map(|_| lp),
                    finish_reason: ended.map(wire_finish),
                };
                if !send(vec![c], None) {
                    return; // client gone: dropping `stream` aborts the request
                }
            }
            if let Some(r) = ended {
                done[i] = true;
                if let Some(m) = o.metrics {
                    used += m.generated_tokens;
                    cached = cached.max(m.cached_tokens);
                    s.metrics.observe(&m, r);
                }
                if done.iter().all(|d| *d) {
                    break;
                }
            }
        }
        if plan.include_usage {
            send(
                Vec::new(),
                Some(
                    Usage::new(prompt.len() as u32, used as u32).with_cached_tokens(cached as u32),
                ),
            );
        }
        let _ = tx.send(Event::default().data("[DONE]"));
    });
    Sse::new(UnboundedReceiverStream::new(rx).map(Ok))
}
