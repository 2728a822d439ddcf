//! `DirLock`: the guard that makes one monitor the only writer of a logs directory. It holds an
//! exclusive lock on `monitor.lock` (released by the kernel even when the monitor is killed,
//! and visible across the host and a compose container sharing the directory) and publishes
//! `monitor.json` (pid, spec, /metrics address) for `hearth down` and `hearth status`; the file
//! is removed when the guard drops.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Error;

pub const LOCK_FILE: &str = "monitor.lock";
pub const INFO_FILE: &str = "monitor.json";

/// What a running monitor publishes about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MonitorInfo {
    pub pid: u32,
    /// The spec name it follows (None: the only Hearth container).
    pub spec: Option<String>,
    /// Where its own /metrics answers, if it serves them.
    pub metrics: Option<String>,
    pub started: String,
}

#[derive(Debug)]
pub struct DirLock {
    _file: File,
    info: PathBuf,
}

impl DirLock {
    /// Takes the lock on `dir` (created when missing); `Error::Locked` when another monitor
    /// holds it.
    pub fn take(dir: &Path) -> Result<Self, Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("creating", dir, e))?;
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io("opening", &path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let pid = std::fs::read_to_string(&path).unwrap_or_default();
                return Err(Error::Locked {
                    dir: dir.to_path_buf(),
                    pid: pid.trim().to_owned(),
                });
            }
            Err(TryLockError::Error(e)) => return Err(Error::io("locking", &path, e)),
        }
        file.set_len(0)
            .map_err(|e| Error::io("writing", &path, e))?;
        write!(file, "{}", std::process::id()).map_err(|e| Error::io("writing", &path, e))?;
        Ok(Self {
            _file: file,
            info: dir.join(INFO_FILE),
        })
    }

    /// Publishes `monitor.json` (atomically).
    pub fn publish(&self, info: &MonitorInfo) -> Result<(), Error> {
        let tmp = self.info.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(info).unwrap_or_default();
        std::fs::write(&tmp, text + "\n").map_err(|e| Error::io("writing", &tmp, e))?;
        std::fs::rename(&tmp, &self.info).map_err(|e| Error::io("renaming", &tmp, e))
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.info);
    }
}

/// Reads a directory's `monitor.json`, if a monitor published one.
pub fn read_info(dir: &Path) -> Option<MonitorInfo> {
    serde_json::from_slice(&std::fs::read(dir.join(INFO_FILE)).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_the_info_file_goes_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let a = DirLock::take(dir.path()).unwrap();
        let held = DirLock::take(dir.path()).unwrap_err();
        assert!(
            matches!(&held, Error::Locked { pid, .. } if *pid == std::process::id().to_string()),
            "{held}"
        );
        let info = MonitorInfo {
            pid: 1,
            spec: Some("s".into()),
            metrics: None,
            started: "now".into(),
        };
        a.publish(&info).unwrap();
        assert_eq!(read_info(dir.path()), Some(info));
        drop(a);
        assert_eq!(read_info(dir.path()), None);
        let _b = DirLock::take(dir.path()).unwrap();
    }
}
