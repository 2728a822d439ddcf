//! Small helpers over `serde_yaml::Value` shared by the checkers: how a value and a mapping key
//! are shown in an error message.

use serde_yaml::Value;

/// A value as a user should see it in a message: strings quoted (`"fp9"`), numbers and booleans
/// bare, collections in compact flow form.
pub(crate) fn show(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => quote(s),
        Value::Tagged(t) => format!("{} {}", t.tag, show(&t.value)),
        Value::Sequence(_) | Value::Mapping(_) => match serde_json::to_string(v) {
            Ok(s) => s,
            Err(_) => "a mapping".into(),
        },
    }
}

/// A string in double quotes with JSON escapes.
pub(crate) fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// A mapping key as text for a key path (`engine.max_num_seqs`); non-string keys as YAML shows them.
pub(crate) fn key_text(k: &Value) -> String {
    match k {
        Value::String(s) => s.clone(),
        other => show(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_values_for_messages() {
        let v: Value = serde_yaml::from_str("[1, \"a\", {b: true}]").unwrap();
        assert_eq!(show(&v), r#"[1,"a",{"b":true}]"#);
        assert_eq!(show(&Value::String("fp9".into())), "\"fp9\"");
        assert_eq!(show(&Value::Null), "null");
    }
}
