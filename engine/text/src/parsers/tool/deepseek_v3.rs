//! DeepSeek-V3 / R1 tool calls (`deepseek_v3`).
//!
//! ```text
//! <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//! ```json
//! {...}
//! ```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//! ```
//! The code fence is optional here (models drop it now and then).

use super::schema::{check_name, json_arguments, ToolSchemas};
use super::stream::{CallSyntax, Markers, ParsedCall};

/// The block markers DeepSeek V3 and V3.1 share.
pub(super) const MARKERS: Markers = Markers {
    open: "<｜tool▁calls▁begin｜>",
    block: Some(("<｜tool▁call▁begin｜>", "<｜tool▁calls▁end｜>")),
    call_end: "<｜tool▁call▁end｜>",
};

pub(super) const TOOL_SEP: &str = "<｜tool▁sep｜>";

pub(super) struct DeepSeekV3;

impl CallSyntax for DeepSeekV3 {
    fn markers(&self) -> Markers {
        MARKERS
    }

    fn parse_call(&self, body: &str, _schemas: &ToolSchemas) -> Result<ParsedCall, String> {
        let (kind, rest) = body.split_once(TOOL_SEP).ok_or(format!("no {TOOL_SEP}"))?;
        if kind.trim() != "function" {
            return Err(format!("call type `{}` is not `function`", kind.trim()));
        }
        let (name, args) = rest.split_once('\n').unwrap_or((rest, ""));
        let name = check_name(name)?;
        let args = args.trim();
        let args = args
            .strip_prefix("```json")
            .or_else(|| args.strip_prefix("```"))
            .unwrap_or(args);
        let args = args.trim_end().strip_suffix("```").unwrap_or(args);
        Ok(ParsedCall {
            name,
            arguments: json_arguments(args)?,
        })
    }
}
