//! Tool-call parsers: find tool calls in generated content and turn them into OpenAI calls.
//!
//! Each format file describes its markers and how to parse one call's body ([`stream::CallSyntax`]);
//! [`stream::StreamParser`] does the streaming for all of them: it emits content, holds back
//! text that could still become a call marker, buffers a call until its end marker and then
//! emits it whole. Argument values written as text are typed by the request's tool schemas
//! ([`schema::ToolSchemas`]).

mod deepseek_v3;
mod deepseek_v31;
mod glm4;
mod hermes;
mod qwen3_coder;
mod schema;
mod stream;

use super::{ParsedDelta, ParserError, ToolCall};
use stream::StreamParser;

/// Finds tool calls in one sequence's generated content.
pub trait ToolParser: Send {
    /// Feeds newly generated content (reasoning already split off); returns content to send now
    /// and finished tool calls. Text that might start a tool call is held back. `reasoning` is
    /// always empty.
    fn push(&mut self, delta: &str) -> ParsedDelta;
    /// End of generation: flushes held-back text. A half-written or unparsable tool call comes
    /// back as content and counts as a failure.
    fn finish(&mut self) -> ParsedDelta;
    /// Complete calls parsed so far (for non-streaming responses).
    fn calls(&self) -> &[ToolCall];
    /// Parse failures so far; the server counts and logs them.
    fn failures(&self) -> usize;
    /// One message per failure (the call's text and what was wrong), for the server's log.
    fn failure_reasons(&self) -> &[String];
}

/// Names accepted by [`tool_parser`] (vLLM's `--tool-call-parser` names).
pub const TOOL_PARSERS: &[&str] = &[
    "glm47",
    "glm45",
    "hermes",
    "deepseek_v3",
    "deepseek_v31",
    "qwen3_coder",
];

/// The parser for `name`. `tools` is the request's OpenAI `tools` array; parameter schemas type
/// the argument values of the text-valued formats (glm45/glm47, qwen3_coder).
pub fn tool_parser(
    name: &str,
    tools: &[serde_json::Value],
) -> Result<Box<dyn ToolParser>, ParserError> {
    let schemas = schema::ToolSchemas::new(tools);
    Ok(match name {
        "glm47" | "glm45" => Box::new(StreamParser::new(glm4::Glm4, schemas)),
        "hermes" => Box::new(StreamParser::new(hermes::Hermes, schemas)),
        "deepseek_v3" => Box::new(StreamParser::new(deepseek_v3::DeepSeekV3, schemas)),
        "deepseek_v31" => Box::new(StreamParser::new(deepseek_v31::DeepSeekV31, schemas)),
        "qwen3_coder" => Box::new(StreamParser::new(qwen3_coder::Qwen3Coder, schemas)),
        _ => {
            return Err(ParserError::Unknown {
                kind: "tool",
                name: name.to_owned(),
                allowed: TOOL_PARSERS.join(", "),
            })
        }
    })
}

/// Non-streaming: runs all of `text` through `push` + `finish`; returns (content, calls).
pub fn parse_complete(p: &mut dyn ToolParser, text: &str) -> (String, Vec<ToolCall>) {
    let mut out = p.push(text);
    out.append(p.finish());
    (out.content, p.calls().to_vec())
}
