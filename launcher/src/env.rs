//! The variables a spec's `${VAR}`s read, with the values they have here (environment first,
//! then `.env`, as hearth-spec resolves them). The engine container reads the same spec file,
//! so it gets exactly these as its environment and resolves the spec to the same values.

use std::path::Path;

use indexmap::IndexMap;

/// Names of the variables `${NAME...}` in `text` refers to, in order of first use. A superset
/// is harmless (a `$${X}` literal or a commented-out line only passes one more variable).
pub fn referenced(text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        rest = &rest[i + 2..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let name = &rest[..end];
        let valid = name.chars().next().is_some_and(|c| !c.is_ascii_digit());
        if valid && !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    names
}

/// The value of each variable `spec_text` refers to that is set here: the process environment
/// wins over `dotenv` (the `.env` the spec was loaded with). Unset ones are left out, so the
/// container falls back to the same `${VAR:-default}` as this machine did.
pub fn values(
    spec_text: &str,
    dotenv: Option<&Path>,
) -> Result<IndexMap<String, String>, hearth_spec::SpecError> {
    let file_vars = match dotenv {
        Some(p) => hearth_spec::read_dotenv(p)?,
        None => IndexMap::new(),
    };
    Ok(pick(spec_text, |k| {
        std::env::var(k).ok().or_else(|| file_vars.get(k).cloned())
    }))
}

fn pick(spec_text: &str, lookup: impl Fn(&str) -> Option<String>) -> IndexMap<String, String> {
    referenced(spec_text)
        .into_iter()
        .filter_map(|name| lookup(&name).map(|v| (name, v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_variable_once_including_nested_defaults() {
        let text = "port: ${PORT:-8000}\nmodel: ${MODEL_DIR:-/m}/x\nk: ${A:-${B:-x}} ${PORT}\n\
                    bad: ${1X} $HOME ${ }";
        assert_eq!(referenced(text), ["PORT", "MODEL_DIR", "A", "B"]);
    }

    #[test]
    fn only_set_variables_are_passed() {
        let got = pick(
            "a: ${PORT:-8000}\nb: ${API_KEY:-}\nc: ${UNSET:-x}",
            |k| match k {
                "PORT" => Some("9000".into()),
                "API_KEY" => Some(String::new()),
                _ => None,
            },
        );
        let got: Vec<_> = got.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(got, ["PORT=9000", "API_KEY="]);
    }
}
