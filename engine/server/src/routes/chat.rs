//! POST /v1/chat/completions: validate, render the chat template, tokenize, submit to the engine,
//! then either stream chunks over SSE or answer with one JSON body. Both go through the same
//! per-sample text pipeline (`pipeline.rs`), so they agree.

use std::convert::Infallible;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use hearth_protocol::openai::chat::{
    ChatChoice, ChatCompletionChunk, ChatCompletionRequest, ChatCompletionResponse, ChatDelta,
    ChatResponseMessage, ChunkChoice, FunctionCall, FunctionCallDelta, Role, ToolCall,
    ToolCallDelta, ToolChoice, ToolChoiceMode, ToolType,
};
use hearth_protocol::openai::common::{
    ChatLogprobToken, ChatLogprobs, FinishReason as WireFinish, TopLogprob, Usage,
};
use hearth_runtime::{EngineOutput, FinishReason, ValidRequest};
use hearth_text::parsers::{reasoning, tool, ParsedDelta};
use hearth_text::{ChatRequest, StopChecker, Tokenizer};
use serde_json::{Map, Value};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::StreamExt;

use super::guided::{self, Forced};
use super::sampling::{self, TextOptions};
use crate::error::{ApiError, ErrorKind};
use crate::pipeline::SampleText;
use crate::state::AppState;

/// Everything a response needs besides the engine's outputs.
struct Plan {
    id: String,
    created: u64,
    prompt_tokens: usize,
    n: usize,
    text: TextOptions,
    tools: Vec<Value>,
    use_tool_parser: bool,
    thinking: bool,
    logprobs: bool,
    include_usage: bool,
}

pub async fn completions(
    State(s): State<AppState>,
    body: Result<Json<ChatCompletionRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(req) = body?;
    let (valid, plan) = prepare(&s, &req)?;
    let stream = s.engine.submit(valid)?;
    if req.is_stream() {
        Ok(stream_response(s, plan, stream).into_response())
    } else {
        Ok(Json(collect(&s, &plan, stream).await?).into_response())
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn prepare(s: &AppState, req: &ChatCompletionRequest) -> Result<(ValidRequest, Plan), ApiError> {
    super::reject_unknown(&req.unknown_fields(), "chat completions")?;
    super::check_model(s, &req.model)?;
    if req.messages.is_empty() {
        return Err(ApiError::bad(
            "messages",
            "messages is empty; send at least one message",
        ));
    }
    let (mut params, n, text) = sampling::params(&req.sampling)?;
    if req.logprobs == Some(true) {
        let top = req.top_logprobs.unwrap_or(0) as usize;
        if top > 20 {
            return Err(ApiError::bad(
                "top_logprobs",
                format!("top_logprobs is {top}; allowed: 0 to 20"),
            ));
        }
        params.logprobs = Some(top);
    }
    let tools: Vec<Value> = req
        .tools
        .iter()
        .flatten()
        .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
        .collect();
    let forced = match &req.tool_choice {
        Some(ToolChoice::Mode(ToolChoiceMode::Required)) => Some(Forced::Any),
        Some(ToolChoice::Named(n)) => Some(Forced::Named(n.function.name.as_str())),
        _ => None,
    };
    if forced.is_some() && tools.is_empty() {
        return Err(ApiError::bad(
            "tool_choice",
            "tool_choice required or a named function needs `tools`",
        ));
    }
    let use_tool_parser = match &req.tool_choice {
        _ if tools.is_empty() => false,
        Some(ToolChoice::Mode(ToolChoiceMode::None)) => false,
        Some(ToolChoice::Mode(ToolChoiceMode::Auto)) | None => {
            if s.tool_parser.is_none() {
                return Err(ApiError::bad(
                    "tool_choice",
                    "tool_choice auto needs a tool parser: set engine.tool_call_parser and \
                     engine.enable_auto_tool_choice in the spec",
                ));
            }
            true
        }
        Some(_) => true,
    };
    let kwargs = template_kwargs(s, req.chat_template_kwargs.as_ref());
    let thinking = kwargs
        .get("enable_thinking")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let guide = match forced {
        Some(_)
            if req
                .response_format
                .as_ref()
                .is_some_and(|f| f.get("type").and_then(Value::as_str) != Some("text")) =>
        {
            return Err(ApiError::bad(
                "response_format",
                "response_format cannot be combined with tool_choice required or a named \
                 function (the output is the tool call); drop one of them",
            ))
        }
        Some(f) => Some(guided::forced_tools(
            s,
            &tools,
            f,
            req.parallel_tool_calls.unwrap_or(true),
            thinking,
            "tool_choice",
        )?),
        None => guided::response_format(s, req.response_format.as_ref(), thinking)?,
    };
    let messages = messages_json(&req.messages)?;
    let prompt_text = render(
        s,
        &messages,
        &tools,
        req.add_generation_prompt.unwrap_or(true),
        &kwargs,
    )?;
    let prompt = s
        .tokenizer
        .encode(&prompt_text, false)
        .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()))?;
    let room = s.max_model_len.saturating_sub(prompt.len());
    let max_tokens = match req.max_output_tokens() {
        Some(m) if prompt.len() + m as usize > s.max_model_len => {
            return Err(ApiError::bad(
                "max_tokens",
                format!(
                "this model's maximum context length is {} tokens, but {} were requested ({} in \
                     the messages, {} for the completion); reduce the messages or max_tokens",
                s.max_model_len,
                prompt.len() + m as usize,
                prompt.len(),
                m
            ),
            ))
        }
        Some(0) => {
            return Err(ApiError::bad(
                "max_tokens",
                "max_tokens is 0; allowed: at least 1",
            ))
        }
        Some(m) => m as usize,
        None if room == 0 => {
            return Err(ApiError::bad(
                "messages",
                format!(
                    "the messages take {} tokens; the maximum context length is {}",
                    prompt.len(),
                    s.max_model_len
                ),
            ))
        }
        None => room,
    };
    let plan = Plan {
        id: format!("chatcmpl-{:x}{:08x}", now(), rand_u32()),
        created: now(),
        prompt_tokens: prompt.len(),
        n,
        text,
        tools,
        use_tool_parser,
        thinking,
        logprobs: params.logprobs.is_some(),
        include_usage: req.include_usage(),
    };
    let valid = ValidRequest {
        prompt,
        params,
        max_tokens,
        n,
        cache_salt: req.cache_salt.clone(),
        guide,
    };
    Ok((valid, plan))
}

