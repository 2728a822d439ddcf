//! GLM-4.5 / 4.6 / 4.7 reasoning (`--reasoning-parser glm45`).
//!
//! GLM-4.7's template ends the prompt with `<think>` (or `</think>` when thinking is off), GLM-4.6
//! lets the model open it; either way everything up to `</think>` is reasoning. A `<tool_call>`
//! before `</think>` ends the reasoning and goes to the tool parser.

use super::think::ThinkSpec;

pub(super) fn spec() -> ThinkSpec {
    ThinkSpec {
        implicit_start: true,
        content_markers: &["<tool_call>"],
    }
}
