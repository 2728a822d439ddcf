//! Python's text forms of template values: `json.dumps` (Hugging Face's `tojson` filter) and
//! `repr`/`str` (what jinja2 prints for `{{ value }}`), so that minijinja renders chat templates
//! byte-identical to transformers' `apply_chat_template`.
//!
//! Works on `minijinja::Value`; registering the filter and formatter is chat_template.rs's job.

use std::fmt::Write as _;

use minijinja::value::ValueKind;
use minijinja::{Error, ErrorKind, Value};

/// `json.dumps` options, as HF's `tojson(x, ensure_ascii=False, indent=None, separators=None,
/// sort_keys=False)` passes them.
#[derive(Debug, Clone, Default)]
pub(crate) struct JsonOptions {
    pub ensure_ascii: bool,
    /// Indent string per level (`indent=2` -> two spaces); `None` = one line.
    pub indent: Option<String>,
    /// `(item_separator, key_separator)`; default depends on `indent` as in Python.
    pub separators: Option<(String, String)>,
    pub sort_keys: bool,
}

/// `json.dumps(value, **opts)`.
pub(crate) fn json_dumps(value: &Value, opts: &JsonOptions) -> Result<String, Error> {
    let (item_sep, key_sep) = match &opts.separators {
        Some((i, k)) => (i.clone(), k.clone()),
        None if opts.indent.is_some() => (",".to_owned(), ": ".to_owned()),
        None => (", ".to_owned(), ": ".to_owned()),
    };
    let mut out = String::new();
    let ctx = JsonCtx {
        opts,
        item_sep: &item_sep,
        key_sep: &key_sep,
    };
    ctx.write(&mut out, value, 0)?;
    Ok(out)
}

struct JsonCtx<'a> {
    opts: &'a JsonOptions,
    item_sep: &'a str,
    key_sep: &'a str,
}

impl JsonCtx<'_> {
    fn newline(&self, out: &mut String, level: usize) {
        if let Some(ind) = &self.opts.indent {
            out.push('\n');
            for _ in 0..level {
                out.push_str(ind);
            }
        }
    }

    fn write(&self, out: &mut String, v: &Value, level: usize) -> Result<(), Error> {
        match v.kind() {
            ValueKind::Undefined | ValueKind::None => out.push_str("null"),
            ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
            ValueKind::Number => out.push_str(&number_repr(v, true)),
            ValueKind::String => {
                write_json_str(out, v.as_str().unwrap_or_default(), self.opts.ensure_ascii)
            }
            ValueKind::Map => {
                let mut keys: Vec<Value> = v.try_iter()?.collect();
                if keys.is_empty() {
                    out.push_str("{}");
                    return Ok(());
                }
                if self.opts.sort_keys {
                    keys.sort();
                }
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push_str(self.item_sep);
                    }
                    self.newline(out, level + 1);
                    write_json_str(out, &json_key(k)?, self.opts.ensure_ascii);
                    out.push_str(self.key_sep);
                    self.write(out, &v.get_item(k)?, level + 1)?;
                }
                self.newline(out, level);
                out.push('}');
            }
            ValueKind::Seq | ValueKind::Iterable => {
                let items: Vec<Value> = v.try_iter()?.collect();
                if items.is_empty() {
                    out.push_str("[]");
                    return Ok(());
                }
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(self.item_sep);
                    }
                    self.newline(out, level + 1);
                    self.write(out, item, level + 1)?;
                }
                self.newline(out, level);
                out.push(']');
            }
            _ => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("Object of type {} is not JSON serializable", v.kind()),
                ))
            }
        }
        Ok(())
    }
}

/// Python converts non-string keys: `1` -> `"1"`, `True` -> `"true"`, `None` -> `"null"`.
fn json_key(k: &Value) -> Result<String, Error> {
    Ok(match k.kind() {
        ValueKind::String => k.as_str().unwrap_or_default().to_owned(),
        ValueKind::Number => number_repr(k, true),
        ValueKind::Bool => (if k.is_true() { "true" } else { "false" }).to_owned(),
        ValueKind::None | ValueKind::Undefined => "null".to_owned(),
        other => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("keys must be str, int, float, bool or None, not {other}"),
            ))
        }
    })
}

