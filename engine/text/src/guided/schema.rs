//! JSON Schema (the subset vLLM users send through `response_format` and tool parameters) to
//! `Grammar` nodes. Output is compact-ish JSON with a bounded amount of optional whitespace
//! between tokens, object properties in their declared order (as vLLM's xgrammar and outlines
//! backends do).
//!
//! Supported: `type` (one or a list), `properties` + `required`, `additionalProperties` (false or
//! absent: only the declared properties; true or a schema: an object with no `properties` becomes
//! a map), `items` + `minItems` / `maxItems`, `minLength` / `maxLength`, `enum` and `const` at any
//! level (an object with neither `properties` nor `additionalProperties`: any object), `anyOf` / `oneOf` (oneOf is not made exclusive), `allOf` with one schema, `$ref` to
//! `#`, `#/$defs/...`, `#/definitions/...` (recursion included), and the boolean schemas.
//! Annotations (`title`, `description`, `default`, `examples`, `format`, ...) are ignored. Any
//! other keyword is refused with a `SchemaError` naming it and its place in the schema.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::grammar::{Builder, Grammar, Node, NodeId, UNBOUNDED};

/// Optional whitespace allowed in each gap between JSON tokens: enough for pretty-printing a few
/// levels deep, bounded so a model cannot loop on spaces.
pub const MAX_WS: u32 = 12;

/// What the compiler understands, for error messages.
pub const SUPPORTED_KEYWORDS: &str = "type, properties, required, additionalProperties, items, \
    minItems, maxItems, minLength, maxLength, enum, const, anyOf, oneOf, allOf (one schema), \
    $ref (#, #/$defs/..., #/definitions/...), $defs, definitions";

/// Keywords that do not constrain the value.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "$schema",
    "$id",
    "$comment",
    "format",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$defs",
    "definitions",
];

const KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
];

/// A schema guided decoding cannot compile.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchemaError {
    #[error("{path}: `{keyword}` is not supported by guided decoding{detail}; supported keywords: {SUPPORTED_KEYWORDS}")]
    Unsupported {
        /// Where in the schema, as a JSON pointer (`#/properties/city`).
        path: String,
        keyword: String,
        /// Extra context, starting with "; " or empty.
        detail: String,
    },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

fn unsupported(path: &str, keyword: &str, detail: &str) -> SchemaError {
    SchemaError::Unsupported {
        path: path.to_owned(),
        keyword: keyword.to_owned(),
        detail: if detail.is_empty() {
            String::new()
        } else {
            format!(" ({detail})")
        },
    }
}

fn invalid(path: &str, message: impl Into<String>) -> SchemaError {
    SchemaError::Invalid {
        path: path.to_owned(),
        message: message.into(),
    }
}

/// A grammar for JSON text matching `schema`.
pub fn json_schema_grammar(schema: &Value) -> Result<Grammar, SchemaError> {
    let mut b = Builder::default();
    let root = Compiler::new(&mut b, schema).compile(schema, "#")?;
    Ok(b.finish(root))
}

/// JSON mode (`response_format: {"type": "json_object"}`): any JSON object.
pub fn json_object_grammar() -> Grammar {
    let mut b = Builder::default();
    let root = Compiler::new(&mut b, &Value::Null).any_object();
    b.finish(root)
}

/// Compiles schemas into a shared builder; `root` is the document `$ref`s point into.
pub(crate) struct Compiler<'a> {
    b: &'a mut Builder,
    root: &'a Value,
    refs: HashMap<String, NodeId>,
    any: Option<NodeId>,
    any_object: Option<NodeId>,
    ws: u32,
}

impl<'a> Compiler<'a> {
    pub(crate) fn new(b: &'a mut Builder, root: &'a Value) -> Self {
        Compiler {
            b,
            root,
            refs: HashMap::new(),
            any: None,
            any_object: None,
            ws: MAX_WS,
        }
    }

    pub(crate) fn builder(&mut self) -> &mut Builder {
        self.b
    }

