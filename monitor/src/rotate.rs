//! `RotatingFile`: the guard that owns logs/serve.log. Whole lines are appended; when the next
//! line would take the file past `max_bytes`, the file is shifted to `serve.log.1` (`.1` to
//! `.2`, ..., the oldest beyond `keep` deleted) and a fresh one started, so no line is ever
//! split across files. A single line longer than the limit gets a file of its own.
//!
//! Lines are written straight to the file (no user-space buffer): the log rate of an engine is
//! small, and a monitor killed with SIGKILL must not lose what it already read.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::Error;

#[derive(Debug)]
pub struct RotatingFile {
    path: PathBuf,
    file: File,
    size: u64,
    max_bytes: u64,
    keep: usize,
}

impl RotatingFile {
    /// Opens (appending to) `dir/name`, creating `dir` when missing.
    pub fn open(dir: &Path, name: &str, max_bytes: u64, keep: usize) -> Result<Self, Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("creating", dir, e))?;
        let path = dir.join(name);
        let file = append(&path)?;
        let size = file
            .metadata()
            .map_err(|e| Error::io("reading the size of", &path, e))?
            .len();
        Ok(Self {
            path,
            file,
            size,
            max_bytes: max_bytes.max(1),
            keep,
        })
    }

    /// Appends `line` and a newline, rotating first when they would not fit.
    pub fn write_line(&mut self, line: &str) -> Result<(), Error> {
        let len = line.len() as u64 + 1;
        if self.size > 0 && self.size + len > self.max_bytes {
            self.rotate()?;
        }
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        self.file
            .write_all(&buf)
            .map_err(|e| Error::io("writing", &self.path, e))?;
        self.size += len;
        Ok(())
    }

    /// The numbered old file `n` (1 = the newest).
    pub fn old(&self, n: usize) -> PathBuf {
        numbered(&self.path, n)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn rotate(&mut self) -> Result<(), Error> {
        if self.keep == 0 {
            self.file = OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&self.path)
                .map_err(|e| Error::io("truncating", &self.path, e))?;
            self.size = 0;
            return Ok(());
        }
        let oldest = self.old(self.keep);
        if oldest.exists() {
            std::fs::remove_file(&oldest).map_err(|e| Error::io("removing", &oldest, e))?;
        }
        for n in (1..self.keep).rev() {
            let from = self.old(n);
            if from.exists() {
                let to = self.old(n + 1);
                std::fs::rename(&from, &to).map_err(|e| Error::io("renaming", &from, e))?;
            }
        }
        let first = self.old(1);
        std::fs::rename(&self.path, &first).map_err(|e| Error::io("renaming", &self.path, e))?;
        self.file = append(&self.path)?;
        self.size = 0;
        Ok(())
    }
}

impl Drop for RotatingFile {
    fn drop(&mut self) {
        // Written unbuffered; this only asks the kernel to put it on disk before we go.
        let _ = self.file.sync_data();
    }
}

fn append(path: &Path) -> Result<File, Error> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| Error::io("opening", path, e))
}

/// `serve.log` -> `serve.log.3`.
pub fn numbered(path: &Path, n: usize) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{n}"));
    PathBuf::from(s)
}

/// The lines of a rotated log, oldest first: `name.<keep>` ... `name.1`, then `name`.
pub fn read_all(dir: &Path, name: &str) -> std::io::Result<Vec<String>> {
    let path = dir.join(name);
    let mut files: Vec<PathBuf> = (1..)
        .map(|n| numbered(&path, n))
        .take_while(|p| p.exists())
        .collect();
    files.reverse();
    files.push(path);
    let mut lines = Vec::new();
    for f in files.iter().filter(|f| f.exists()) {
        lines.extend(std::fs::read_to_string(f)?.lines().map(str::to_owned));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_at_the_size_keeping_n_files_and_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = RotatingFile::open(dir.path(), "serve.log", 100, 3).unwrap();
        let lines: Vec<String> = (0..200).map(|i| format!("line {i:04} abcdef")).collect();
        for l in &lines {
            f.write_line(l).unwrap();
        }
        drop(f);
        let path = dir.path().join("serve.log");
        for n in 1..=3 {
            let text = std::fs::read_to_string(numbered(&path, n)).unwrap();
            assert!(text.len() <= 100, "serve.log.{n}: {} bytes", text.len());
            // 100 / 17 bytes per line: 5 whole lines per file, none split.
            assert_eq!(text.lines().count(), 5);
            assert!(text.ends_with('\n'));
        }
        assert!(!numbered(&path, 4).exists());
        let all = read_all(dir.path(), "serve.log").unwrap();
        // The newest lines survive, contiguous and in order.
        assert_eq!(all.as_slice(), &lines[lines.len() - all.len()..]);
        assert!(all.len() > 15);
    }

    #[test]
    fn reopening_appends_and_counts_the_existing_size() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = RotatingFile::open(dir.path(), "s.log", 30, 1).unwrap();
        f.write_line("0123456789").unwrap();
        drop(f);
        let mut f = RotatingFile::open(dir.path(), "s.log", 30, 1).unwrap();
        f.write_line("abcdefghij").unwrap();
        f.write_line("klmnopqrst").unwrap();
        assert_eq!(
            std::fs::read_to_string(f.old(1)).unwrap(),
            "0123456789\nabcdefghij\n"
        );
        assert_eq!(std::fs::read_to_string(f.path()).unwrap(), "klmnopqrst\n");
    }

    #[test]
    fn a_line_longer_than_the_limit_gets_its_own_file_and_keep_zero_truncates() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = RotatingFile::open(dir.path(), "s.log", 8, 0).unwrap();
        f.write_line("a").unwrap();
        f.write_line("much longer than eight").unwrap();
        assert_eq!(
            std::fs::read_to_string(f.path()).unwrap(),
            "much longer than eight\n"
        );
        assert!(!f.old(1).exists());
    }
}
