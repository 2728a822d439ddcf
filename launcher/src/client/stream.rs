//! One streamed generation (`stream: true` with `include_usage`) read to its end: the text,
//! reasoning and tool calls it produced, why it finished, its usage and when each token
//! arrived. Chat completions hand each piece to a callback as it comes, so `chat` can print
//! while `bench` and `eval` only keep the outcome.

use futures_util::StreamExt;
use hearth_protocol::openai::{
    ChatCompletionChunk, ChatCompletionRequest, CompletionChunk, CompletionRequest, ErrorResponse,
    FinishReason, FunctionCall, StreamOptions, ToolCall, ToolCallDelta, ToolType, Usage,
};

use super::http::{self, RequestError};
use super::sse::SseLines;
use super::timing::{Clock, Timing};
use super::Target;

/// A piece of a chat answer as it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'a> {
    Reasoning(&'a str),
    Content(&'a str),
}

/// A finished streamed answer.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub content: String,
    pub reasoning: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<FinishReason>,
    /// The server's usage chunk, when it sent one.
    pub usage: Option<Usage>,
    pub timing: Timing,
}

impl Outcome {
    /// Completion tokens from usage, else the number of token chunks.
    pub fn completion_tokens(&self) -> u32 {
        self.usage.map_or_else(
            || u32::try_from(self.timing.token_times.len()).unwrap_or(u32::MAX),
            |u| u.completion_tokens,
        )
    }

    pub fn prompt_tokens(&self) -> Option<u32> {
        self.usage.map(|u| u.prompt_tokens)
    }

    pub fn decode_tok_s(&self) -> Option<f64> {
        self.timing.decode_tok_s(self.completion_tokens())
    }

    pub fn prefill_tok_s(&self) -> Option<f64> {
        self.timing.prefill_tok_s(self.prompt_tokens()?)
    }
}

