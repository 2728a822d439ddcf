//! `hf:org/name[@revision]` sources, read from the Hugging Face hub cache layout
//! (`<hub>/models--org--name/{refs/<branch>, snapshots/<commit>/}`) that `hf download` and
//! transformers write. A repository that is not cached yet is downloaded into that cache by
//! the hub's own command-line client (`hf download` from PyPI's huggingface_hub, or the older
//! `huggingface-cli download`), which shows its progress and reads HF_TOKEN, HF_ENDPOINT and
//! HF_HUB_OFFLINE itself; weights in formats the engine does not load (PyTorch pickles,
//! TensorFlow, Flax, ONNX) are skipped.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::SpecError;

/// Hub files the engine never reads, left out of downloads.
const SKIPPED: &[&str] = &[
    "*.bin",
    "*.pt",
    "*.pth",
    "*.h5",
    "*.msgpack",
    "*.onnx",
    "*.ot",
    "original/*",
];

/// The hub's clients, newest first: (program, subcommand).
const CLIENTS: &[(&str, &str)] = &[("hf", "download"), ("huggingface-cli", "download")];

/// The cached snapshot of `repo`, downloading it first when it is not there (unless
/// `offline`, huggingface_hub's HF_HUB_OFFLINE).
pub(crate) fn fetch(
    repo: &str,
    revision: Option<&str>,
    hub: &Path,
    offline: bool,
) -> Result<PathBuf, SpecError> {
    fetch_with(CLIENTS, repo, revision, hub, offline)
}

fn fetch_with(
    clients: &[(&str, &str)],
    repo: &str,
    revision: Option<&str>,
    hub: &Path,
    offline: bool,
) -> Result<PathBuf, SpecError> {
    match find(repo, revision, hub) {
        Err(SpecError::NotCached { .. }) if !offline => {
            download(clients, repo, revision, hub)?;
            find(repo, revision, hub)
        }
        found => found,
    }
}

