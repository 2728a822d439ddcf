//! Guided decoding requests: `response_format` (json_object, json_schema) and forced tool calls
//! (OpenAI `tool_choice` required / named, Anthropic `any` / `tool`) become a `Guide` the engine
//! enforces token by token. Refusals name the field and what is supported.

use std::sync::Arc;

use hearth_text::guided::{
    after_reasoning, json_object_grammar, json_schema_grammar, tool_call_grammar, Grammar, Guide,
    ReasoningPrefix, ToolGrammarError, ToolSpec,
};
use serde_json::Value;

use crate::error::ApiError;
use crate::state::AppState;

/// Which tool calls a request forces.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Forced<'a> {
    /// Some call of any tool (OpenAI `required`, Anthropic `any`).
    Any,
    /// A call of this tool.
    Named(&'a str),
}

/// The guide for `response_format`, or None for plain text.
pub(crate) fn response_format(
    s: &AppState,
    format: Option<&Value>,
    thinking: bool,
) -> Result<Option<Guide>, ApiError> {
    let Some(format) = format else {
        return Ok(None);
    };
    let kind = format.get("type").and_then(Value::as_str);
    let grammar = match kind {
        Some("text") => return Ok(None),
        Some("json_object") => json_object_grammar(),
        Some("json_schema") => {
            let schema = format
                .get("json_schema")
                .and_then(|j| j.get("schema"))
                .ok_or_else(|| {
                    ApiError::bad(
                        "response_format",
                        "response_format.json_schema.schema is missing; send \
                         {\"type\": \"json_schema\", \"json_schema\": {\"name\": ..., \"schema\": {...}}}",
                    )
                })?;
            json_schema_grammar(schema).map_err(|e| {
                ApiError::bad(
                    "response_format",
                    format!("response_format.json_schema.schema: {e}"),
                )
            })?
        }
        other => {
            return Err(ApiError::bad(
                "response_format",
                format!(
                    "response_format.type is {}; allowed: text, json_object, json_schema",
                    other.map_or_else(|| "missing".to_owned(), |t| format!("`{t}`"))
                ),
            ))
        }
    };
    Ok(Some(guide(s, grammar, thinking)))
}

/// The guide that forces tool calls of `tools` (OpenAI tool objects) in the spec's tool-call
/// format. `field` names the request field for errors (`tool_choice`).
pub(crate) fn forced_tools(
    s: &AppState,
    tools: &[Value],
    forced: Forced<'_>,
    parallel: bool,
    thinking: bool,
    field: &str,
) -> Result<Guide, ApiError> {
    let parser = s.tool_parser.as_deref().ok_or_else(|| {
        ApiError::bad(
            field,
            "forcing tool calls needs a tool parser: set engine.tool_call_parser in the spec",
        )
    })?;
    let mut specs: Vec<ToolSpec> = tools.iter().filter_map(ToolSpec::from_openai).collect();
    let parallel = match forced {
        Forced::Any => parallel,
        Forced::Named(name) => {
            specs.retain(|t| t.name == name);
            if specs.is_empty() {
                let names: Vec<String> = tools
                    .iter()
                    .filter_map(ToolSpec::from_openai)
                    .map(|t| t.name)
                    .collect();
                return Err(ApiError::bad(
                    field,
                    format!(
                        "{field} names the function `{name}`, which is not among the tools ({})",
                        names.join(", ")
                    ),
                ));
            }
            false
        }
    };
    let grammar = tool_call_grammar(parser, &specs, parallel).map_err(|e| match e {
        ToolGrammarError::Schema { .. } => ApiError::bad("tools", e.to_string()),
        _ => ApiError::bad(field, e.to_string()),
    })?;
    Ok(guide(s, grammar, thinking))
}

/// With a reasoning parser, the grammar applies after the model's thinking.
fn guide(s: &AppState, grammar: Grammar, thinking: bool) -> Guide {
    let prefix = match s.reasoning_parser.as_deref() {
        Some("qwen3") => Some(ReasoningPrefix::Explicit),
        Some(_) if thinking => Some(ReasoningPrefix::Implicit),
        _ => None,
    };
    let grammar = match prefix {
        Some(p) => after_reasoning(grammar, p),
        None => grammar,
    };
    Guide {
        grammar: Arc::new(grammar),
        vocab: s.guided_vocab.clone(),
    }
}