/// The spec's default template kwargs, its enable_thinking, then the request's own.
pub(crate) fn template_kwargs(
    s: &AppState,
    req: Option<&Map<String, Value>>,
) -> Map<String, Value> {
    let mut kwargs: Map<String, Value> = (*s.default_template_kwargs).clone();
    kwargs.insert("enable_thinking".into(), Value::Bool(s.enable_thinking));
    if let Some(k) = req {
        kwargs.extend(k.clone());
    }
    kwargs
}

/// Messages as chat templates expect them: content as one string, tool-call arguments as
/// objects. Non-text content is refused (text-only models).
pub(crate) fn messages_json(
    messages: &[hearth_protocol::openai::chat::ChatMessage],
) -> Result<Vec<Value>, ApiError> {
    let mut out = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        if m.content.as_ref().is_some_and(|c| c.has_non_text()) {
            return Err(ApiError::bad(
                &format!("messages[{i}].content"),
                "this model takes text only; image and other non-text parts are not supported",
            ));
        }
        let mut v = serde_json::to_value(m)
            .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()))?;
        if let Some(obj) = v.as_object_mut() {
            obj.insert("content".into(), Value::String(m.text_content()));
            if let Some(calls) = obj.get_mut("tool_calls").and_then(Value::as_array_mut) {
                for c in calls {
                    if let Some(args) = c.pointer_mut("/function/arguments") {
                        if let Some(parsed) =
                            args.as_str().and_then(|a| serde_json::from_str(a).ok())
                        {
                            *args = parsed;
                        }
                    }
                }
            }
        }
        out.push(v);
    }
    Ok(out)
}

/// Renders the chat template; a template error is the request's fault (400).
pub(crate) fn render(
    s: &AppState,
    messages: &[Value],
    tools: &[Value],
    add_generation_prompt: bool,
    kwargs: &Map<String, Value>,
) -> Result<String, ApiError> {
    let template = s.template.as_ref().ok_or_else(|| {
        ApiError::bad(
            "messages",
            "this model has no chat template; use /v1/completions",
        )
    })?;
    template
        .render(&ChatRequest {
            messages,
            tools: (!tools.is_empty()).then_some(tools),
            add_generation_prompt,
            kwargs,
        })
        .map_err(|e| {
            ApiError::bad(
                "messages",
                format!("the chat template refused the request: {e}"),
            )
        })
}

fn rand_u32() -> u32 {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    t.wrapping_mul(2654435761)
}

