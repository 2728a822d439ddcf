//! DeepSeek-V3.1 / V3.2 tool calls (`deepseek_v31`).
//!
//! ```text
//! <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//! ```
//! Same block markers as V3, no call type and no code fence.

use super::deepseek_v3::{MARKERS, TOOL_SEP};
use super::schema::{check_name, json_arguments, ToolSchemas};
use super::stream::{CallSyntax, Markers, ParsedCall};

pub(super) struct DeepSeekV31;

impl CallSyntax for DeepSeekV31 {
    fn markers(&self) -> Markers {
        MARKERS
    }

    fn parse_call(&self, body: &str, _schemas: &ToolSchemas) -> Result<ParsedCall, String> {
        let (name, args) = body.split_once(TOOL_SEP).ok_or(format!("no {TOOL_SEP}"))?;
        Ok(ParsedCall {
            name: check_name(name)?,
            arguments: json_arguments(args)?,
        })
    }
}
