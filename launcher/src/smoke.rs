//! The smoke test `up` runs once the engine is ready: one chat request whose answer must have
//! content (and reasoning, when the spec has a reasoning parser with thinking on), and, when the
//! spec enables tool calling, one request whose answer must be a parsed tool call.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use hearth_protocol::openai::{
    ChatCompletionRequest, ChatCompletionResponse, ChatMessage, FunctionDefinition, Tool, ToolType,
};
use hearth_spec::ResolvedSpec;
use serde_json::json;

/// What the smoke test saw.
#[derive(Debug)]
pub struct Smoke {
    pub answer: String,
    pub reasoning: Option<String>,
    /// `name(arguments)` of the tool call, when tools were tested.
    pub tool_call: Option<String>,
    pub took: Duration,
}

const PROMPT: &str = "What is the capital of France? Answer in one short sentence.";

pub async fn run(url: &str, spec: &ResolvedSpec) -> anyhow::Result<Smoke> {
    let t = Instant::now();
    // The reasoning parser whose output must be there: only with thinking on.
    let thinking = spec
        .engine
        .reasoning_parser
        .filter(|_| spec.engine.enable_thinking)
        .map(|p| p.as_str());
    let mut req = request(spec, PROMPT);
    // Thinking models spend tokens before they answer.
    req.max_tokens = Some(if thinking.is_some() { 1024 } else { 48 });
    let resp = send(url, spec, &req).await?;
    let (answer, reasoning) = check_answer(&resp, thinking)?;
    let tool_call = if spec.engine.tool_call_parser.is_some() && spec.engine.enable_auto_tool_choice
    {
        let mut req = request(
            spec,
            "What is the weather in Paris right now? Use the get_weather tool.",
        );
        req.max_tokens = Some(if thinking.is_some() { 1024 } else { 128 });
        req.tools = Some(vec![weather_tool()]);
        Some(check_tool_call(&send(url, spec, &req).await?)?)
    } else {
        None
    };
    Ok(Smoke {
        answer,
        reasoning,
        tool_call,
        took: t.elapsed(),
    })
}

fn request(spec: &ResolvedSpec, prompt: &str) -> ChatCompletionRequest {
    let mut req = ChatCompletionRequest {
        model: spec.served_model_name.clone(),
        messages: vec![ChatMessage::user(prompt)],
        ..Default::default()
    };
    req.sampling.temperature = Some(0.0);
    req
}

fn weather_tool() -> Tool {
    Tool {
        kind: ToolType::Function,
        function: FunctionDefinition {
            name: "get_weather".into(),
            description: Some("Current weather in a city".into()),
            parameters: Some(json!({
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"]
            })),
            strict: None,
        },
    }
}

async fn send(
    url: &str,
    spec: &ResolvedSpec,
    req: &ChatCompletionRequest,
) -> anyhow::Result<ChatCompletionResponse> {
    let mut http = reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .timeout(Duration::from_secs(300))
        .json(req);
    if let Some(key) = &spec.server.api_key {
        http = http.bearer_auth(key.expose());
    }
    let resp = http
        .send()
        .await
        .context("smoke test: sending a chat request")?;
    let status = resp.status();
    let body = resp
        .text()
        .await
        .context("smoke test: reading the answer")?;
    if !status.is_success() {
        bail!("smoke test: /v1/chat/completions answered {status}: {body}");
    }
    serde_json::from_str(&body)
        .with_context(|| format!("smoke test: not a chat completion: {body}"))
}

