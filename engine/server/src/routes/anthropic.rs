//! POST /v1/messages (Anthropic Messages API, JSON and the full SSE event sequence) and
//! /v1/messages/count_tokens. Requests are mapped onto the chat template's OpenAI-style messages;
//! generation goes through the same text pipeline as /v1/chat/completions.
//!
//! Prompt-cache busters from Claude Code (field notes) are normalized before rendering (spec:
//! `server.claude_code_normalization`, on by default): a per-request `x-anthropic-billing-header`
//! system block is dropped, `cache_control` markers never reach the prompt, tools are sorted by
//! name, and with `server.strip_date_line` a daily "Today's date is ..." line is dropped, so
//! identical conversations render to identical prompts and hit the prefix cache.

use std::convert::Infallible;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use hearth_protocol::anthropic::messages::{
    ContentBlock, CountTokensRequest, CountTokensResponse, Message, MessagesRequest,
    MessagesResponse, Role, StopReason, SystemPrompt, ThinkingConfig, Tool, ToolChoice, Usage,
};
use hearth_protocol::anthropic::stream::{ContentDelta, DeltaUsage, MessageDeltaBody, StreamEvent};
use hearth_runtime::{FinishReason, RequestStream, SamplingParams, ValidRequest};
use hearth_text::parsers::{reasoning, tool, ParsedDelta};
use hearth_text::StopChecker;
use serde_json::{json, Map, Value};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::StreamExt;

use super::chat::{render, template_kwargs};
use super::guided::{self, Forced};
use crate::error::{ApiError, ErrorKind};
use crate::pipeline::SampleText;
use crate::state::AppState;

const BILLING_HEADER: &str = "x-anthropic-billing-header:";

fn bad(param: &str, msg: impl Into<String>) -> ApiError {
    ApiError::bad(param, msg).anthropic()
}

/// The rendered prompt and what generation needs to know about the request.
struct Prepared {
    prompt: Vec<u32>,
    tools: Vec<Value>,
    use_tools: bool,
    thinking: bool,
    /// Forced tool calls (tool_choice `any` / `tool`).
    guide: Option<hearth_text::guided::Guide>,
}

/// Which normalizations apply (from the spec's server section).
#[derive(Clone, Copy)]
struct Normalize {
    claude_code: bool,
    date_line: bool,
}

fn system_text(system: Option<&SystemPrompt>, norm: Normalize) -> Option<String> {
    let text = match system? {
        SystemPrompt::Text(t) => t.clone(),
        SystemPrompt::Blocks(blocks) => blocks
            .iter()
            .filter(|b| !(norm.claude_code && b.text.trim_start().starts_with(BILLING_HEADER)))
            .map(|b| b.text.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
    };
    let text = if norm.date_line {
        text.lines()
            .filter(|l| !l.trim_start().starts_with("Today's date is"))
            .collect::<Vec<_>>()
            .join("\n")
    } else {
        text
    };
    (!text.is_empty()).then_some(text)
}

/// Anthropic turns -> OpenAI-style template messages (tool results become tool messages).
fn template_messages(
    system: Option<&SystemPrompt>,
    messages: &[Message],
    norm: Normalize,
) -> Result<Vec<Value>, ApiError> {
    let mut out = Vec::new();
    if let Some(s) = system_text(system, norm) {
        out.push(json!({"role": "system", "content": s}));
    }
    for (i, m) in messages.iter().enumerate() {
        let (mut text, mut reasoning, mut calls) = (String::new(), String::new(), Vec::new());
        for (j, b) in m.content.blocks().iter().enumerate() {
            match b {
                ContentBlock::Text { text: t, .. } => text.push_str(t),
                ContentBlock::Thinking { thinking, .. } => reasoning.push_str(thinking),
                ContentBlock::RedactedThinking { .. } => {}
                ContentBlock::ToolUse {
                    id, name, input, ..
                } => calls.push(json!({
                    "id": id, "type": "function",
                    "function": {"name": name, "arguments": input},
                })),
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    ..
                } => out.push(json!({
                    "role": "tool", "tool_call_id": tool_use_id,
                    "content": content.as_ref().map(|c| c.text().into_owned()).unwrap_or_default(),
                })),
                ContentBlock::Image { .. } => {
                    return Err(bad(
                        &format!("messages[{i}].content[{j}]"),
                        "this model takes text only; image blocks are not supported",
                    ))
                }
            }
        }
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        if text.is_empty() && calls.is_empty() && reasoning.is_empty() && role == "user" {
            continue; // a user turn that only carried tool results
        }
        let mut v = json!({"role": role, "content": text});
        if !reasoning.is_empty() {
            v["reasoning_content"] = json!(reasoning);
        }
        if !calls.is_empty() {
            v["tool_calls"] = json!(calls);
        }
        out.push(v);
    }
    Ok(out)
}

