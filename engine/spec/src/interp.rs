//! `${VAR}` / `${VAR:-default}` interpolation of the string values in a parsed spec.
//!
//! Works on the YAML value tree, not the text, so every error names its key path. Forms (docker
//! compose's): `${VAR}` (unset is an error, set-but-empty is ""), `${VAR:-default}` (default when
//! unset or empty), `${VAR-default}` (default only when unset), `$$` for a literal `$`; a `$` not
//! followed by `{` is kept as is. Defaults may nest (`${A:-${B:-x}}`). Values are looked up in the
//! environment first, then in `.env`. Mapping keys are not interpolated.

use std::collections::HashMap;
use std::path::PathBuf;

use indexmap::IndexMap;
use serde_yaml::Value;

use crate::dotenv::is_var_name;
use crate::error::{child, Issues};
use crate::yaml::key_text;

/// Where `${VAR}` values come from: the environment first, then the `.env` file (if any).
#[derive(Debug)]
pub(crate) struct Vars<'a> {
    env: &'a HashMap<String, String>,
    dotenv: IndexMap<String, String>,
    dotenv_path: Option<PathBuf>,
}

impl<'a> Vars<'a> {
    pub fn new(
        env: &'a HashMap<String, String>,
        dotenv: IndexMap<String, String>,
        dotenv_path: Option<PathBuf>,
    ) -> Self {
        Self {
            env,
            dotenv,
            dotenv_path,
        }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.env
            .get(name)
            .or_else(|| self.dotenv.get(name))
            .map(String::as_str)
    }

    fn missing(&self, name: &str) -> String {
        let where_ = match &self.dotenv_path {
            Some(p) => format!("not in the environment nor in {}", p.display()),
            None => "not in the environment, and no .env file was found".into(),
        };
        format!("${{{name}}} is not set ({where_}) and has no default; set it, or write ${{{name}:-default}}")
    }
}

/// Interpolates every string in `value` in place; problems go to `issues` under their key path.
pub(crate) fn expand_tree(value: &mut Value, path: &str, vars: &Vars, issues: &mut Issues) {
    match value {
        Value::String(s) => match expand(s, vars) {
            Ok(v) => *s = v,
            Err(message) => {
                issues.push(path, message);
                // Unset, so the key is not reported a second time as a bad value.
                *value = Value::Null;
            }
        },
        Value::Sequence(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                expand_tree(item, &format!("{path}[{i}]"), vars, issues);
            }
        }
        Value::Mapping(map) => {
            for (k, v) in map.iter_mut() {
                expand_tree(v, &child(path, &key_text(k)), vars, issues);
            }
        }
        Value::Tagged(t) => expand_tree(&mut t.value, path, vars, issues),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Interpolates one string; the error is a message for the user (the caller adds the key).
pub(crate) fn expand(s: &str, vars: &Vars) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
            continue;
        }
        let Some(inner) = after.strip_prefix('{') else {
            out.push('$');
            rest = after;
            continue;
        };
        let end = closing_brace(inner).ok_or_else(|| format!("unterminated \"${{\" in {s:?}"))?;
        out.push_str(&substitute(&inner[..end], vars)?);
        rest = &inner[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Byte offset of the `}` closing a `${`, counting nested braces.
fn closing_brace(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return Some(i),
            '}' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// The value of one `${...}` body: `VAR`, `VAR:-default` or `VAR-default`.
fn substitute(body: &str, vars: &Vars) -> Result<String, String> {
    let split = body
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(body.len());
    let (name, op) = body.split_at(split);
    if !is_var_name(name) {
        return Err(format!(
            "\"${{{body}}}\": {name:?} is not a variable name (letters, digits and _, not starting with a digit)"
        ));
    }
    let value = vars.get(name);
    if op.is_empty() {
        return value.map(str::to_owned).ok_or_else(|| vars.missing(name));
    }
    let (default, empty_counts_as_unset) = if let Some(d) = op.strip_prefix(":-") {
        (d, true)
    } else if let Some(d) = op.strip_prefix('-') {
        (d, false)
    } else {
        return Err(format!(
            "\"${{{body}}}\" is not a supported form; use ${{{name}}}, ${{{name}:-default}} or ${{{name}-default}}"
        ));
    };
    match value {
        Some(v) if !(empty_counts_as_unset && v.is_empty()) => Ok(v.to_owned()),
        _ => expand(default, vars),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn forms() {
        let e = env(&[("A", "1"), ("EMPTY", "")]);
        let v = Vars::new(&e, IndexMap::new(), None);
        assert_eq!(expand("x${A}y", &v).unwrap(), "x1y");
        assert_eq!(expand("${B:-8000}", &v).unwrap(), "8000");
        assert_eq!(expand("${EMPTY:-d}", &v).unwrap(), "d");
        assert_eq!(expand("${EMPTY-d}", &v).unwrap(), "");
        assert_eq!(expand("${B-d}", &v).unwrap(), "d");
        assert_eq!(expand("${B:-}", &v).unwrap(), "");
        assert_eq!(expand("${B:-${A}/m}", &v).unwrap(), "1/m");
        assert_eq!(expand("$$A $A ${A}$", &v).unwrap(), "$A $A 1$");
    }

    #[test]
    fn environment_beats_dotenv() {
        let e = env(&[("A", "env")]);
        let mut d = IndexMap::new();
        d.insert("A".to_string(), "dotenv".to_string());
        d.insert("B".to_string(), "dotenv".to_string());
        let v = Vars::new(&e, d, Some(PathBuf::from(".env")));
        assert_eq!(expand("${A} ${B}", &v).unwrap(), "env dotenv");
    }

    #[test]
    fn errors() {
        let e = env(&[]);
        let v = Vars::new(&e, IndexMap::new(), Some(PathBuf::from("specs/.env")));
        let m = expand("${NOPE}", &v).unwrap_err();
        assert!(m.starts_with("${NOPE} is not set"), "{m}");
        assert!(m.contains("specs/.env"), "{m}");
        assert!(expand("${A", &v).unwrap_err().contains("unterminated"));
        assert!(expand("${1A}", &v)
            .unwrap_err()
            .contains("not a variable name"));
        assert!(expand("${A:?x}", &v)
            .unwrap_err()
            .contains("not a supported form"));
    }

    #[test]
    fn tree_errors_name_the_key_path() {
        let e = env(&[("N", "4")]);
        let v = Vars::new(&e, IndexMap::new(), None);
        let mut doc: Value =
            serde_yaml::from_str("engine: {max_num_seqs: '${SEQS}', tp: '${N}'}\nl: [a, '${X}']")
                .unwrap();
        let mut issues = Issues::default();
        expand_tree(&mut doc, "", &v, &mut issues);
        let issues = issues.into_vec();
        assert_eq!(issues.len(), 2);
        assert_eq!(issues[0].key, "engine.max_num_seqs");
        assert!(issues[0].message.contains("${SEQS} is not set"));
        assert_eq!(issues[1].key, "l[1]");
        assert_eq!(doc["engine"]["tp"], Value::String("4".into()));
    }
}