    pub(crate) fn compile(&mut self, schema: &Value, path: &str) -> Result<NodeId, SchemaError> {
        match schema {
            Value::Bool(true) => Ok(self.any_value()),
            Value::Bool(false) => Err(invalid(path, "the schema `false` matches nothing")),
            Value::Object(m) => self.compile_object_schema(m, path),
            other => Err(invalid(
                path,
                format!("a schema must be an object or a boolean, not {other}"),
            )),
        }
    }

    fn compile_object_schema(
        &mut self,
        m: &Map<String, Value>,
        path: &str,
    ) -> Result<NodeId, SchemaError> {
        for k in m.keys() {
            if !KEYWORDS.contains(&k.as_str()) && !ANNOTATIONS.contains(&k.as_str()) {
                return Err(unsupported(path, k, ""));
            }
        }
        if let Some(r) = m.get("$ref") {
            return self.reference(r, path);
        }
        if let Some(v) = m.get("const") {
            return Ok(self.literal_value(v));
        }
        if let Some(vals) = m.get("enum") {
            let vals = vals.as_array().filter(|v| !v.is_empty()).ok_or_else(|| {
                invalid(&format!("{path}/enum"), "enum must be a non-empty array")
            })?;
            let items: Vec<NodeId> = vals.iter().map(|v| self.literal_value(v)).collect();
            return Ok(self.b.alt(&items));
        }
        for key in ["anyOf", "oneOf", "allOf"] {
            let Some(subs) = m.get(key) else { continue };
            let subs = subs.as_array().filter(|s| !s.is_empty()).ok_or_else(|| {
                invalid(
                    &format!("{path}/{key}"),
                    format!("{key} must be a non-empty array"),
                )
            })?;
            if let Some(other) = ["type", "properties", "items", "anyOf", "oneOf", "allOf"]
                .iter()
                .find(|k| **k != key && m.contains_key(**k))
            {
                return Err(unsupported(
                    path,
                    other,
                    &format!("together with {key}; put it inside each alternative"),
                ));
            }
            if key == "allOf" && subs.len() > 1 {
                return Err(unsupported(path, "allOf", "with more than one schema"));
            }
            let mut items = Vec::with_capacity(subs.len());
            for (i, s) in subs.iter().enumerate() {
                items.push(self.compile(s, &format!("{path}/{key}/{i}"))?);
            }
            return Ok(self.b.alt(&items));
        }
        let types: Vec<&str> = match m.get("type") {
            None => vec![infer_type(m)],
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) if !ts.is_empty() => ts
                .iter()
                .map(|t| {
                    t.as_str().ok_or_else(|| {
                        invalid(&format!("{path}/type"), format!("type {t} is not a string"))
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(invalid(
                    &format!("{path}/type"),
                    format!("type must be a string or a non-empty array of strings, not {other}"),
                ))
            }
        };
        let mut items = Vec::with_capacity(types.len());
        for t in types {
            items.push(self.typed(t, m, path)?);
        }
        Ok(self.b.alt(&items))
    }

    fn typed(
        &mut self,
        t: &str,
        m: &Map<String, Value>,
        path: &str,
    ) -> Result<NodeId, SchemaError> {
        Ok(match t {
            "any" => self.any_value(),
            "string" => {
                let min = count(m, "minLength", path)?.unwrap_or(0);
                let max = count(m, "maxLength", path)?.unwrap_or(UNBOUNDED);
                if min > max {
                    return Err(invalid(
                        path,
                        format!("minLength {min} is above maxLength {max}"),
                    ));
                }
                self.b.add(Node::Str { min, max })
            }
            "number" => self.b.add(Node::Num { integer: false }),
            "integer" => self.b.add(Node::Num { integer: true }),
            "boolean" => {
                let (t, f) = (self.b.lit("true"), self.b.lit("false"));
                self.b.alt(&[t, f])
            }
            "null" => self.b.lit("null"),
            "array" => self.array(m, path)?,
            "object" => self.object(m, path)?,
            other => {
                return Err(invalid(
                    &format!("{path}/type"),
                    format!(
                        "unknown type `{other}`; allowed: string, number, integer, boolean, \
                         null, array, object"
                    ),
                ))
            }
        })
    }

    fn reference(&mut self, r: &Value, path: &str) -> Result<NodeId, SchemaError> {
        let r = r
            .as_str()
            .ok_or_else(|| invalid(&format!("{path}/$ref"), "$ref must be a string"))?;
        if let Some(&id) = self.refs.get(r) {
            return Ok(id);
        }
        let target = r
            .strip_prefix('#')
            .and_then(|p| {
                if p.is_empty() {
                    Some(self.root)
                } else {
                    self.root.pointer(p)
                }
            })
            .ok_or_else(|| {
                unsupported(
                    &format!("{path}/$ref"),
                    "$ref",
                    &format!("`{r}` does not resolve; only local references are supported"),
                )
            })?;
        let id = self.b.reserve();
        self.refs.insert(r.to_owned(), id);
        let body = self.compile(target, r)?;
        self.b.set(id, Node::Seq(Box::new([body])));
        Ok(id)
    }

    /// The exact JSON text of `v` (compact, as serde_json writes it).
    fn literal_value(&mut self, v: &Value) -> NodeId {
        self.b.lit(&v.to_string())
    }

    fn sep(&mut self, text: &str) -> NodeId {
        let (w1, l, w2) = (self.b.ws(self.ws), self.b.lit(text), self.b.ws(self.ws));
        self.b.seq(&[w1, l, w2])
    }

    /// `open` ws items ws `close`, items separated by commas.
    fn bracketed(&mut self, open: &str, item: NodeId, min: u32, max: u32, close: &str) -> NodeId {
        let o = self.b.lit(open);
        let c = self.b.lit(close);
        let w1 = self.b.ws(self.ws);
        let w2 = self.b.ws(self.ws);
        if max == 0 {
            return self.b.seq(&[o, w1, c]);
        }
        let sep = self.sep(",");
        let rep = self.b.add(Node::Repeat {
            item,
            sep: Some(sep),
            min,
            max,
        });
        self.b.seq(&[o, w1, rep, w2, c])
    }

    fn array(&mut self, m: &Map<String, Value>, path: &str) -> Result<NodeId, SchemaError> {
        let item = match m.get("items") {
            None => self.any_value(),
            Some(s) => self.compile(s, &format!("{path}/items"))?,
        };
        let min = count(m, "minItems", path)?.unwrap_or(0);
        let max = count(m, "maxItems", path)?.unwrap_or(UNBOUNDED);
        if min > max {
            return Err(invalid(
                path,
                format!("minItems {min} is above maxItems {max}"),
            ));
        }
        Ok(self.bracketed("[", item, min, max, "]"))
    }

    /// `"key"` ws `:` ws value.
    fn pair(&mut self, key: NodeId, value: NodeId) -> NodeId {
        let colon = self.sep(":");
        self.b.seq(&[key, colon, value])
    }

    fn map(&mut self, value: NodeId) -> NodeId {
        let key = self.b.add(Node::Str {
            min: 0,
            max: UNBOUNDED,
        });
        let pair = self.pair(key, value);
        self.bracketed("{", pair, 0, UNBOUNDED, "}")
    }

    fn object(&mut self, m: &Map<String, Value>, path: &str) -> Result<NodeId, SchemaError> {
        let empty = Map::new();
        let props = match m.get("properties") {
            None => &empty,
            Some(Value::Object(p)) => p,
            Some(_) => {
                return Err(invalid(
                    &format!("{path}/properties"),
                    "properties must be an object",
                ))
            }
        };
        let required: Vec<&str> = match m.get("required") {
            None => Vec::new(),
            Some(Value::Array(r)) => r
                .iter()
                .map(|v| {
                    v.as_str().ok_or_else(|| {
                        invalid(
                            &format!("{path}/required"),
                            format!("{v} is not a property name"),
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(invalid(
                    &format!("{path}/required"),
                    "required must be an array",
                ))
            }
        };
        match m.get("additionalProperties") {
            // `{"type": "object"}`: any object; `"properties": {}` declares that there are none.
            None if !m.contains_key("properties") => return Ok(self.any_object()),
            None | Some(Value::Bool(false)) => {}
            Some(extra) if props.is_empty() => {
                let value = self.compile(extra, &format!("{path}/additionalProperties"))?;
                return Ok(self.map(value));
            }
            Some(_) => {
                return Err(unsupported(
                    path,
                    "additionalProperties",
                    "true or a schema only on an object without `properties`",
                ))
            }
        }
        if let Some(r) = required.iter().find(|r| !props.contains_key(**r)) {
            return Err(invalid(
                &format!("{path}/required"),
                format!("`{r}` is required but not among the properties, and no other property is allowed"),
            ));
        }
        let mut pairs = Vec::with_capacity(props.len());
        for (name, schema) in props {
            let key = self.b.lit(&Value::String(name.clone()).to_string());
            let value = self.compile(
                schema,
                &format!("{path}/properties/{}", escape_pointer(name)),
            )?;
            pairs.push((self.pair(key, value), required.contains(&name.as_str())));
        }
        let body = self.members(&pairs, ",");
        let (o, c) = (self.b.lit("{"), self.b.lit("}"));
        let (w1, w2) = (self.b.ws(self.ws), self.b.ws(self.ws));
        Ok(self.b.seq(&[o, w1, body, w2, c]))
    }

    /// Members in order, optional ones skippable, `sep` between two present ones. Built from
    /// the end: `rest[i][first]` is members i.. when nothing (first) or something came before.
    pub(crate) fn members(&mut self, members: &[(NodeId, bool)], sep: &str) -> NodeId {
        let sep = self.sep(sep);
        self.members_with(members, Some(sep))
    }

    /// As `members`, with an arbitrary separator node (or none).
    pub(crate) fn members_with(
        &mut self,
        members: &[(NodeId, bool)],
        sep: Option<NodeId>,
    ) -> NodeId {
        let end = self.b.seq(&[]);
        let (mut rest_first, mut rest_after) = (end, end);
        for &(member, required) in members.iter().rev() {
            let first = self.b.seq(&[member, rest_after]);
            let after = match sep {
                Some(s) => self.b.seq(&[s, member, rest_after]),
                None => first,
            };
            if required {
                rest_first = first;
                rest_after = after;
            } else {
                rest_first = self.b.alt(&[first, rest_first]);
                rest_after = self.b.alt(&[after, rest_after]);
            }
        }
        rest_first
    }

    /// Any JSON value (built once, recursive).
    pub(crate) fn any_value(&mut self) -> NodeId {
        if let Some(id) = self.any {
            return id;
        }
        let id = self.b.reserve();
        self.any = Some(id);
        let obj = self.any_object();
        let arr = self.bracketed("[", id, 0, UNBOUNDED, "]");
        let s = self.b.add(Node::Str {
            min: 0,
            max: UNBOUNDED,
        });
        let n = self.b.add(Node::Num { integer: false });
        let (t, f, null) = (self.b.lit("true"), self.b.lit("false"), self.b.lit("null"));
        self.b
            .set(id, Node::Alt(Box::new([obj, arr, s, n, t, f, null])));
        id
    }

    /// Any JSON object.
    fn any_object(&mut self) -> NodeId {
        if let Some(id) = self.any_object {
            return id;
        }
        let value = self.any_value();
        // any_value may have built it on the way.
        if let Some(id) = self.any_object {
            return id;
        }
        let id = self.map(value);
        self.any_object = Some(id);
        id
    }
}

/// With no `type`: what the other keywords imply, else any value.
fn infer_type(m: &Map<String, Value>) -> &'static str {
    if ["properties", "required", "additionalProperties"]
        .iter()
        .any(|k| m.contains_key(*k))
    {
        "object"
    } else if ["items", "minItems", "maxItems"]
        .iter()
        .any(|k| m.contains_key(*k))
    {
        "array"
    } else if ["minLength", "maxLength"]
        .iter()
        .any(|k| m.contains_key(*k))
    {
        "string"
    } else {
        "any"
    }
}

fn count(m: &Map<String, Value>, key: &str, path: &str) -> Result<Option<u32>, SchemaError> {
    match m.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n < UNBOUNDED)
            .map(Some)
            .ok_or_else(|| {
                invalid(
                    &format!("{path}/{key}"),
                    format!("{key} is {v}; allowed: a non-negative integer"),
                )
            }),
    }
}

fn escape_pointer(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}