/// Streams a chat completion, calling `on_piece` with reasoning and content as they arrive.
pub async fn chat(
    http: &reqwest::Client,
    t: &Target,
    req: &ChatCompletionRequest,
    mut on_piece: impl FnMut(Piece<'_>),
) -> Result<Outcome, RequestError> {
    let mut req = req.clone();
    req.stream = Some(true);
    req.stream_options = Some(with_usage());
    let mut calls = ToolCalls::default();
    let mut out = read(http, t, "/v1/chat/completions", &req, |data, out| {
        let chunk: ChatCompletionChunk = serde_json::from_str(data).ok()?;
        let mut tokens = false;
        for choice in &chunk.choices {
            let d = &choice.delta;
            if let Some(r) = d.reasoning_content.as_deref().or(d.reasoning.as_deref()) {
                tokens |= !r.is_empty();
                out.reasoning.push_str(r);
                on_piece(Piece::Reasoning(r));
            }
            if let Some(c) = &d.content {
                tokens |= !c.is_empty();
                out.content.push_str(c);
                on_piece(Piece::Content(c));
            }
            for call in d.tool_calls.iter().flatten() {
                tokens = true;
                calls.add(call);
            }
            out.finish_reason = choice.finish_reason.or(out.finish_reason);
        }
        out.usage = chunk.usage.or(out.usage);
        Some(tokens)
    })
    .await?;
    out.tool_calls = calls.finish();
    Ok(out)
}

/// Streams a raw completion (text or token-id prompt).
pub async fn completion(
    http: &reqwest::Client,
    t: &Target,
    req: &CompletionRequest,
) -> Result<Outcome, RequestError> {
    let mut req = req.clone();
    req.stream = Some(true);
    req.stream_options = Some(with_usage());
    read(http, t, "/v1/completions", &req, |data, out| {
        let chunk: CompletionChunk = serde_json::from_str(data).ok()?;
        let mut tokens = false;
        for choice in &chunk.choices {
            tokens |= !choice.text.is_empty();
            out.content.push_str(&choice.text);
            out.finish_reason = choice.finish_reason.or(out.finish_reason);
        }
        out.usage = chunk.usage.or(out.usage);
        Some(tokens)
    })
    .await
}

fn with_usage() -> StreamOptions {
    StreamOptions {
        include_usage: Some(true),
        continuous_usage_stats: None,
    }
}

/// Sends the request and feeds each `data:` payload to `take`, which folds it into the
/// outcome and says whether it carried generated tokens (`None`: not a chunk of this kind).
async fn read<B: serde::Serialize>(
    http: &reqwest::Client,
    t: &Target,
    path: &str,
    body: &B,
    mut take: impl FnMut(&str, &mut Outcome) -> Option<bool>,
) -> Result<Outcome, RequestError> {
    let url = format!("{}{path}", t.url);
    let mut clock = Clock::start();
    let resp = http::post(http, t, path, body).await?;
    let mut out = Outcome::default();
    let mut lines = SseLines::default();
    let mut body = resp.bytes_stream();
    let broken = |message: String| RequestError::Stream {
        url: url.clone(),
        message,
    };
    while let Some(bytes) = body.next().await {
        let bytes = bytes.map_err(|e| broken(e.to_string()))?;
        for data in lines.push(&bytes) {
            if data == "[DONE]" {
                out.timing = clock.finish();
                return Ok(out);
            }
            match take(&data, &mut out) {
                Some(true) => clock.token(),
                Some(false) => {}
                None => {
                    let message = match serde_json::from_str::<ErrorResponse>(&data) {
                        Ok(e) => e.error.message,
                        Err(_) => format!("not a chunk: {data}"),
                    };
                    return Err(broken(message));
                }
            }
        }
    }
    // Some servers end without [DONE]; what arrived is the answer.
    out.timing = clock.finish();
    Ok(out)
}

/// Tool-call fragments joined by index: the first carries id and name, later ones append
/// to the arguments.
#[derive(Debug, Default)]
struct ToolCalls {
    calls: Vec<(u32, ToolCall)>,
}

impl ToolCalls {
    fn add(&mut self, d: &ToolCallDelta) {
        let i = match self.calls.iter().position(|(i, _)| *i == d.index) {
            Some(i) => i,
            None => {
                self.calls.push((
                    d.index,
                    ToolCall {
                        id: String::new(),
                        kind: ToolType::Function,
                        function: FunctionCall {
                            name: String::new(),
                            arguments: String::new(),
                        },
                    },
                ));
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[i].1;
        if let Some(id) = &d.id {
            call.id.clone_from(id);
        }
        if let Some(name) = &d.function.name {
            call.function.name.push_str(name);
        }
        if let Some(args) = &d.function.arguments {
            call.function.arguments.push_str(args);
        }
    }

    fn finish(mut self) -> Vec<ToolCall> {
        self.calls.sort_by_key(|(i, _)| *i);
        self.calls.into_iter().map(|(_, c)| c).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_protocol::openai::FunctionCallDelta;

    #[test]
    fn tool_call_fragments_join_by_index() {
        let mut calls = ToolCalls::default();
        let frag = |index, id: Option<&str>, name: Option<&str>, args: &str| ToolCallDelta {
            index,
            id: id.map(str::to_owned),
            kind: None,
            function: FunctionCallDelta {
                name: name.map(str::to_owned),
                arguments: Some(args.to_owned()),
            },
        };
        calls.add(&frag(1, Some("b"), Some("time"), "{}"));
        calls.add(&frag(0, Some("a"), Some("weather"), "{\"city\":"));
        calls.add(&frag(0, None, None, "\"Paris\"}"));
        let got = calls.finish();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].id, "a");
        assert_eq!(got[0].function.name, "weather");
        assert_eq!(got[0].function.arguments, "{\"city\":\"Paris\"}");
        assert_eq!(got[1].function.name, "time");
    }
}
