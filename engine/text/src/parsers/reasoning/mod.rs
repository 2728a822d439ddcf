//! Reasoning parsers: split generated text into reasoning (`<think>...</think>`) and content.
//!
//! The formats differ only in whether reasoning may start without a `<think>` tag (the chat
//! template already put it in the prompt) and which tool-call marker ends reasoning early, so
//! one state machine ([`think::ThinkParser`]) runs them all from a per-format [`think::ThinkSpec`].
//! A tool-call marker inside reasoning ends the reasoning there: the tool parser downstream must
//! see it (the field notes report parsers that swallowed `<tool_call>`).

mod deepseek_r1;
mod glm45;
mod qwen3;
mod think;

use super::ParserError;

/// Splits one sequence's generated text into reasoning and content.
pub trait ReasoningParser: Send {
    /// Feeds newly generated text; returns (reasoning, content) that can be sent now.
    fn push(&mut self, delta: &str) -> (String, String);
    /// End of generation: flushes held-back text as (reasoning, content).
    fn finish(&mut self) -> (String, String);
}

/// Names accepted by [`reasoning_parser`] (vLLM's `--reasoning-parser` names).
pub const REASONING_PARSERS: &[&str] = &["glm45", "deepseek_r1", "deepseek_v3", "qwen3"];

/// The parser for `name`. `thinking_enabled` is the request's `enable_thinking` (default true):
/// formats whose template opens `<think>` in the prompt treat all output as content without it.
pub fn reasoning_parser(
    name: &str,
    thinking_enabled: bool,
) -> Result<Box<dyn ReasoningParser>, ParserError> {
    let spec = match name {
        "glm45" => glm45::spec(),
        "deepseek_r1" | "deepseek_v3" => deepseek_r1::spec(),
        // Qwen3 opens `<think>` itself, so its output says whether it thinks.
        "qwen3" => return Ok(Box::new(think::ThinkParser::new(qwen3::spec()))),
        _ => {
            return Err(ParserError::Unknown {
                kind: "reasoning",
                name: name.to_owned(),
                allowed: REASONING_PARSERS.join(", "),
            })
        }
    };
    if thinking_enabled {
        Ok(Box::new(think::ThinkParser::new(spec)))
    } else {
        Ok(Box::new(Passthrough))
    }
}

/// Thinking disabled: everything is content.
struct Passthrough;

impl ReasoningParser for Passthrough {
    fn push(&mut self, delta: &str) -> (String, String) {
        (String::new(), delta.to_owned())
    }

    fn finish(&mut self) -> (String, String) {
        (String::new(), String::new())
    }
}
