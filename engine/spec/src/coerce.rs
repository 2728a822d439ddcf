//! Typing one leaf of the spec: booleans, whole numbers, fractions, names from a closed set,
//! lists and maps. A value may arrive as YAML typed it (`8000`, `true`) or as a string from
//! interpolation (`"8000"`, `"0"`), and both read the same. An absent key, `null` and `""`
//! (what `${VAR:-}` gives) all mean "not set". Each reader reports its problem to `Issues`
//! under the key and returns `None`, so checking goes on and every problem is listed.

use indexmap::IndexMap;
use serde_yaml::Value;

use crate::dotenv::is_var_name;
use crate::error::Issues;
use crate::resolved::JsonObject;
use crate::yaml::{key_text, show};

/// The leaf, unless it is absent, `null` or the empty string.
fn set(v: Option<&Value>) -> Option<&Value> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::Tagged(t)) => set(Some(&t.value)),
        Some(v) => Some(v),
    }
}

/// A scalar as text (numbers and booleans as YAML writes them).
fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

pub(crate) fn text(issues: &mut Issues, key: &str, v: Option<&Value>) -> Option<String> {
    let v = set(v)?;
    let t = scalar_text(v);
    if t.is_none() {
        issues.push(key, format!("expected a string, found {}", show(v)));
    }
    t
}

pub(crate) fn boolean(issues: &mut Issues, key: &str, v: Option<&Value>) -> Option<bool> {
    let v = set(v)?;
    let b = match v {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => match n.as_u64() {
            Some(0) => Some(false),
            Some(1) => Some(true),
            _ => None,
        },
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Some(true),
            "false" | "0" | "no" | "off" => Some(false),
            _ => None,
        },
        _ => None,
    };
    if b.is_none() {
        issues.push(
            key,
            format!(
                "{} is not a boolean; use true or false (or 1/0, yes/no, on/off)",
                show(v)
            ),
        );
    }
    b
}

/// A whole number in `min..=max`.
pub(crate) fn int(
    issues: &mut Issues,
    key: &str,
    v: Option<&Value>,
    min: u64,
    max: u64,
) -> Option<u64> {
    let v = set(v)?;
    let n = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    let negative = match v {
        Value::Number(n) => n.as_i64().is_some_and(|i| i < 0),
        Value::String(s) => s.trim().starts_with('-'),
        _ => false,
    };
    let range = if max >= u64::from(u32::MAX) {
        format!("at least {min}")
    } else {
        format!("{min} to {max}")
    };
    match n {
        Some(n) if (min..=max).contains(&n) => Some(n),
        Some(_) => {
            issues.push(
                key,
                format!("{} is out of range; allowed: {range}", show(v)),
            );
            None
        }
        None if negative => {
            issues.push(
                key,
                format!("{} is out of range; allowed: {range}", show(v)),
            );
            None
        }
        None => {
            issues.push(key, format!("{} is not a whole number", show(v)));
            None
        }
    }
}

/// A whole number >= `min` that fits in u32.
pub(crate) fn u32_min(issues: &mut Issues, key: &str, v: Option<&Value>, min: u32) -> Option<u32> {
    int(issues, key, v, u64::from(min), u64::from(u32::MAX)).and_then(|n| u32::try_from(n).ok())
}

/// A finite number (`0.9`, `"0.9"`, `1`).
pub(crate) fn float(issues: &mut Issues, key: &str, v: Option<&Value>) -> Option<f64> {
    let v = set(v)?;
    let x = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
    .filter(|x| x.is_finite());
    if x.is_none() {
        issues.push(key, format!("{} is not a number", show(v)));
    }
    x
}

/// A name from a closed set; the message lists the accepted spellings.
pub(crate) fn choice<T>(
    issues: &mut Issues,
    key: &str,
    v: Option<&Value>,
    parse: fn(&str) -> Option<T>,
    accepted: &[&str],
) -> Option<T> {
    let v = set(v)?;
    let t = scalar_text(v).and_then(|s| parse(s.trim()));
    if t.is_none() {
        issues.push(
            key,
            format!("{} is not one of {}", show(v), accepted.join(", ")),
        );
    }
    t
}

/// A list of strings; a string is split at commas (so `${ORIGINS:-a,b}` works).
pub(crate) fn string_list(issues: &mut Issues, key: &str, v: Option<&Value>) -> Vec<String> {
    let Some(v) = set(v) else {
        return Vec::new();
    };
    match v {
        Value::Sequence(items) => items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| text(issues, &format!("{key}[{i}]"), Some(item)))
            .collect(),
        Value::String(s) => s
            .split(',')
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty())
            .collect(),
        other => {
            issues.push(
                key,
                format!("expected a list of strings, found {}", show(other)),
            );
            Vec::new()
        }
    }
}

/// A free-form mapping, as a JSON object.
pub(crate) fn json_object(issues: &mut Issues, key: &str, v: Option<&Value>) -> JsonObject {
    let Some(v) = set(v) else {
        return JsonObject::new();
    };
    if let Value::Mapping(_) = v {
        match serde_json::to_value(v) {
            Ok(serde_json::Value::Object(o)) => return o,
            Ok(_) => {}
            Err(e) => {
                issues.push(key, format!("not representable as JSON: {e}"));
                return JsonObject::new();
            }
        }
    }
    issues.push(key, format!("expected a mapping, found {}", show(v)));
    JsonObject::new()
}