fn template_tools(tools: Option<&Vec<Tool>>, norm: Normalize) -> Result<Vec<Value>, ApiError> {
    let mut tools: Vec<&Tool> = tools.into_iter().flatten().collect();
    if let Some(t) = tools
        .iter()
        .find(|t| t.kind.as_deref().is_some_and(|k| k != "custom"))
    {
        return Err(bad(
            "tools",
            format!("server tool `{}` ({}) is not available here; send custom tools with an input_schema", t.name, t.kind.as_deref().unwrap_or("")),
        ));
    }
    // MCP tools arrive in varying order; a stable order keeps the prompt cacheable.
    if norm.claude_code {
        tools.sort_by(|a, b| a.name.cmp(&b.name));
    }
    Ok(tools
        .into_iter()
        .map(|t| {
            json!({"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.input_schema,
            }})
        })
        .collect())
}

fn prepare(
    s: &AppState,
    model: &str,
    system: Option<&SystemPrompt>,
    messages: &[Message],
    tools: Option<&Vec<Tool>>,
    tool_choice: Option<&ToolChoice>,
    thinking: Option<&ThinkingConfig>,
) -> Result<Prepared, ApiError> {
    super::check_model(s, model).map_err(ApiError::anthropic)?;
    if messages.is_empty() {
        return Err(bad(
            "messages",
            "messages is empty; send at least one message",
        ));
    }
    let norm = Normalize {
        claude_code: s.claude_code_normalization,
        date_line: s.strip_date_line,
    };
    let tools = template_tools(tools, norm)?;
    let use_tools = match tool_choice {
        _ if tools.is_empty() => false,
        Some(ToolChoice::None) => false,
        _ => {
            if s.tool_parser.is_none() {
                return Err(bad(
                    "tools",
                    "tools need a tool parser: set engine.tool_call_parser in the spec",
                ));
            }
            true
        }
    };
    let mut kwargs: Map<String, Value> = template_kwargs(s, None);
    if let Some(t) = thinking {
        kwargs.insert("enable_thinking".into(), Value::Bool(t.is_enabled()));
    }
    let thinking = kwargs
        .get("enable_thinking")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let (forced, single) = match tool_choice {
        Some(ToolChoice::Any {
            disable_parallel_tool_use,
        }) => (Some(Forced::Any), *disable_parallel_tool_use),
        Some(ToolChoice::Tool {
            name,
            disable_parallel_tool_use,
        }) => (
            Some(Forced::Named(name.as_str())),
            *disable_parallel_tool_use,
        ),
        _ => (None, None),
    };
    let guide = match forced {
        Some(_) if tools.is_empty() => {
            return Err(bad(
                "tool_choice",
                "tool_choice `any` or `tool` needs `tools`",
            ))
        }
        Some(f) => Some(
            guided::forced_tools(s, &tools, f, single != Some(true), thinking, "tool_choice")
                .map_err(ApiError::anthropic)?,
        ),
        None => None,
    };
    let msgs = template_messages(system, messages, norm)?;
    let text = render(s, &msgs, &tools, true, &kwargs).map_err(ApiError::anthropic)?;
    let prompt = s
        .tokenizer
        .encode(&text, false)
        .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()).anthropic())?;
    Ok(Prepared {
        prompt,
        tools,
        use_tools,
        thinking,
        guide,
    })
}

pub async fn count_tokens(
    State(s): State<AppState>,
    body: Result<Json<CountTokensRequest>, JsonRejection>,
) -> Result<Json<CountTokensResponse>, ApiError> {
    let Json(req) = body.map_err(|r| ApiError::from(r).anthropic())?;
    let p = prepare(
        &s,
        &req.model,
        req.system.as_ref(),
        &req.messages,
        req.tools.as_ref(),
        req.tool_choice.as_ref(),
        req.thinking.as_ref(),
    )?;
    Ok(Json(CountTokensResponse {
        input_tokens: p.prompt.len() as u32,
    }))
}

