//! Grammars for `tool_choice` required / named: the output must be one (or, with parallel calls,
//! several) tool calls in the chat template's own format, so that the configured tool parser
//! reads them back as calls.
//!
//! - `hermes` (Qwen2.5/3): `<tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>`, ARGS
//!   the tool's parameters schema as JSON; calls separated by a newline.
//! - `glm47`: `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>`;
//!   `glm45`: the same with a newline after the name and after each tag pair, calls separated by
//!   a newline. A string parameter's value is raw text (up to `</arg_value>`), any other value
//!   JSON of its schema, as the GLM templates write them. Parameters come in declared order.
//!
//! Other parser formats are refused with an error naming the parser.

use serde_json::Value;

use super::grammar::{Builder, Grammar, Node, NodeId, UNBOUNDED};
use super::schema::{Compiler, SchemaError};

/// Tool-call formats guided decoding can force.
pub const GUIDED_TOOL_PARSERS: &[&str] = &["hermes", "glm45", "glm47"];

/// A tool-call grammar that cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolGrammarError {
    #[error(
        "tool_call_parser `{parser}` has no guided tool-call format; tool_choice required / \
         named functions work with: {}", GUIDED_TOOL_PARSERS.join(", ")
    )]
    UnsupportedParser { parser: String },
    #[error("tool `{tool}`: {source}")]
    Schema {
        tool: String,
        #[source]
        source: SchemaError,
    },
    #[error("no tools to choose from")]
    NoTools,
}

/// One tool as the request declares it (OpenAI `function` or Anthropic tool).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    /// JSON schema of the arguments; `None`: no arguments.
    pub parameters: Option<Value>,
}

impl ToolSpec {
    /// From an OpenAI tool (`{"type": "function", "function": {...}}`) or a bare
    /// `{"name", "parameters"}`; None without a name.
    pub fn from_openai(tool: &Value) -> Option<ToolSpec> {
        let f = tool.get("function").unwrap_or(tool);
        Some(ToolSpec {
            name: f.get("name")?.as_str()?.to_owned(),
            parameters: f.get("parameters").filter(|p| !p.is_null()).cloned(),
        })
    }
}

/// Text that the model must write: calls of `tools` (one of them each time) in `parser`'s
/// format; at most one call unless `parallel`.
pub fn tool_call_grammar(
    parser: &str,
    tools: &[ToolSpec],
    parallel: bool,
) -> Result<Grammar, ToolGrammarError> {
    if tools.is_empty() {
        return Err(ToolGrammarError::NoTools);
    }
    let mut b = Builder::default();
    let (call, sep) = match parser {
        "hermes" => hermes(&mut b, tools)?,
        "glm47" => glm(&mut b, tools, "")?,
        "glm45" => glm(&mut b, tools, "\n")?,
        other => {
            return Err(ToolGrammarError::UnsupportedParser {
                parser: other.to_owned(),
            })
        }
    };
    let root = if parallel {
        let sep = b.lit(sep);
        b.add(Node::Repeat {
            item: call,
            sep: Some(sep),
            min: 1,
            max: UNBOUNDED,
        })
    } else {
        call
    };
    Ok(b.finish(root))
}

fn schema_error(tool: &ToolSpec) -> impl FnOnce(SchemaError) -> ToolGrammarError + '_ {
    move |source| ToolGrammarError::Schema {
        tool: tool.name.clone(),
        source,
    }
}

/// (one call, the separator between calls)
fn hermes(b: &mut Builder, tools: &[ToolSpec]) -> Result<(NodeId, &'static str), ToolGrammarError> {
    let mut alts = Vec::with_capacity(tools.len());
    for t in tools {
        let head = b.lit(&format!(
            "{{\"name\": {}, \"arguments\": ",
            Value::String(t.name.clone())
        ));
        let args = match &t.parameters {
            None => b.lit("{}"),
            Some(p) => Compiler::new(b, p)
                .compile(p, "#")
                .map_err(schema_error(t))?,
        };
        let close = b.lit("}");
        alts.push(b.seq(&[head, args, close]));
    }
    let open = b.lit("<tool_call>\n");
    let body = b.alt(&alts);
    let close = b.lit("\n</tool_call>");
    Ok((b.seq(&[open, body, close]), "\n"))
}

fn glm(
    b: &mut Builder,
    tools: &[ToolSpec],
    nl: &'static str,
) -> Result<(NodeId, &'static str), ToolGrammarError> {
    let mut alts = Vec::with_capacity(tools.len());
    for t in tools {
        let head = b.lit(&t.name);
        let args = match &t.parameters {
            None => b.seq(&[]),
            Some(p) => glm_args(b, p, nl).map_err(schema_error(t))?,
        };
        alts.push(b.seq(&[head, args]));
    }
    let open = b.lit("<tool_call>");
    let body = b.alt(&alts);
    let close = b.lit(&format!("{nl}</tool_call>"));
    Ok((b.seq(&[open, body, close]), nl))
}

/// `<arg_key>K</arg_key><arg_value>V</arg_value>` per declared parameter, in order.
fn glm_args(b: &mut Builder, params: &Value, nl: &str) -> Result<NodeId, SchemaError> {
    let invalid = |message: String| SchemaError::Invalid {
        path: "#".into(),
        message,
    };
    let props = match params.get("properties") {
        None => serde_json::Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(_) => return Err(invalid("properties must be an object".into())),
    };
    if params
        .get("additionalProperties")
        .is_some_and(|a| a != &Value::Bool(false))
        && props.is_empty()
    {
        return Err(SchemaError::Unsupported {
            path: "#".into(),
            keyword: "additionalProperties".into(),
            detail: " (GLM tool calls need the parameters declared in `properties`)".into(),
        });
    }
    let required: Vec<&str> = params
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut members = Vec::with_capacity(props.len());
    let mut c = Compiler::new(b, params);
    for (name, schema) in &props {
        let value = match raw_string_values(schema) {
            Some(None) => {
                let max = schema
                    .get("maxLength")
                    .and_then(Value::as_u64)
                    .and_then(|m| u32::try_from(m).ok())
                    .unwrap_or(UNBOUNDED);
                c.builder().text(&["</arg_value>", "</tool_call>"], max)
            }
            Some(Some(words)) => {
                let lits: Vec<NodeId> = words.iter().map(|w| c.builder().lit(w)).collect();
                c.builder().alt(&lits)
            }
            None => c.compile(schema, &format!("#/properties/{name}"))?,
        };
        let open = c
            .builder()
            .lit(&format!("{nl}<arg_key>{name}</arg_key>{nl}<arg_value>"));
        let close = c.builder().lit("</arg_value>");
        let member = c.builder().seq(&[open, value, close]);
        members.push((member, required.contains(&name.as_str())));
    }
    Ok(c.members_with(&members, None))
}

/// For a parameter the GLM templates write as raw text: `Some(None)` any string,
/// `Some(Some(words))` one of these strings; `None` when the value is written as JSON.
fn raw_string_values(schema: &Value) -> Option<Option<Vec<String>>> {
    if schema.get("type").and_then(Value::as_str) != Some("string") {
        return None;
    }
    let words = |v: &Value| -> Option<Vec<String>> {
        v.as_array()?
            .iter()
            .map(|w| w.as_str().map(str::to_owned))
            .collect()
    };
    if let Some(c) = schema.get("const").and_then(Value::as_str) {
        return Some(Some(vec![c.to_owned()]));
    }
    match schema.get("enum") {
        Some(e) => words(e).filter(|w| !w.is_empty()).map(Some),
        None => Some(None),
    }
}