/// Environment variables: a mapping `NAME: value` or docker compose's list `- NAME=value`.
pub(crate) fn env_map(
    issues: &mut Issues,
    key: &str,
    v: Option<&Value>,
) -> IndexMap<String, String> {
    let mut out = IndexMap::new();
    let Some(v) = set(v) else {
        return out;
    };
    let mut add = |issues: &mut Issues, name: String, value: Option<String>| {
        let at = format!("{key}.{name}");
        if !is_var_name(&name) {
            issues.push(&at, format!("{name:?} is not an environment variable name (letters, digits and _, not starting with a digit)"));
        } else if let Some(value) = value {
            out.insert(name, value);
        }
    };
    match v {
        Value::Mapping(map) => {
            for (k, val) in map {
                let name = key_text(k);
                let at = format!("{key}.{name}");
                let value = match val {
                    Value::Null => Some(String::new()),
                    other => {
                        let t = scalar_text(other);
                        if t.is_none() {
                            issues.push(&at, format!("expected a string, found {}", show(other)));
                        }
                        t
                    }
                };
                add(issues, name, value);
            }
        }
        Value::Sequence(items) => {
            for (i, item) in items.iter().enumerate() {
                match item.as_str().and_then(|s| s.split_once('=')) {
                    Some((name, value)) => add(issues, name.to_owned(), Some(value.to_owned())),
                    None => issues.push(
                        format!("{key}[{i}]"),
                        format!("{} is not NAME=value", show(item)),
                    ),
                }
            }
        }
        other => issues.push(
            key,
            format!("expected a mapping of NAME: value, found {}", show(other)),
        ),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(yaml: &str) -> Value {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn strings_coerce_like_yaml_values() {
        let mut i = Issues::default();
        assert_eq!(boolean(&mut i, "k", Some(&v("'0'"))), Some(false));
        assert_eq!(boolean(&mut i, "k", Some(&v("'1'"))), Some(true));
        assert_eq!(boolean(&mut i, "k", Some(&v("'TRUE'"))), Some(true));
        assert_eq!(boolean(&mut i, "k", Some(&v("false"))), Some(false));
        assert_eq!(boolean(&mut i, "k", Some(&v("0"))), Some(false));
        assert_eq!(int(&mut i, "k", Some(&v("'8000'")), 1, 65535), Some(8000));
        assert_eq!(int(&mut i, "k", Some(&v("8000")), 1, 65535), Some(8000));
        assert_eq!(float(&mut i, "k", Some(&v("'0.8'"))), Some(0.8));
        assert_eq!(float(&mut i, "k", Some(&v("1"))), Some(1.0));
        assert_eq!(text(&mut i, "k", Some(&v("12"))).as_deref(), Some("12"));
        assert!(i.is_empty(), "{i:?}");
    }

    #[test]
    fn empty_and_null_mean_unset() {
        let mut i = Issues::default();
        assert_eq!(boolean(&mut i, "k", Some(&v("''"))), None);
        assert_eq!(int(&mut i, "k", Some(&v("null")), 1, 2), None);
        assert_eq!(text(&mut i, "k", None), None);
        assert!(i.is_empty());
    }

    #[test]
    fn bad_values_name_value_and_what_is_allowed() {
        let mut i = Issues::default();
        boolean(&mut i, "a", Some(&v("maybe")));
        int(&mut i, "b", Some(&v("'x8'")), 1, 9);
        int(&mut i, "c", Some(&v("0")), 1, 9);
        int(&mut i, "d", Some(&v("-3")), 1, 9);
        float(&mut i, "e", Some(&v("'.nan'")));
        choice(
            &mut i,
            "f",
            Some(&v("fp9")),
            |_| None::<()>,
            &["auto", "fp8"],
        );
        let msgs: Vec<String> = i.into_vec().into_iter().map(|x| x.to_string()).collect();
        assert_eq!(
            msgs,
            [
                "a: \"maybe\" is not a boolean; use true or false (or 1/0, yes/no, on/off)",
                "b: \"x8\" is not a whole number",
                "c: 0 is out of range; allowed: 1 to 9",
                "d: -3 is out of range; allowed: 1 to 9",
                "e: \".nan\" is not a number",
                "f: \"fp9\" is not one of auto, fp8",
            ]
        );
    }

    #[test]
    fn collections() {
        let mut i = Issues::default();
        assert_eq!(string_list(&mut i, "k", Some(&v("'a, b'"))), ["a", "b"]);
        assert_eq!(string_list(&mut i, "k", Some(&v("[a, 1]"))), ["a", "1"]);
        let env = env_map(&mut i, "env", Some(&v("{A: 1, B: x}")));
        assert_eq!(env["A"], "1");
        let env = env_map(&mut i, "env", Some(&v("[A=1, B=x=y]")));
        assert_eq!(env["B"], "x=y");
        let o = json_object(&mut i, "k", Some(&v("{a: {b: [1, x]}}")));
        assert_eq!(o["a"]["b"][1], "x");
        assert!(i.is_empty(), "{i:?}");
        env_map(&mut i, "env", Some(&v("{1A: x, B: [1]}")));
        json_object(&mut i, "h", Some(&v("[1]")));
        let keys: Vec<String> = i.into_vec().into_iter().map(|x| x.key).collect();
        assert_eq!(keys, ["env.1A", "env.B", "h"]);
    }
}
