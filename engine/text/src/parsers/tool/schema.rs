//! Types argument values that a format writes as bare text (`<arg_value>3</arg_value>`), using
//! the JSON schema of the request's tools.
//!
//! A parameter typed only `string` keeps its text verbatim. Any other declared type parses the
//! text as JSON (and Python's `True`/`False`/`None`, which models write) and keeps the result if
//! it fits; otherwise the text stays a string if `string` is allowed. Unknown tools and
//! parameters: JSON if it parses, else the string. Type mismatches are not failures: the call is
//! well formed, and the tool's executor is the one to reject a wrong value.

use serde_json::Value;
use std::collections::HashMap;

/// Parameter schemas by tool name, then parameter name.
#[derive(Debug, Default)]
pub(crate) struct ToolSchemas {
    tools: HashMap<String, serde_json::Map<String, Value>>,
}

impl ToolSchemas {
    /// Reads OpenAI tools (`{"type":"function","function":{"name","parameters"}}`) and the bare
    /// `{"name","parameters"}` form; entries without a name are skipped.
    pub(crate) fn new(tools: &[Value]) -> Self {
        let tools = tools
            .iter()
            .filter_map(|tool| {
                let f = tool.get("function").unwrap_or(tool);
                let name = f.get("name")?.as_str()?;
                let props = f
                    .get("parameters")
                    .and_then(|p| p.get("properties"))
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                Some((name.to_owned(), props))
            })
            .collect();
        Self { tools }
    }

    /// The typed value of parameter `param` of tool `tool`, written as `raw`.
    pub(crate) fn typed_value(&self, tool: &str, param: &str, raw: &str) -> Value {
        let schema = self.tools.get(tool).and_then(|props| props.get(param));
        type_value(raw, schema)
    }
}

fn type_value(raw: &str, schema: Option<&Value>) -> Value {
    let mut types = Vec::new();
    if let Some(schema) = schema {
        collect_types(schema, &mut types);
    }
    if types.iter().all(|t| *t == "string") && !types.is_empty() {
        return Value::String(raw.to_owned());
    }
    let parsed = parse_literal(raw.trim());
    match parsed {
        Some(v) if types.is_empty() || types.iter().any(|t| fits(t, &v)) => v,
        _ if types.contains(&"string") => Value::String(raw.to_owned()),
        Some(v) => v,
        None => Value::String(raw.to_owned()),
    }
}

/// JSON, or the Python literals models write for JSON's `true`/`false`/`null`.
fn parse_literal(text: &str) -> Option<Value> {
    match text {
        "True" => Some(Value::Bool(true)),
        "False" => Some(Value::Bool(false)),
        "None" => Some(Value::Null),
        _ => serde_json::from_str(text).ok(),
    }
}

/// The `type` names a schema allows, looking through `anyOf` / `oneOf` and `enum` values.
fn collect_types<'a>(schema: &'a Value, out: &mut Vec<&'a str>) {
    match schema.get("type") {
        Some(Value::String(t)) => out.push(t),
        Some(Value::Array(ts)) => out.extend(ts.iter().filter_map(Value::as_str)),
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = schema.get(key) {
            alts.iter().for_each(|alt| collect_types(alt, out));
        }
    }
    if schema.get("type").is_none() {
        if let Some(Value::Array(values)) = schema.get("enum") {
            for v in values {
                out.push(match v {
                    Value::String(_) => "string",
                    Value::Bool(_) => "boolean",
                    Value::Number(_) => "number",
                    Value::Null => "null",
                    Value::Array(_) => "array",
                    Value::Object(_) => "object",
                });
            }
        }
    }
}

fn fits(ty: &str, v: &Value) -> bool {
    match ty {
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "null" => v.is_null(),
        "string" => v.is_string(),
        _ => false,
    }
}

/// Arguments the model wrote as JSON text: must be an object (empty text means `{}`); returned
/// re-serialized compactly, keys in the model's order.
pub(crate) fn json_arguments(text: &str) -> Result<String, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok("{}".to_owned());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => Ok(v.to_string()),
        Ok(other) => Err(format!("arguments are not a JSON object: {other}")),
        Err(e) => Err(format!("arguments are not valid JSON: {e}")),
    }
}

/// A function name as models write it: non-empty, no whitespace or markup inside.
pub(crate) fn check_name(name: &str) -> Result<String, String> {
    let name = name.trim();
    if name.is_empty() {
        return Err("no function name".to_owned());
    }
    if name.contains(|c: char| c.is_whitespace() || c == '<' || c == '>') {
        return Err(format!("`{name}` is not a function name"));
    }
    Ok(name.to_owned())
}

/// Serializes `(key, value)` pairs as a JSON object in the order the model wrote them; a repeated
/// key keeps its last value at its first position.
pub(crate) fn object_string(pairs: Vec<(String, Value)>) -> String {
    let mut map = serde_json::Map::new();
    for (k, v) in pairs {
        map.insert(k, v);
    }
    Value::Object(map).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schemas() -> ToolSchemas {
        ToolSchemas::new(&[
            json!({"type": "function", "function": {"name": "f", "parameters": {
            "type": "object",
            "properties": {
                "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"},
                "b": {"type": "boolean"}, "o": {"type": "object"}, "a": {"type": "array"},
                "opt": {"type": ["integer", "null"]}, "any": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
                "e": {"enum": [1, 2, 3]}
            }}}}),
        ])
    }

    #[test]
    fn values_follow_the_schema() {
        let s = schemas();
        assert_eq!(s.typed_value("f", "s", "42"), json!("42"));
        assert_eq!(s.typed_value("f", "s", " true "), json!(" true "));
        assert_eq!(s.typed_value("f", "i", "42"), json!(42));
        assert_eq!(s.typed_value("f", "n", "2.5"), json!(2.5));
        assert_eq!(s.typed_value("f", "b", "true"), json!(true));
        assert_eq!(s.typed_value("f", "b", "False"), json!(false));
        assert_eq!(s.typed_value("f", "o", r#"{"k": [1]}"#), json!({"k": [1]}));
        assert_eq!(s.typed_value("f", "a", "[1, \"x\"]"), json!([1, "x"]));
        assert_eq!(s.typed_value("f", "opt", "null"), json!(null));
        assert_eq!(s.typed_value("f", "any", "7"), json!(7));
        assert_eq!(s.typed_value("f", "any", "seven"), json!("seven"));
        assert_eq!(s.typed_value("f", "e", "2"), json!(2));
    }

    #[test]
    fn mismatches_and_unknowns_keep_the_text() {
        let s = schemas();
        assert_eq!(s.typed_value("f", "i", "many"), json!("many"));
        assert_eq!(s.typed_value("f", "unknown", "3"), json!(3));
        assert_eq!(s.typed_value("f", "unknown", "Paris"), json!("Paris"));
        assert_eq!(s.typed_value("nope", "x", "[1]"), json!([1]));
        assert_eq!(s.typed_value("nope", "x", "{broken"), json!("{broken"));
    }

    #[test]
    fn objects_keep_the_model_order() {
        let pairs = vec![
            ("b".into(), json!(1)),
            ("a".into(), json!("x")),
            ("b".into(), json!(2)),
        ];
        assert_eq!(object_string(pairs), r#"{"b":2,"a":"x"}"#);
    }
}