/// The answer's content (and reasoning), which must not be empty.
fn check_answer(
    resp: &ChatCompletionResponse,
    thinking: Option<&str>,
) -> anyhow::Result<(String, Option<String>)> {
    let Some(choice) = resp.choices.first() else {
        bail!("smoke test: the answer has no choices");
    };
    let msg = &choice.message;
    let content = msg.content.clone().unwrap_or_default();
    let reasoning = msg.reasoning_content.clone().or(msg.reasoning.clone());
    if content.trim().is_empty() {
        let finish = choice
            .finish_reason
            .and_then(|r| serde_json::to_value(r).ok())
            .and_then(|v| v.as_str().map(str::to_owned));
        let why = match (finish, &reasoning) {
            (Some(r), Some(_)) => {
                format!(" (finish_reason {r}: the thinking used up max_tokens before any answer)")
            }
            (Some(r), None) => format!(" (finish_reason {r})"),
            _ => String::new(),
        };
        bail!("smoke test: the chat answer has empty content{why}");
    }
    if let Some(parser) = thinking {
        if reasoning.as_deref().is_none_or(|r| r.trim().is_empty()) {
            bail!(
                "smoke test: thinking is on (reasoning_parser {parser}), but the answer has no \
                 reasoning"
            );
        }
    }
    Ok((content, reasoning))
}

/// The first tool call as `name(arguments)`; its arguments must be a JSON object.
fn check_tool_call(resp: &ChatCompletionResponse) -> anyhow::Result<String> {
    let msg = resp.choices.first().map(|c| &c.message);
    let Some(call) = msg
        .and_then(|m| m.tool_calls.as_ref())
        .and_then(|t| t.first())
    else {
        let content = msg.and_then(|m| m.content.clone()).unwrap_or_default();
        bail!("smoke test: asked for a get_weather tool call, got none; content: {content:?}");
    };
    let args: serde_json::Value =
        serde_json::from_str(&call.function.arguments).with_context(|| {
            format!(
                "smoke test: tool call arguments are not JSON: {}",
                call.function.arguments
            )
        })?;
    if !args.is_object() {
        bail!("smoke test: tool call arguments are not a JSON object: {args}");
    }
    Ok(format!(
        "{}({})",
        call.function.name, call.function.arguments
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(message: serde_json::Value, finish: &str) -> ChatCompletionResponse {
        serde_json::from_value(json!({
            "id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}]
        }))
        .unwrap()
    }

    #[test]
    fn content_must_not_be_empty() {
        let ok = resp(json!({"role": "assistant", "content": "Paris."}), "stop");
        assert_eq!(check_answer(&ok, None).unwrap().0, "Paris.");
        let empty = resp(json!({"role": "assistant", "content": " "}), "length");
        let e = check_answer(&empty, None).unwrap_err().to_string();
        assert!(
            e.contains("empty content") && e.contains("finish_reason length"),
            "{e}"
        );
        let eaten = resp(
            json!({"role": "assistant", "content": "", "reasoning_content": "hmm"}),
            "length",
        );
        let e = check_answer(&eaten, Some("qwen3")).unwrap_err().to_string();
        assert!(e.contains("thinking used up max_tokens"), "{e}");
    }

    #[test]
    fn thinking_needs_reasoning() {
        let plain = resp(json!({"role": "assistant", "content": "Paris."}), "stop");
        assert!(check_answer(&plain, Some("qwen3")).is_err());
        let both = resp(
            json!({"role": "assistant", "content": "Paris.", "reasoning_content": "France..."}),
            "stop",
        );
        assert_eq!(
            check_answer(&both, Some("qwen3")).unwrap().1.as_deref(),
            Some("France...")
        );
    }

    #[test]
    fn tool_calls_must_parse() {
        let good = resp(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}),
            "tool_calls",
        );
        assert_eq!(
            check_tool_call(&good).unwrap(),
            "get_weather({\"city\": \"Paris\"})"
        );
        let bad = resp(
            json!({"role": "assistant", "tool_calls": [{"id": "1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{city"}}]}),
            "tool_calls",
        );
        assert!(check_tool_call(&bad).is_err());
        let none = resp(json!({"role": "assistant", "content": "sunny"}), "stop");
        assert!(check_tool_call(&none)
            .unwrap_err()
            .to_string()
            .contains("got none"));
    }
}
