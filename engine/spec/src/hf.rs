//! `hf:org/name[@revision]` sources, read from the Hugging Face hub cache layout
//! (`<hub>/models--org--name/{refs/<branch>, snapshots/<commit>/}`) that `hf download` and
//! transformers write. This build never talks to the hub: a repository that is not cached is an
//! error that says how to put it there.

use std::path::{Path, PathBuf};

use crate::SpecError;

/// The hub cache: `$HF_HUB_CACHE`, `$HF_HOME/hub`, `$XDG_CACHE_HOME/huggingface/hub`, else
/// `~/.cache/huggingface/hub` (huggingface_hub's order), through `lookup`.
pub(crate) fn hub_dir(lookup: impl Fn(&str) -> Option<String>) -> PathBuf {
    let var = |k: &str| lookup(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(d) = var("HF_HUB_CACHE") {
        return d;
    }
    if let Some(d) = var("HF_HOME") {
        return d.join("hub");
    }
    let cache =
        var("XDG_CACHE_HOME").unwrap_or_else(|| var("HOME").unwrap_or_default().join(".cache"));
    cache.join("huggingface").join("hub")
}

/// The snapshot directory of `repo` at `revision` (a branch, tag or commit; default `main`).
pub(crate) fn find(repo: &str, revision: Option<&str>, hub: &Path) -> Result<PathBuf, SpecError> {
    let repo_dir = hub.join(format!("models--{}", repo.replace('/', "--")));
    let snapshots = repo_dir.join("snapshots");
    let rev = revision.unwrap_or("main");
    let commit = if is_commit(rev) {
        Some(rev.to_owned())
    } else {
        std::fs::read_to_string(repo_dir.join("refs").join(rev))
            .ok()
            .map(|s| s.trim().to_owned())
    };
    if let Some(dir) = commit.map(|c| snapshots.join(c)).filter(|d| d.is_dir()) {
        return Ok(dir);
    }
    // A copied cache often lacks refs/; one snapshot is unambiguous.
    if revision.is_none() {
        let dirs: Vec<PathBuf> = std::fs::read_dir(&snapshots)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default();
        if let [only] = dirs.as_slice() {
            return Ok(only.clone());
        }
    }
    Err(not_cached(repo, revision, hub, &repo_dir))
}

fn is_commit(rev: &str) -> bool {
    rev.len() == 40 && rev.chars().all(|c| c.is_ascii_hexdigit())
}

fn not_cached(repo: &str, revision: Option<&str>, hub: &Path, repo_dir: &Path) -> SpecError {
    let at = revision.map(|r| format!("@{r}")).unwrap_or_default();
    let rev_flag = revision
        .map(|r| format!(" --revision {r}"))
        .unwrap_or_default();
    let dir_name = repo_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    SpecError::NotCached {
        repo: repo.to_owned(),
        message: format!(
            "hf:{repo}{at} is not in the Hugging Face cache (looked in {}). This build does not \
             download from the hub. Either run `hf download {repo}{rev_flag}` on a machine that \
             can, and copy its {dir_name} directory into {} here (or set HF_HOME / HF_HUB_CACHE \
             to the cache that has it), or copy the model files (config.json, *.safetensors, \
             tokenizer files) into a directory and set model: to that path.",
            repo_dir.display(),
            hub.display(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn hub_dir_order() {
        let hub = |pairs: &'static [(&str, &str)]| {
            hub_dir(move |k| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            })
        };
        assert_eq!(
            hub(&[("HF_HUB_CACHE", "/a"), ("HF_HOME", "/b")]),
            PathBuf::from("/a")
        );
        assert_eq!(hub(&[("HF_HOME", "/b")]), PathBuf::from("/b/hub"));
        assert_eq!(
            hub(&[("HOME", "/h")]),
            PathBuf::from("/h/.cache/huggingface/hub")
        );
    }

    #[test]
    fn finds_snapshots_by_ref_commit_or_only_one() {
        let hub = tempfile::tempdir().unwrap();
        let repo = hub.path().join("models--Qwen--Qwen3-8B");
        let snap = repo.join("snapshots").join(COMMIT);
        std::fs::create_dir_all(&snap).unwrap();
        // No refs/main, one snapshot: that one.
        assert_eq!(find("Qwen/Qwen3-8B", None, hub.path()).unwrap(), snap);
        assert_eq!(
            find("Qwen/Qwen3-8B", Some(COMMIT), hub.path()).unwrap(),
            snap
        );
        std::fs::create_dir_all(repo.join("snapshots").join("f".repeat(40))).unwrap();
        assert!(find("Qwen/Qwen3-8B", None, hub.path()).is_err());
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::write(repo.join("refs/main"), format!("{COMMIT}\n")).unwrap();
        assert_eq!(find("Qwen/Qwen3-8B", None, hub.path()).unwrap(), snap);
    }

    #[test]
    fn missing_repo_says_how_to_place_it() {
        let hub = tempfile::tempdir().unwrap();
        let e = find("Qwen/Qwen3-8B", Some("v1"), hub.path()).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("hf:Qwen/Qwen3-8B@v1 is not in the Hugging Face cache"),
            "{msg}"
        );
        assert!(msg.contains("does not download from the hub"), "{msg}");
        assert!(
            msg.contains("hf download Qwen/Qwen3-8B --revision v1"),
            "{msg}"
        );
        assert!(msg.contains("models--Qwen--Qwen3-8B directory"), "{msg}");
    }
}
