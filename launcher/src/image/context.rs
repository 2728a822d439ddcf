//! Build contexts, made in memory as tar archives and sent to Docker as the request body.
//! The archive is deterministic (sorted entries, zero mtimes and owners, fixed modes), so its
//! sha256 is the content hash of everything the image is built from: same hash, same image.
//!
//! - CPU: `Dockerfile` (images/cpu.Dockerfile) and `rootfs/`: the host-built engine at
//!   /usr/local/bin/hearth-engine, the host-built monitor beside it when it is built (compose's
//!   monitor service runs it from this image), the shared libraries they link at their paths,
//!   an empty /tmp.
//! - CUDA: `Dockerfile` (images/cuda.Dockerfile) and the workspace sources it builds from.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use sha2::{Digest, Sha256};

use super::ldd;

/// A build context: the tar bytes and their hash.
#[derive(Debug)]
pub struct Context {
    pub tar: Vec<u8>,
    /// Hex sha256 of `tar`.
    pub hash: String,
    pub files: usize,
}

/// What goes into an archive: path in the archive -> (bytes, mode). Directories end in `/`.
#[derive(Debug, Default)]
struct Entries(BTreeMap<String, (Vec<u8>, u32)>);

impl Entries {
    fn file(&mut self, name: &str, data: Vec<u8>, mode: u32) {
        self.0.insert(name.to_owned(), (data, mode));
    }

    fn dir(&mut self, name: &str, mode: u32) {
        self.0.insert(
            format!("{}/", name.trim_end_matches('/')),
            (Vec::new(), mode),
        );
    }

    fn read(&mut self, name: &str, from: &Path, mode: u32) -> anyhow::Result<()> {
        let data = std::fs::read(from).with_context(|| format!("reading {}", from.display()))?;
        self.file(name, data, mode);
        Ok(())
    }

    fn into_context(self) -> anyhow::Result<Context> {
        let files = self.0.len();
        let mut tar = tar::Builder::new(Vec::new());
        for (name, (data, mode)) in self.0 {
            let mut h = tar::Header::new_gnu();
            h.set_mode(mode);
            h.set_uid(0);
            h.set_gid(0);
            h.set_mtime(0);
            if name.ends_with('/') {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_size(0);
            } else {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(data.len() as u64);
            }
            h.set_cksum();
            tar.append_data(&mut h, &name, data.as_slice())
                .with_context(|| format!("adding {name} to the build context"))?;
        }
        let tar = tar.into_inner().context("finishing the build context")?;
        let hash = hex(&Sha256::digest(&tar));
        Ok(Context { tar, hash, files })
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The CPU image's context: the Dockerfile, the engine binary (and the monitor's, from the
/// same build, when it is there) and their shared libraries.
pub fn cpu(repo: &Path, engine: &Path) -> anyhow::Result<Context> {
    let mut e = Entries::default();
    e.read("Dockerfile", &repo.join("images/cpu.Dockerfile"), 0o644)?;
    let monitor = engine.with_file_name("hearth-monitor");
    let mut binaries = vec![("rootfs/usr/local/bin/hearth-engine", engine)];
    if monitor.is_file() {
        binaries.push(("rootfs/usr/local/bin/hearth-monitor", &monitor));
    }
    for (name, binary) in binaries {
        e.read(name, binary, 0o755)?;
        for lib in ldd::libraries(binary)? {
            let name = format!("rootfs{}", lib.display());
            // Loaders and libraries are opened for execution, so they keep the exec bit.
            e.read(&name, &lib, 0o755)?;
        }
    }
    e.dir("rootfs/tmp", 0o1777);
    e.dir("rootfs/etc/hearth", 0o755);
    e.into_context()
}

/// Top-level entries of the repository the CUDA build needs: the workspace manifest, lock
/// and lint config, and every member crate (cargo reads all members' manifests).
const CUDA_SOURCES: [&str; 8] = [
    "Cargo.toml",
    "Cargo.lock",
    "clippy.toml",
    "rustfmt.toml",
    "engine",
    "launcher",
    "monitor",
    "tests",
];

/// Directory names never sent: build outputs and caches.
const SKIP_DIRS: [&str; 5] = ["target", ".git", "__pycache__", ".cache", "node_modules"];

/// The CUDA image's context: the Dockerfile and the workspace sources.
pub fn cuda(repo: &Path) -> anyhow::Result<Context> {
    let mut e = Entries::default();
    e.read("Dockerfile", &repo.join("images/cuda.Dockerfile"), 0o644)?;
    for top in CUDA_SOURCES {
        let path = repo.join(top);
        if path.is_dir() {
            add_tree(&mut e, repo, &path)?;
        } else if path.is_file() {
            e.read(top, &path, 0o644)?;
        }
    }
    e.into_context()
}

fn add_tree(e: &mut Entries, repo: &Path, dir: &Path) -> anyhow::Result<()> {
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd = std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))?;
        for entry in rd {
            let entry = entry.with_context(|| format!("reading {}", d.display()))?;
            let path = entry.path();
            let kind = entry.file_type()?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if kind.is_dir() {
                if !SKIP_DIRS.contains(&name.as_str()) {
                    stack.push(path);
                }
            } else if kind.is_file() {
                let rel = path.strip_prefix(repo).unwrap_or(&path);
                e.read(&rel.to_string_lossy(), &path, 0o644)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(ctx: &Context) -> Vec<String> {
        let mut a = tar::Archive::new(ctx.tar.as_slice());
        a.entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect()
    }

    #[test]
    fn archives_are_deterministic_and_hash_their_content() {
        let build = |data: &[u8]| {
            let mut e = Entries::default();
            e.file("b", data.to_vec(), 0o644);
            e.file("a", b"x".to_vec(), 0o755);
            e.dir("d", 0o1777);
            e.into_context().unwrap()
        };
        let one = build(b"same");
        let two = build(b"same");
        assert_eq!(one.hash, two.hash);
        assert_eq!(one.files, 3);
        assert_eq!(names(&one), ["a", "b", "d/"]);
        assert_ne!(build(b"other").hash, one.hash);
    }

    #[test]
    fn cuda_context_skips_build_outputs() {
        let repo = tempfile::tempdir().unwrap();
        let r = repo.path();
        std::fs::create_dir_all(r.join("images")).unwrap();
        std::fs::write(r.join("images/cuda.Dockerfile"), "FROM x\n").unwrap();
        std::fs::write(r.join("Cargo.toml"), "[workspace]\n").unwrap();
        std::fs::create_dir_all(r.join("engine/spec/src")).unwrap();
        std::fs::write(r.join("engine/spec/src/lib.rs"), "").unwrap();
        std::fs::create_dir_all(r.join("engine/target/release")).unwrap();
        std::fs::write(r.join("engine/target/release/big"), "x").unwrap();
        let ctx = cuda(r).unwrap();
        assert_eq!(
            names(&ctx),
            ["Cargo.toml", "Dockerfile", "engine/spec/src/lib.rs"]
        );
    }
}
