//! Qwen3 reasoning (`--reasoning-parser qwen3`).
//!
//! Qwen3 opens `<think>` itself; output that does not start with it is all content. With
//! `enable_thinking=false` the model may still emit an empty `<think>\n\n</think>\n\n`, which
//! comes out as no reasoning and no leading newlines.

use super::think::ThinkSpec;

pub(super) fn spec() -> ThinkSpec {
    ThinkSpec {
        implicit_start: false,
        content_markers: &["<tool_call>"],
    }
}
