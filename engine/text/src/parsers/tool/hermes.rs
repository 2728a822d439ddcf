//! Hermes-style JSON tool calls (`hermes`: Qwen2.5, Qwen3, Hermes models).
//!
//! ```text
//! <tool_call>
//! {"name": "NAME", "arguments": {...}}
//! </tool_call>
//! ```
//! `arguments` may also be spelled `parameters`, be missing (no arguments) or be a string that
//! holds the JSON object.

use super::schema::{check_name, json_arguments, ToolSchemas};
use super::stream::{CallSyntax, Markers, ParsedCall};
use serde_json::Value;

pub(super) struct Hermes;

impl CallSyntax for Hermes {
    fn markers(&self) -> Markers {
        Markers {
            open: "<tool_call>",
            block: None,
            call_end: "</tool_call>",
        }
    }

    fn parse_call(&self, body: &str, _schemas: &ToolSchemas) -> Result<ParsedCall, String> {
        let call: Value =
            serde_json::from_str(body.trim()).map_err(|e| format!("not valid JSON: {e}"))?;
        let name = call
            .get("name")
            .and_then(Value::as_str)
            .ok_or("no \"name\" string")?;
        let name = check_name(name)?;
        let arguments = match call.get("arguments").or_else(|| call.get("parameters")) {
            None | Some(Value::Null) => "{}".to_owned(),
            Some(Value::String(text)) => json_arguments(text)?,
            Some(v @ Value::Object(_)) => v.to_string(),
            Some(other) => return Err(format!("arguments are not a JSON object: {other}")),
        };
        Ok(ParsedCall { name, arguments })
    }
}
