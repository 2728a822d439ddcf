//! Qwen3-Coder XML tool calls (`qwen3_coder`).
//!
//! ```text
//! <tool_call>
//! <function=NAME>
//! <parameter=KEY>
//! VALUE
//! </parameter>
//! </function>
//! </tool_call>
//! ```
//! One newline on each side of a value belongs to the layout, not the value. Values are text,
//! typed by the tool's schema. A missing `</parameter>` (seen in the wild) ends the value at the
//! next `<parameter=` or at `</function>`.

use super::schema::{check_name, object_string, ToolSchemas};
use super::stream::{CallSyntax, Markers, ParsedCall};

pub(super) struct Qwen3Coder;

const PARAM_OPEN: &str = "<parameter=";
const PARAM_CLOSE: &str = "</parameter>";

impl CallSyntax for Qwen3Coder {
    fn markers(&self) -> Markers {
        Markers {
            open: "<tool_call>",
            block: None,
            call_end: "</tool_call>",
        }
    }

    fn parse_call(&self, body: &str, schemas: &ToolSchemas) -> Result<ParsedCall, String> {
        let rest = body
            .trim()
            .strip_prefix("<function=")
            .ok_or("expected <function=NAME>")?;
        let (name, rest) = rest.split_once('>').ok_or("<function= without >")?;
        let name = check_name(name)?;
        let mut rest = rest
            .trim_end()
            .strip_suffix("</function>")
            .ok_or("no </function>")?;
        let mut pairs = Vec::new();
        loop {
            rest = rest.trim_start();
            if rest.is_empty() {
                break;
            }
            let after = rest.strip_prefix(PARAM_OPEN).ok_or_else(|| {
                let shown: String = rest.chars().take(20).collect();
                format!("expected {PARAM_OPEN}KEY>, found `{shown}`")
            })?;
            let (key, after) = after.split_once('>').ok_or("<parameter= without >")?;
            let key = key.trim();
            if key.is_empty() {
                return Err("empty parameter name".to_owned());
            }
            let (value, next) = match (after.find(PARAM_CLOSE), after.find(PARAM_OPEN)) {
                (Some(close), open) if open.is_none_or(|open| close < open) => {
                    (&after[..close], &after[close + PARAM_CLOSE.len()..])
                }
                (_, Some(open)) => (&after[..open], &after[open..]),
                _ => (after, ""),
            };
            let value = value.strip_prefix('\n').unwrap_or(value);
            let value = value.strip_suffix('\n').unwrap_or(value);
            pairs.push((key.to_owned(), schemas.typed_value(&name, key, value)));
            rest = next;
        }
        Ok(ParsedCall {
            arguments: object_string(pairs),
            name,
        })
    }
}