fn sample_text<'t>(
    s: &AppState,
    tok: &'t Tokenizer,
    plan: &Plan,
) -> Result<SampleText<'t>, ApiError> {
    let stop = StopChecker::new(
        plan.text.stop.clone(),
        Vec::new(),
        plan.text.include_stop_str,
    )
    .map_err(|e| ApiError::bad("stop", e.to_string()))?;
    let reasoning = match &s.reasoning_parser {
        Some(name) => Some(
            reasoning::reasoning_parser(name, plan.thinking)
                .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()))?,
        ),
        None => None,
    };
    let tools = match (&s.tool_parser, plan.use_tool_parser) {
        (Some(name), true) => Some(
            tool::tool_parser(name, &plan.tools)
                .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()))?,
        ),
        _ => None,
    };
    Ok(SampleText::new(
        tok,
        stop,
        reasoning,
        tools,
        plan.text.skip_special,
    ))
}

fn wire_finish(reason: FinishReason, has_calls: bool) -> WireFinish {
    match reason {
        FinishReason::Stop if has_calls => WireFinish::ToolCalls,
        FinishReason::Stop | FinishReason::Abort => WireFinish::Stop,
        FinishReason::Length => WireFinish::Length,
    }
}

fn wire_logprobs(tok: &Tokenizer, o: &EngineOutput) -> Option<ChatLogprobToken> {
    let lp = o.logprobs.as_ref()?;
    let piece = |t: u32| tok.token_to_piece(t).unwrap_or_default();
    Some(ChatLogprobToken {
        token: piece(lp.sampled.token),
        logprob: lp.sampled.logprob,
        bytes: Some(piece(lp.sampled.token).into_bytes()),
        top_logprobs: lp
            .top
            .iter()
            .map(|t| TopLogprob {
                token: piece(t.token),
                logprob: t.logprob,
                bytes: Some(piece(t.token).into_bytes()),
            })
            .collect(),
    })
}

fn some(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

/// The non-streaming body: every sample run to its end through the text pipeline.
async fn collect(
    s: &AppState,
    plan: &Plan,
    mut stream: hearth_runtime::RequestStream,
) -> Result<ChatCompletionResponse, ApiError> {
    let tok = s.tokenizer.clone();
    let mut texts = (0..plan.n)
        .map(|_| sample_text(s, &tok, plan))
        .collect::<Result<Vec<_>, _>>()?;
    let mut acc: Vec<ParsedDelta> = vec![ParsedDelta::default(); plan.n];
    let mut logprobs: Vec<Vec<ChatLogprobToken>> = vec![Vec::new(); plan.n];
    let mut finish: Vec<Option<FinishReason>> = vec![None; plan.n];
    let (mut completion, mut cached) = (0usize, 0usize);
    while let Some(o) = stream.next().await {
        let i = o.index;
        if finish[i].is_some() {
            continue;
        }
        let d = texts[i]
            .push(o.token)
            .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()))?;
        merge(&mut acc[i], d);
        if plan.logprobs {
            logprobs[i].extend(wire_logprobs(&tok, &o));
        }
        let ended = o
            .finish
            .or(texts[i].stopped.as_ref().map(|_| FinishReason::Stop));
        if let Some(r) = ended {
            merge(&mut acc[i], texts[i].finish());
            finish[i] = Some(r);
            if let Some(m) = o.metrics {
                completion += m.generated_tokens;
                cached = cached.max(m.cached_tokens);
                s.metrics.observe(&m, r);
            } else {
                completion += 1;
            }
            if finish.iter().all(Option::is_some) {
                break;
            }
        }
    }
    let mut choices = Vec::with_capacity(plan.n);
    for (i, d) in acc.into_iter().enumerate() {
        let calls: Vec<ToolCall> = texts[i]
            .tool_calls()
            .iter()
            .map(|c| ToolCall {
                id: c.id.clone(),
                kind: ToolType::default(),
                function: FunctionCall {
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                },
            })
            .collect();
        count_failures(s, &texts[i]);
        let reasoning = some(d.reasoning);
        choices.push(ChatChoice {
            index: i as u32,
            message: ChatResponseMessage {
                role: Role::Assistant,
                content: if calls.is_empty() {
                    Some(d.content)
                } else {
                    some(d.content)
                },
                reasoning_content: reasoning.clone(),
                reasoning,
                tool_calls: (!calls.is_empty()).then_some(calls.clone()),
            },
            logprobs: plan.logprobs.then(|| ChatLogprobs {
                content: Some(std::mem::take(&mut logprobs[i])),
            }),
            finish_reason: Some(wire_finish(
                finish[i].unwrap_or(FinishReason::Abort),
                !calls.is_empty(),
            )),
        });
    }
    Ok(ChatCompletionResponse {
        id: plan.id.clone(),
        object: Default::default(),
        created: plan.created,
        model: s.model_name.to_string(),
        choices,
        usage: Some(
            Usage::new(plan.prompt_tokens as u32, completion as u32)
                .with_cached_tokens(cached as u32),
        ),
    })
}

