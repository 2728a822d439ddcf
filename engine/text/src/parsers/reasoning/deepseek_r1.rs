//! DeepSeek-R1 and DeepSeek-V3.1+ thinking (`deepseek_r1`, `deepseek_v3`).
//!
//! The V3.1 template ends the prompt with `<think>` (thinking) or `<think></think>` (not), R1
//! may or may not repeat the `<think>`: reasoning runs until `</think>`. A tool-calls block
//! before `</think>` ends the reasoning and goes to the tool parser.

use super::think::ThinkSpec;

pub(super) fn spec() -> ThinkSpec {
    ThinkSpec {
        implicit_start: true,
        content_markers: &["<｜tool▁calls▁begin｜>"],
    }
}