fn write_json_str(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (ensure_ascii && (c as u32) > 0x7f) => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A number as Python prints it: ints as digits, floats as `float.__repr__` (`1.0`, `1e+20`,
/// `1e-05`); `json` spells the non-finite ones `NaN`/`Infinity`, `repr` spells them `nan`/`inf`.
pub(crate) fn number_repr(v: &Value, json: bool) -> String {
    if v.is_integer() {
        return v.to_string();
    }
    let f = f64::try_from(v.clone()).unwrap_or(f64::NAN);
    float_repr(f, json)
}

pub(crate) fn float_repr(f: f64, json: bool) -> String {
    if f.is_nan() {
        return (if json { "NaN" } else { "nan" }).to_owned();
    }
    if f.is_infinite() {
        let s = if json { "Infinity" } else { "inf" };
        return if f < 0.0 {
            format!("-{s}")
        } else {
            s.to_owned()
        };
    }
    // Rust's `{:e}` gives the shortest round-trip digits, like Python's repr.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let body = if (-4..16).contains(&exp) {
        positional(&digits, exp)
    } else {
        let mut m = digits[..1].to_owned();
        if digits.len() > 1 {
            m.push('.');
            m.push_str(&digits[1..]);
        }
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", exp.abs())
    };
    if neg {
        format!("-{body}")
    } else {
        body
    }
}

/// `d.ddd × 10^exp` written out without exponent, always with a fractional part.
fn positional(digits: &str, exp: i32) -> String {
    if exp < 0 {
        let zeros = "0".repeat((-exp - 1) as usize);
        return format!("0.{zeros}{digits}");
    }
    let int_len = exp as usize + 1;
    if digits.len() <= int_len {
        format!("{digits}{}.0", "0".repeat(int_len - digits.len()))
    } else {
        format!("{}.{}", &digits[..int_len], &digits[int_len..])
    }
}

/// Python's `str(value)` for what jinja2 prints: `None`, `True`, dicts and lists as `repr`.
pub(crate) fn py_str(v: &Value) -> String {
    match v.kind() {
        ValueKind::String => v.as_str().unwrap_or_default().to_owned(),
        ValueKind::Undefined => String::new(),
        _ => py_repr(v),
    }
}

/// Python's `repr(value)`.
pub(crate) fn py_repr(v: &Value) -> String {
    let mut out = String::new();
    write_repr(&mut out, v);
    out
}

fn write_repr(out: &mut String, v: &Value) {
    match v.kind() {
        ValueKind::Undefined => {}
        ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if v.is_true() { "True" } else { "False" }),
        ValueKind::Number => out.push_str(&number_repr(v, false)),
        ValueKind::String => write_str_repr(out, v.as_str().unwrap_or_default()),
        ValueKind::Map => {
            out.push('{');
            let keys: Vec<Value> = v.try_iter().map(Iterator::collect).unwrap_or_default();
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, k);
                out.push_str(": ");
                write_repr(out, &v.get_item(k).unwrap_or_default());
            }
            out.push('}');
        }
        ValueKind::Seq | ValueKind::Iterable => {
            out.push('[');
            let items: Vec<Value> = v.try_iter().map(Iterator::collect).unwrap_or_default();
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, item);
            }
            out.push(']');
        }
        _ => out.push_str(&v.to_string()),
    }
}

/// Python picks single quotes unless the string holds a `'` and no `"`.
fn write_str_repr(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v(j: serde_json::Value) -> Value {
        Value::from_serialize(&j)
    }

    #[test]
    fn floats_print_like_python() {
        let cases = [
            (1.0, "1.0"),
            (0.5, "0.5"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123.456, "123.456"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (-2.5e-7, "-2.5e-07"),
            (1.5e300, "1.5e+300"),
        ];
        for (f, want) in cases {
            assert_eq!(float_repr(f, true), want, "{f}");
        }
        assert_eq!(float_repr(f64::NAN, true), "NaN");
        assert_eq!(float_repr(f64::NEG_INFINITY, false), "-inf");
    }

    #[test]
    fn json_dumps_matches_python_defaults() {
        let val = v(json!({"b": 1, "a": [1.0, "x\n\"é", null, true], "c": {}}));
        let opts = JsonOptions::default();
        assert_eq!(
            json_dumps(&val, &opts).expect("ok"),
            r#"{"b": 1, "a": [1.0, "x\n\"é", null, true], "c": {}}"#
        );
        let ascii = JsonOptions {
            ensure_ascii: true,
            sort_keys: true,
            ..JsonOptions::default()
        };
        assert_eq!(
            json_dumps(&v(json!({"b": "é😀", "a": 1})), &ascii).expect("ok"),
            r#"{"a": 1, "b": "\u00e9\ud83d\ude00"}"#
        );
        let indented = JsonOptions {
            indent: Some("  ".into()),
            ..JsonOptions::default()
        };
        assert_eq!(
            json_dumps(&v(json!({"a": [1, 2], "b": []})), &indented).expect("ok"),
            "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": []\n}"
        );
    }

    #[test]
    fn repr_matches_python() {
        assert_eq!(
            py_repr(&v(json!({"a": [1, "it's", null, false]}))),
            r#"{'a': [1, "it's", None, False]}"#
        );
        assert_eq!(py_str(&v(json!(null))), "None");
        assert_eq!(py_str(&v(json!("plain"))), "plain");
        assert_eq!(py_repr(&v(json!("a'b\"c\n"))), r#"'a\'b"c\n'"#);
    }
}
