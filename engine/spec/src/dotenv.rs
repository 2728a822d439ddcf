//! `.env` files: where to find one for a spec, and reading its `KEY=VALUE` lines.
//!
//! The format is docker compose's: `#` comments, optional `export `, values bare, 'single quoted'
//! (literal) or "double quoted" (with `\n`, `\"`, `\\` escapes). Values are not interpolated.
//! Which variables win over which is interp.rs's business, not this file's.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;

use crate::SpecError;

/// The `.env` to use for a spec: the one next to the spec file, else the one in the current
/// directory, else none.
pub(crate) fn find(spec_path: &Path) -> Option<PathBuf> {
    let beside = spec_path
        .parent()
        .map(|d| {
            if d.as_os_str().is_empty() {
                Path::new(".")
            } else {
                d
            }
        })
        .unwrap_or(Path::new("."))
        .join(".env");
    if beside.is_file() {
        return Some(beside);
    }
    let here = PathBuf::from(".env");
    here.is_file().then_some(here)
}

/// Reads and parses a `.env` file.
pub(crate) fn read(path: &Path) -> Result<IndexMap<String, String>, SpecError> {
    let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &text)
}

/// Parses `.env` text; `path` is only used in error messages.
pub(crate) fn parse(path: &Path, text: &str) -> Result<IndexMap<String, String>, SpecError> {
    let mut vars = IndexMap::new();
    for (i, raw) in text.lines().enumerate() {
        let err = |message: String| SpecError::Dotenv {
            path: path.to_path_buf(),
            line: i + 1,
            message,
        };
        let line = raw.trim_start_matches('\u{feff}').trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
        let Some((key, rest)) = line.split_once('=') else {
            return Err(err(format!("expected KEY=VALUE, found {line:?}")));
        };
        let key = key.trim();
        if !is_var_name(key) {
            return Err(err(format!(
                "{key:?} is not a variable name (letters, digits and _, not starting with a digit)"
            )));
        }
        let value = parse_value(rest.trim_start()).map_err(err)?;
        vars.insert(key.to_owned(), value);
    }
    Ok(vars)
}

fn parse_value(v: &str) -> Result<String, String> {
    if let Some(body) = v.strip_prefix('\'') {
        let end = body
            .find('\'')
            .ok_or("unterminated single quote (values cannot span lines)")?;
        check_after_quote(&body[end + 1..])?;
        return Ok(body[..end].to_owned());
    }
    if let Some(body) = v.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = body.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    check_after_quote(&body[i + 1..])?;
                    return Ok(out);
                }
                '\\' => match chars.next() {
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 't')) => out.push('\t'),
                    Some((_, other)) => out.push(other),
                    None => break,
                },
                c => out.push(c),
            }
        }
        return Err("unterminated double quote (values cannot span lines)".into());
    }
    // Bare value: a ` #` starts a comment.
    let end = v
        .char_indices()
        .find(|&(i, c)| c == '#' && i > 0 && v[..i].ends_with([' ', '\t']))
        .map_or(v.len(), |(i, _)| i);
    Ok(v[..end].trim_end().to_owned())
}

fn check_after_quote(rest: &str) -> Result<(), String> {
    let rest = rest.trim();
    if rest.is_empty() || rest.starts_with('#') {
        Ok(())
    } else {
        Err(format!("unexpected text after the closing quote: {rest:?}"))
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`, the names `${...}` and `.env` accept.
pub(crate) fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> IndexMap<String, String> {
        parse(Path::new(".env"), text).unwrap()
    }

    #[test]
    fn forms() {
        let v = p("# comment\n\nA=1\nexport B = two words # note\nC='x # y'\nD=\"a\\\"b\\n\"\nE=\nF=a#b\n");
        assert_eq!(v["A"], "1");
        assert_eq!(v["B"], "two words");
        assert_eq!(v["C"], "x # y");
        assert_eq!(v["D"], "a\"b\n");
        assert_eq!(v["E"], "");
        assert_eq!(v["F"], "a#b");
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse(Path::new("x/.env"), "A=1\nnot a line\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "x/.env:2: expected KEY=VALUE, found \"not a line\""
        );
        let e = parse(Path::new(".env"), "1A=2").unwrap_err();
        assert!(e.to_string().contains("not a variable name"), "{e}");
        let e = parse(Path::new(".env"), "A=\"open").unwrap_err();
        assert!(e.to_string().contains("unterminated"), "{e}");
    }

    #[test]
    fn finds_the_file_beside_the_spec_first() {
        let dir = tempfile::tempdir().unwrap();
        let spec = dir.path().join("x.yaml");
        assert_eq!(find(&spec).filter(|p| p.starts_with(dir.path())), None);
        std::fs::write(dir.path().join(".env"), "A=1\n").unwrap();
        assert_eq!(find(&spec), Some(dir.path().join(".env")));
    }
}