pub async fn messages(
    State(s): State<AppState>,
    body: Result<Json<MessagesRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(req) = body.map_err(|r| ApiError::from(r).anthropic())?;
    if !req.unknown_fields().is_empty() {
        // Clients send fields we do not use (e.g. `context_management`); say so in the log only.
        tracing::debug!(fields = ?req.unknown_fields(), "ignoring unknown /v1/messages fields");
    }
    let p = prepare(
        &s,
        &req.model,
        req.system.as_ref(),
        &req.messages,
        req.tools.as_ref(),
        req.tool_choice.as_ref(),
        req.thinking.as_ref(),
    )?;
    let mut params = SamplingParams {
        temperature: 1.0,
        ..Default::default()
    };
    if let Some(t) = req.temperature {
        if !(0.0..=1.0).contains(&t) {
            return Err(bad(
                "temperature",
                format!("temperature is {t}; allowed: 0 to 1"),
            ));
        }
        params.temperature = t;
    }
    if let Some(t) = req.top_p {
        if !(t > 0.0 && t <= 1.0) {
            return Err(bad(
                "top_p",
                format!("top_p is {t}; allowed: greater than 0, at most 1"),
            ));
        }
        params.top_p = t;
    }
    params.top_k = req.top_k.unwrap_or(0) as usize;
    let stops = req.stop_sequences.clone().unwrap_or_default();
    if let Some(i) = stops.iter().position(String::is_empty) {
        return Err(bad(
            "stop_sequences",
            format!("stop_sequences[{i}] is empty"),
        ));
    }
    let max_tokens = req.max_tokens as usize;
    if max_tokens == 0 || p.prompt.len() + max_tokens > s.max_model_len {
        return Err(bad(
            "max_tokens",
            format!(
                "max_tokens is {max_tokens}; with a {}-token prompt the context of {} tokens allows 1 to {}",
                p.prompt.len(),
                s.max_model_len,
                s.max_model_len.saturating_sub(p.prompt.len())
            ),
        ));
    }
    let input = p.prompt.len();
    let valid = ValidRequest {
        prompt: p.prompt.clone(),
        params,
        max_tokens,
        n: 1,
        cache_salt: None,
        guide: p.guide.clone(),
    };
    let stream = s
        .engine
        .submit(valid)
        .map_err(|e| ApiError::from(e).anthropic())?;
    let id = format!(
        "msg_{:x}{:08x}",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0),
        std::process::id()
    );
    let gen = Gen {
        s: s.clone(),
        p,
        stops,
        id,
        input,
    };
    if req.is_stream() {
        Ok(gen.stream(stream).into_response())
    } else {
        Ok(Json(gen.collect(stream).await?).into_response())
    }
}

struct Gen {
    s: AppState,
    p: Prepared,
    stops: Vec<String>,
    id: String,
    input: usize,
}

fn stop_reason(r: FinishReason, stopped_by: Option<&str>, calls: bool) -> StopReason {
    match (r, stopped_by) {
        (_, Some(_)) => StopReason::StopSequence,
        (FinishReason::Length, _) => StopReason::MaxTokens,
        _ if calls => StopReason::ToolUse,
        _ => StopReason::EndTurn,
    }
}

fn tool_input(arguments: &str) -> Value {
    serde_json::from_str(arguments).unwrap_or_else(|_| json!({}))
}