fn merge(a: &mut ParsedDelta, b: ParsedDelta) {
    a.content.push_str(&b.content);
    a.reasoning.push_str(&b.reasoning);
    a.tool_calls.extend(b.tool_calls);
}

fn count_failures(s: &AppState, t: &SampleText<'_>) {
    let f = t.tool_failures();
    if f > 0 {
        s.metrics
            .tool_parse_failures
            .fetch_add(f as u64, std::sync::atomic::Ordering::Relaxed);
        tracing::warn!(
            failures = f,
            "tool call(s) could not be parsed; returned as text"
        );
    }
}

fn chunk(plan: &Plan, model: &str, choices: Vec<ChunkChoice>, usage: Option<Usage>) -> Event {
    let c = ChatCompletionChunk {
        id: plan.id.clone(),
        object: Default::default(),
        created: plan.created,
        model: model.to_owned(),
        choices,
        usage,
    };
    Event::default().data(serde_json::to_string(&c).unwrap_or_default())
}

fn delta_choice(d: ParsedDelta, first: bool) -> ChatDelta {
    let reasoning = some(d.reasoning);
    ChatDelta {
        role: first.then_some(Role::Assistant),
        content: some(d.content),
        reasoning_content: reasoning.clone(),
        reasoning,
        tool_calls: (!d.tool_calls.is_empty()).then(|| {
            d.tool_calls
                .into_iter()
                .map(|t| ToolCallDelta {
                    index: t.index as u32,
                    kind: t.id.as_ref().map(|_| ToolType::default()),
                    id: t.id,
                    function: FunctionCallDelta {
                        name: t.name,
                        arguments: Some(t.arguments),
                    },
                })
                .collect()
        }),
    }
}

/// The SSE response: a task turns engine outputs into chunks; when the client goes away the
/// channel closes, the task drops the engine stream, and the request is aborted.
fn stream_response(
    s: AppState,
    plan: Plan,
    mut stream: hearth_runtime::RequestStream,
) -> Sse<impl tokio_stream::Stream<Item = Result<Event, Infallible>>> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    tokio::spawn(async move {
        let tok = s.tokenizer.clone();
        let model = s.model_name.to_string();
        let mut texts = match (0..plan.n)
            .map(|_| sample_text(&s, &tok, &plan))
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(t) => t,
            Err(e) => {
                let _ = tx.send(Event::default().data(e.body().to_string()));
                return;
            }
        };
        let mut started = vec![false; plan.n];
        let mut done = vec![false; plan.n];
        let (mut completion, mut cached) = (0usize, 0usize);
        while let Some(o) = stream.next().await {
            let i = o.index;
            if done[i] {
                continue;
            }
            let mut d = match texts[i].push(o.token) {
                Ok(d) => d,
                Err(e) => {
                    tracing::error!(error = %e, "detokenization failed");
                    ParsedDelta::default()
                }
            };
            let ended = o
                .finish
                .or(texts[i].stopped.as_ref().map(|_| FinishReason::Stop));
            if ended.is_some() {
                merge(&mut d, texts[i].finish());
            }
            let lp = plan.logprobs.then(|| ChatLogprobs {
                content: Some(wire_logprobs(&tok, &o).into_iter().collect()),
            });
            let has_calls = !texts[i].tool_calls().is_empty();
            let finish_reason = ended.map(|r| wire_finish(r, has_calls));
            let delta = delta_choice(d, !started[i]);
            if !delta.is_empty() || finish_reason.is_some() || lp.is_some() || !started[i] {
                started[i] = true;
                let c = ChunkChoice {
                    index: i as u32,
                    delta,
                    logprobs: lp,
                    finish_reason,
                };
                if tx.send(chunk(&plan, &model, vec![c], None)).is_err() {
                    return; // client gone: dropping `stream` aborts the request
                }
            }
            if let Some(r) = ended {
                done[i] = true;
                count_failures(&s, &texts[i]);
                if let Some(m) = o.metrics {
                    completion += m.generated_tokens;
                    cached = cached.max(m.cached_tokens);
                    s.metrics.observe(&m, r);
                }
                if done.iter().all(|d| *d) {
                    break;
                }
            }
        }
        if plan.include_usage {
            let usage = Usage::new(plan.prompt_tokens as u32, completion as u32)
                .with_cached_tokens(cached as u32);
            let _ = tx.send(chunk(&plan, &model, Vec::new(), Some(usage)));
        }
        let _ = tx.send(Event::default().data("[DONE]"));
    });
    Sse::new(UnboundedReceiverStream::new(rx).map(Ok))
}
