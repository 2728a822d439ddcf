//! The monitor sidecar as a host process: `up` starts `hearth-monitor` detached in the
//! background (its own process group, output in `<logs>/monitor.log`), `down` stops it with
//! SIGTERM, `status` reads the peaks it records. The monitor itself lives in monitor/; this
//! file only knows its command line and the two files it publishes in its logs directory:
//! `monitor.json` (pid, spec) while it runs and `peak.json`.
//!
//! Logs directory: `--logs` / `$HEARTH_LOGS`, else `<repo>/logs`. With several deployments side
//! by side, the first one's monitor has `logs/`; a deployment whose spec differs from the one
//! `logs/` already records gets `logs/<spec name>/`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Deserialize;

/// The logs root: the one given, else `$HEARTH_LOGS`, else `<repo>/logs`.
pub fn logs_root(given: Option<&Path>, repo: Option<&Path>) -> PathBuf {
    if let Some(p) = given {
        return crate::repo::absolute(p);
    }
    match std::env::var_os("HEARTH_LOGS") {
        Some(p) if !p.is_empty() => crate::repo::absolute(Path::new(&p)),
        _ => match repo {
            Some(r) => r.join("logs"),
            None => crate::repo::absolute(Path::new("logs")),
        },
    }
}

/// `monitor.json`, as the monitor writes it (the fields read here).
#[derive(Debug, Deserialize)]
struct Info {
    pid: u32,
    spec: Option<String>,
}

/// `peak.json`, as the monitor writes it (the fields `status` shows).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Peaks {
    #[serde(default)]
    pub peak_prefill_tps: f64,
    #[serde(default)]
    pub peak_decode_tps: f64,
    pub spec: Option<String>,
    #[serde(default)]
    pub restarts: u64,
    #[serde(default)]
    pub watchdog_restarts: u64,
}

impl Peaks {
    /// `pp 1234.5 tg 56.7 tok/s`, for the status table.
    pub fn short(&self) -> String {
        let mut s = format!(
            "pp {:.1} tg {:.1} tok/s",
            self.peak_prefill_tps, self.peak_decode_tps
        );
        if self.watchdog_restarts > 0 {
            s.push_str(&format!(", {} hang restarts", self.watchdog_restarts));
        }
        s
    }
}

fn read_info(dir: &Path) -> Option<Info> {
    serde_json::from_slice(&std::fs::read(dir.join("monitor.json")).ok()?).ok()
}

fn read_peaks(dir: &Path) -> Option<Peaks> {
    serde_json::from_slice(&std::fs::read(dir.join("peak.json")).ok()?).ok()
}

/// Whether `pid` is a live hearth-monitor on this host (an exited one not yet reaped by its
/// parent is not).
fn alive(pid: u32) -> bool {
    let named = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|c| c.trim_end() == "hearth-monitor");
    // /proc/PID/stat: `pid (comm) STATE ...`; Z is a zombie.
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| Some(s[s.rfind(')')? + 1..].trim_start().starts_with('Z')))
        .unwrap_or(true);
    named && !zombie
}

/// The spec a directory belongs to: its live monitor's, else its peak.json's.
fn owner(dir: &Path) -> Option<String> {
    match read_info(dir) {
        Some(i) if alive(i.pid) => i.spec,
        _ => read_peaks(dir).and_then(|p| p.spec),
    }
}

/// The directory `spec`'s monitor writes: the root, unless another spec has it.
pub fn dir_for(root: &Path, spec: &str) -> PathBuf {
    match owner(root) {
        Some(other) if other != spec => root.join(spec),
        _ => root.to_path_buf(),
    }
}

/// The directories that hold `spec`'s records, of those `dir_for` can choose.
fn dirs_of(root: &Path, spec: &str) -> Vec<PathBuf> {
    [root.to_path_buf(), root.join(spec)]
        .into_iter()
        .filter(|d| owner(d).as_deref() == Some(spec))
        .collect()
}

/// `spec`'s peak.json, if its monitor has written one.
pub fn peaks(root: &Path, spec: &str) -> Option<Peaks> {
    dirs_of(root, spec).iter().find_map(|d| read_peaks(d))
}

/// The monitor binary: `$HEARTH_MONITOR_BIN`, else beside this `hearth`, else in the repo's
/// release build.
pub fn binary(repo: &Path) -> PathBuf {
    if let Some(p) = std::env::var_os("HEARTH_MONITOR_BIN").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| Some(e.parent()?.join("hearth-monitor")));
    match beside {
        Some(p) if p.is_file() => p,
        _ => repo.join("target").join("release").join("hearth-monitor"),
    }
}

/// What `start` did.
#[derive(Debug)]
pub enum Started {
    New { pid: u32, dir: PathBuf },
    AlreadyRunning { pid: u32, dir: PathBuf },
}

/// Starts `spec`'s monitor in the background unless one runs already. Waits (up to 5 s) for it
/// to publish monitor.json, so a monitor that cannot start is reported here, with its output.
pub fn start(bin: &Path, root: &Path, spec: &str) -> anyhow::Result<Started> {
    for dir in dirs_of(root, spec) {
        if let Some(i) = read_info(&dir).filter(|i| alive(i.pid)) {
            return Ok(Started::AlreadyRunning { pid: i.pid, dir });
        }
    }
    if !bin.is_file() {
        anyhow::bail!(
            "{} is not built (cargo build --release -p hearth-monitor)",
            bin.display()
        );
    }
    let dir = dir_for(root, spec);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let log_path = dir.join("monitor.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("opening {}", log_path.display()))?;
    let mut cmd = Command::new(bin);
    cmd.arg("--spec")
        .arg(spec)
        .arg("--logs")
        .arg(&dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // Its own process group: Ctrl-C in this terminal later does not reach it.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if read_info(&dir).is_some_and(|i| i.pid == pid) {
            return Ok(Started::New { pid, dir });
        }
        if let Ok(Some(status)) = child.try_wait() {
            let out = std::fs::read_to_string(&log_path).unwrap_or_default();
            let tail: Vec<&str> = out.lines().rev().take(5).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            anyhow::bail!("the monitor exited ({status}):\n  {}", tail.join("\n  "));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Still running but silent: leave it; its log says why.
    Ok(Started::New { pid, dir })
}

/// Stops `spec`'s monitor (SIGTERM; it finishes writing and exits). Its pid, if one ran.
pub fn stop(root: &Path, spec: &str) -> Option<u32> {
    let (pid, _) = dirs_of(root, spec)
        .into_iter()
        .find_map(|d| read_info(&d).filter(|i| alive(i.pid)).map(|i| (i.pid, d)))?;
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_spec_gets_its_own_directory() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        assert_eq!(dir_for(r, "a"), r);
        std::fs::write(
            r.join("peak.json"),
            r#"{"spec": "a", "peak_decode_tps": 5.5}"#,
        )
        .unwrap();
        assert_eq!(dir_for(r, "a"), r);
        assert_eq!(dir_for(r, "b"), r.join("b"));
        let p = peaks(r, "a").unwrap();
        assert_eq!(p.peak_decode_tps, 5.5);
        assert_eq!(p.short(), "pp 0.0 tg 5.5 tok/s");
        assert!(peaks(r, "b").is_none());
        // A monitor.json whose process is gone does not own the directory.
        std::fs::write(r.join("monitor.json"), r#"{"pid": 999999999, "spec": "c"}"#).unwrap();
        assert_eq!(dir_for(r, "a"), r);
        assert_eq!(stop(r, "a"), None);
    }
}
