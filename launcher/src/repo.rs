//! Where the Hearth repository is: images/ (Dockerfiles), specs/ (the default spec) and
//! target/release/hearth-engine (the host-built engine the CPU image carries).

use std::path::{Path, PathBuf};

use crate::problem::{Problem, Problems};

/// The default spec, relative to the repository.
pub const DEFAULT_SPEC: &str = "specs/default.yaml";

/// The repository root: `explicit` (--repo / HEARTH_REPO), else the nearest parent of the
/// current directory holding images/cpu.Dockerfile, else the one this binary sits in
/// (`<repo>/target/release/hearth`).
pub fn find(explicit: Option<&Path>) -> Result<PathBuf, Problems> {
    if let Some(dir) = explicit {
        return if is_repo(dir) {
            Ok(dir.to_path_buf())
        } else {
            Err(Problems::one(
                "setup",
                Problem::new(
                    format!("{} is not a Hearth repository (no images/cpu.Dockerfile)", dir.display()),
                    "point --repo / HEARTH_REPO at the directory holding launch, specs/ and images/",
                ),
            ))
        };
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    let exe = std::env::current_exe().unwrap_or_default();
    cwd.ancestors()
        .chain(exe.ancestors())
        .find(|d| is_repo(d))
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            Problems::one(
                "setup",
                Problem::new(
                    "cannot find the Hearth repository from here",
                    "run hearth inside the repository (./launch does), or set HEARTH_REPO",
                ),
            )
        })
}

fn is_repo(dir: &Path) -> bool {
    dir.join("images").join("cpu.Dockerfile").is_file()
}

/// The spec to use: the one given, else the repository's default.
pub fn spec_path(repo: &Path, given: Option<&Path>) -> PathBuf {
    match given {
        Some(p) => p.to_path_buf(),
        None => repo.join(DEFAULT_SPEC),
    }
}

/// The host-built engine binary the CPU image carries: `$HEARTH_ENGINE_BIN`, else
/// `<repo>/target/release/hearth-engine`.
pub fn engine_binary(repo: &Path) -> PathBuf {
    match std::env::var_os("HEARTH_ENGINE_BIN") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => repo.join("target").join("release").join("hearth-engine"),
    }
}

/// `path` made absolute against the current directory (Docker wants absolute bind sources).
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