impl Gen {
    fn text<'t>(&self, tok: &'t hearth_text::Tokenizer) -> Result<SampleText<'t>, ApiError> {
        let stop = StopChecker::new(self.stops.clone(), Vec::new(), false)
            .map_err(|e| bad("stop_sequences", e.to_string()))?;
        let reasoning = match &self.s.reasoning_parser {
            Some(n) => Some(
                reasoning::reasoning_parser(n, self.p.thinking)
                    .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()).anthropic())?,
            ),
            None => None,
        };
        let tools = match (&self.s.tool_parser, self.p.use_tools) {
            (Some(n), true) => Some(
                tool::tool_parser(n, &self.p.tools)
                    .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()).anthropic())?,
            ),
            _ => None,
        };
        Ok(SampleText::new(tok, stop, reasoning, tools, true))
    }

    fn usage(&self, output: usize, cached: usize) -> Usage {
        Usage {
            input_tokens: (self.input - cached) as u32,
            output_tokens: output as u32,
            cache_creation_input_tokens: Some(0),
            cache_read_input_tokens: Some(cached as u32),
        }
    }

    async fn collect(self, mut stream: RequestStream) -> Result<MessagesResponse, ApiError> {
        let tok = self.s.tokenizer.clone();
        let mut t = self.text(&tok)?;
        let mut acc = ParsedDelta::default();
        let (mut reason, mut output, mut cached) = (FinishReason::Abort, 0, 0);
        while let Some(o) = stream.next().await {
            acc.append(
                t.push(o.token)
                    .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()).anthropic())?,
            );
            let ended = o.finish.or(t.stopped.as_ref().map(|_| FinishReason::Stop));
            if let Some(r) = ended {
                acc.append(t.finish());
                reason = r;
                if let Some(m) = o.metrics {
                    output = m.generated_tokens;
                    cached = m.cached_tokens;
                    self.s.metrics.observe(&m, r);
                }
                break;
            }
        }
        let mut content = Vec::new();
        if !acc.reasoning.is_empty() {
            content.push(ContentBlock::Thinking {
                thinking: acc.reasoning,
                signature: String::new(),
            });
        }
        if !acc.content.is_empty() {
            content.push(ContentBlock::text(acc.content));
        }
        for c in t.tool_calls() {
            content.push(ContentBlock::tool_use(
                c.id.clone(),
                c.name.clone(),
                tool_input(&c.arguments),
            ));
        }
        let stopped_by = t
            .stopped
            .as_ref()
            .map(|crate::pipeline::TextStop::String(s)| s.clone());
        let mut resp =
            MessagesResponse::new(self.id.clone(), self.s.model_name.to_string(), content);
        resp.stop_reason = Some(stop_reason(
            reason,
            stopped_by.as_deref(),
            !t.tool_calls().is_empty(),
        ));
        resp.stop_sequence = stopped_by;
        resp.usage = self.usage(output, cached);
        Ok(resp)
    }

    fn stream(
        self,
        mut stream: RequestStream,
    ) -> Sse<impl tokio_stream::Stream<Item = Result<Event, Infallible>>> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
        tokio::spawn(async move {
            let send = |e: StreamEvent| {
                let data = serde_json::to_string(&e).unwrap_or_default();
                tx.send(Event::default().event(e.event_name()).data(data))
                    .is_ok()
            };
            let tok = self.s.tokenizer.clone();
            let mut t = match self.text(&tok) {
                Ok(t) => t,
                Err(e) => {
                    let _ = tx.send(Event::default().event("error").data(e.body().to_string()));
                    return;
                }
            };
            let mut start =
                MessagesResponse::new(self.id.clone(), self.s.model_name.to_string(), Vec::new());
            start.usage = self.usage(0, 0);
            if !send(StreamEvent::MessageStart { message: start }) {
                return;
            }
            // The open block: (index, is_thinking).
            let mut open: Option<(u32, bool)> = None;
            let mut next_index = 0u32;
            let (mut reason, mut output) = (FinishReason::Abort, 0);
            while let Some(o) = stream.next().await {
                let mut d = t.push(o.token).unwrap_or_default();
                let ended = o.finish.or(t.stopped.as_ref().map(|_| FinishReason::Stop));
                if ended.is_some() {
                    d.append(t.finish());
                }
                for (is_thinking, text) in [(true, d.reasoning), (false, d.content)] {
                    if text.is_empty() {
                        continue;
                    }
                    if open.map(|(_, k)| k) != Some(is_thinking) {
                        if let Some((i, _)) = open.take() {
                            send(StreamEvent::ContentBlockStop { index: i });
                        }
                        let block = if is_thinking {
                            ContentBlock::Thinking {
                                thinking: String::new(),
                                signature: String::new(),
                            }
                        } else {
                            ContentBlock::text("")
                        };
                        send(StreamEvent::ContentBlockStart {
                            index: next_index,
                            content_block: block,
                        });
                        open = Some((next_index, is_thinking));
                        next_index += 1;
                    }
                    let index = open.map_or(0, |(i, _)| i);
                    let delta = if is_thinking {
                        ContentDelta::ThinkingDelta { thinking: text }
                    } else {
                        ContentDelta::TextDelta { text }
                    };
                    if !send(StreamEvent::ContentBlockDelta { index, delta }) {
                        return; // client gone: dropping `stream` aborts the request
                    }
                }
                for c in d.tool_calls {
                    if let Some((i, _)) = open.take() {
                        send(StreamEvent::ContentBlockStop { index: i });
                    }
                    let id = c.id.unwrap_or_default();
                    let name = c.name.unwrap_or_default();
                    send(StreamEvent::ContentBlockStart {
                        index: next_index,
                        content_block: ContentBlock::tool_use(id, name, json!({})),
                    });
                    send(StreamEvent::ContentBlockDelta {
                        index: next_index,
                        delta: ContentDelta::InputJsonDelta {
                            partial_json: c.arguments,
                        },
                    });
                    send(StreamEvent::ContentBlockStop { index: next_index });
                    next_index += 1;
                }
                if let Some(r) = ended {
                    reason = r;
                    if let Some(m) = o.metrics {
                        output = m.generated_tokens;
                        self.s.metrics.observe(&m, r);
                    }
                    break;
                }
            }
            if let Some((i, _)) = open.take() {
                send(StreamEvent::ContentBlockStop { index: i });
            }
            let stopped_by = t
                .stopped
                .as_ref()
                .map(|crate::pipeline::TextStop::String(s)| s.clone());
            let delta = MessageDeltaBody {
                stop_reason: Some(stop_reason(
                    reason,
                    stopped_by.as_deref(),
                    !t.tool_calls().is_empty(),
                )),
                stop_sequence: stopped_by,
            };
            send(StreamEvent::MessageDelta {
                delta,
                usage: DeltaUsage {
                    output_tokens: output as u32,
                    ..Default::default()
                },
            });
            send(StreamEvent::MessageStop);
        });
        Sse::new(UnboundedReceiverStream::new(rx).map(Ok))
    }
}