/// Whether huggingface_hub's HF_HUB_OFFLINE says not to reach the hub, through `lookup`.
pub(crate) fn offline(lookup: impl Fn(&str) -> Option<String>) -> bool {
    lookup("HF_HUB_OFFLINE").is_some_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

/// The first of `clients` that is installed downloads `repo` into the hub cache `hub`.
fn download(
    clients: &[(&str, &str)],
    repo: &str,
    revision: Option<&str>,
    hub: &Path,
) -> Result<(), SpecError> {
    let at = revision.map(|r| format!("@{r}")).unwrap_or_default();
    eprintln!(
        "fetching hf:{repo}{at} into {} (hf download)",
        hub.display()
    );
    let mut tried = Vec::new();
    for &(program, sub) in clients {
        let mut cmd = Command::new(program);
        cmd.arg(sub).arg(repo).arg("--cache-dir").arg(hub);
        if let Some(r) = revision {
            cmd.args(["--revision", r]);
        }
        for pattern in SKIPPED {
            cmd.args(["--exclude", pattern]);
        }
        // The client's progress goes to our stderr: stdout may be carrying generated text.
        let status = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::from(io::stderr()))
            .status();
        match status {
            Ok(s) if s.success() => return Ok(()),
            Ok(s) => {
                return Err(SpecError::Command {
                    what: format!("{program} {sub} {repo}{at}"),
                    detail: format!(
                        "{s} (its output is above); for a gated or private repository set                          HF_TOKEN; to place it by hand, see `hf download --help`"
                    ),
                })
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => tried.push(program),
            Err(e) => {
                return Err(SpecError::Command {
                    what: format!("{program} {sub} {repo}{at}"),
                    detail: e.to_string(),
                })
            }
        }
    }
    Err(SpecError::Command {
        what: format!("downloading hf:{repo}{at}"),
        detail: format!(
            "neither {} is installed; `python3 -m pip install huggingface_hub` provides `hf`",
            tried.join(" nor ")
        ),
    })
}

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
            "hf:{repo}{at} is not in the Hugging Face cache (looked in {}). Where the hub can \
             be reached (and HF_HUB_OFFLINE is not set) it is downloaded with `hf download`; \
             otherwise run `hf download {repo}{rev_flag}` on a machine that can, and copy its \
             {dir_name} directory into {} here (or set HF_HOME / HF_HUB_CACHE to the cache that \
             has it), or copy the model files (config.json, *.safetensors, tokenizer files) \
             into a directory and set model: to that path.",
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

    /// A stand-in for `hf`: a shell script that records its arguments and writes the snapshot
    /// layout the real client writes into `--cache-dir`.
    fn fake_client(dir: &Path, exit: i32) -> PathBuf {
        let script = dir.join("fake-hf");
        let body = format!(
            "#!/bin/sh\necho \"$@\" > {args}\nwhile [ $# -gt 0 ]; do [ \"$1\" = --cache-dir ] && \
             hub=$2; shift; done\nrepo=$hub/models--acme--tiny\nmkdir -p $repo/refs \
             $repo/snapshots/{COMMIT}\necho {COMMIT} > $repo/refs/main\n\
             echo '{{}}' > $repo/snapshots/{COMMIT}/config.json\nexit {exit}\n",
            args = dir.join("args").display()
        );
        std::fs::write(&script, body).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        script
    }

    #[test]
    fn a_repo_not_cached_is_downloaded_with_the_hub_client() {
        let dir = tempfile::tempdir().unwrap();
        let hub = dir.path().join("hub");
        let client = fake_client(dir.path(), 0);
        let client = client.to_str().unwrap();
        // The first client is not installed; the second is.
        let clients = [("hearth-no-such-client", "download"), (client, "download")];
        let snap = fetch_with(&clients, "acme/tiny", None, &hub, false).unwrap();
        assert_eq!(snap, hub.join("models--acme--tiny/snapshots").join(COMMIT));
        let args = std::fs::read_to_string(dir.path().join("args")).unwrap();
        assert!(
            args.starts_with("download acme/tiny --cache-dir "),
            "{args}"
        );
        assert!(args.contains("--exclude *.bin"), "{args}");
        // Cached now: found without running anything.
        std::fs::remove_file(dir.path().join("args")).unwrap();
        assert_eq!(
            fetch_with(&clients, "acme/tiny", None, &hub, false).unwrap(),
            snap
        );
        assert!(!dir.path().join("args").exists());
    }

    #[test]
    fn offline_missing_and_failing_clients_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let hub = dir.path().join("hub");
        let none = [("hearth-no-such-client", "download")];
        let e = fetch_with(&none, "acme/tiny", None, &hub, true).unwrap_err();
        assert!(matches!(e, SpecError::NotCached { .. }), "{e}");
        let e = fetch_with(&none, "acme/tiny", Some("v2"), &hub, false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("neither hearth-no-such-client is installed"),
            "{e}"
        );
        assert!(e.contains("pip install huggingface_hub"), "{e}");
        let failing = fake_client(dir.path(), 3);
        let clients = [(failing.to_str().unwrap(), "download")];
        let e = fetch_with(&clients, "acme/tiny", Some("v2"), &hub, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("download acme/tiny@v2"), "{e}");
        assert!(e.contains("HF_TOKEN"), "{e}");
        let args = std::fs::read_to_string(dir.path().join("args")).unwrap();
        assert!(args.contains("--revision v2"), "{args}");
    }

    #[test]
    fn offline_follows_huggingface_hub() {
        let with = |v: &'static str| offline(move |k| (k == "HF_HUB_OFFLINE").then(|| v.into()));
        assert!(with("1") && with("true") && with("ON"));
        assert!(!with("0") && !with(""));
        assert!(!offline(|_| None));
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
        assert!(msg.contains("downloaded with `hf download`"), "{msg}");
        assert!(
            msg.contains("hf download Qwen/Qwen3-8B --revision v1"),
            "{msg}"
        );
        assert!(msg.contains("models--Qwen--Qwen3-8B directory"), "{msg}");
    }
}
