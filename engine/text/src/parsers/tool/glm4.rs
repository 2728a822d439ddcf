//! GLM-4.5 / 4.6 / 4.7 tool calls (`glm45`, `glm47`).
//!
//! ```text
//! <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>      GLM-4.7
//! <tool_call>NAME
//! <arg_key>K</arg_key>
//! <arg_value>V</arg_value>
//! </tool_call>                                                                    GLM-4.5/4.6
//! ```
//! Both parser names accept both layouts (whitespace between tags is ignored) and zero-argument
//! calls (`<tool_call>NAME</tool_call>`). Values are text (the template writes strings raw and
//! everything else as JSON), typed by the tool's schema.

use super::schema::{check_name, object_string, ToolSchemas};
use super::stream::{CallSyntax, Markers, ParsedCall};

pub(super) struct Glm4;

impl CallSyntax for Glm4 {
    fn markers(&self) -> Markers {
        Markers {
            open: "<tool_call>",
            block: None,
            call_end: "</tool_call>",
        }
    }

    fn parse_call(&self, body: &str, schemas: &ToolSchemas) -> Result<ParsedCall, String> {
        let (name, mut rest) = body.split_at(body.find("<arg_key>").unwrap_or(body.len()));
        let name = check_name(name)?;
        let mut pairs = Vec::new();
        loop {
            rest = rest.trim_start();
            if rest.is_empty() {
                break;
            }
            let (key, after) = tagged(rest, "<arg_key>", "</arg_key>")?;
            let key = key.trim();
            if key.is_empty() {
                return Err("empty <arg_key>".to_owned());
            }
            let (value, after) = tagged(after.trim_start(), "<arg_value>", "</arg_value>")
                .map_err(|e| format!("argument `{key}`: {e}"))?;
            pairs.push((key.to_owned(), schemas.typed_value(&name, key, value)));
            rest = after;
        }
        Ok(ParsedCall {
            arguments: object_string(pairs),
            name,
        })
    }
}

/// `text` must start with `open`; returns the text up to `close` and what follows `close`.
fn tagged<'a>(text: &'a str, open: &str, close: &str) -> Result<(&'a str, &'a str), String> {
    let Some(inner) = text.strip_prefix(open) else {
        let shown: String = text.chars().take(20).collect();
        return Err(format!("expected {open}, found `{shown}`"));
    };
    let end = inner
        .find(close)
        .ok_or_else(|| format!("{open} without {close}"))?;
    Ok((&inner[..end], &inner[end + close.len()..]))
}
