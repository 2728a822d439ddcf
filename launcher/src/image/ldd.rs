//! The shared libraries a dynamically linked binary needs, read from `ldd`'s output, so the
//! scratch CPU image can carry them beside the engine (libc, libm, libgcc_s, the loader).

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context};

/// The files the binary at `path` loads: every `name => /path` line and the loader line
/// (`/lib64/ld-linux-x86-64.so.2`). The vDSO lives in the kernel and is skipped. Empty for a
/// static binary.
pub fn libraries(path: &std::path::Path) -> anyhow::Result<Vec<PathBuf>> {
    let out = Command::new("ldd")
        .arg(path)
        .output()
        .context("running ldd (from libc-bin) to list the engine's shared libraries")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        // ldd says so and exits 1 for static binaries: nothing to copy.
        if text.contains("not a dynamic executable") || err.contains("not a dynamic executable") {
            return Ok(Vec::new());
        }
        bail!("ldd {}: {}{}", path.display(), text.trim(), err.trim());
    }
    parse(&text)
}

/// Parses `ldd` output.
pub fn parse(text: &str) -> anyhow::Result<Vec<PathBuf>> {
    let mut libs = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.contains("statically linked") {
            continue;
        }
        let target = match line.split_once("=>") {
            Some((name, rest)) => {
                let rest = rest.trim();
                if rest.starts_with("not found") {
                    bail!(
                        "the engine needs {}, which is not installed here",
                        name.trim()
                    );
                }
                rest
            }
            None => line,
        };
        let path = target.split_whitespace().next().unwrap_or_default();
        // `linux-vdso.so.1 (0x...)` has no path; `=> (0x...)` neither.
        if path.starts_with('/') {
            libs.push(PathBuf::from(path));
        }
    }
    Ok(libs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_libraries_and_the_loader() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                    \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f1)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f2)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f3)\n";
        assert_eq!(
            parse(text).unwrap(),
            [
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
    }

    #[test]
    fn a_missing_library_is_an_error() {
        let e = parse("\tlibfoo.so.1 => not found\n").unwrap_err();
        assert!(e.to_string().contains("libfoo.so.1"), "{e}");
    }

    #[test]
    fn static_binaries_need_nothing() {
        assert!(parse("\tstatically linked\n").unwrap().is_empty());
    }
}
