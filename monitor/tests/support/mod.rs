//! Test support for the monitor's Docker tests: images built `FROM scratch` around a host
//! binary (this very test executable, re-run in a child mode, or the engine through `hearth`),
//! the monitor process, and RAII guards that remove containers and images and stop monitors
//! even when a test fails.

#![allow(dead_code)] // not every test uses every helper

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("monitor/ sits in the repository")
        .to_path_buf()
}

/// A name no other test run on this host uses: `tm<pid>-<what>`.
pub fn unique(what: &str) -> String {
    format!("tm{}-{what}", std::process::id())
}

/// `docker ARGS`, its stdout; panics when docker fails.
pub fn docker(args: &[&str]) -> String {
    let out = Command::new("docker")
        .args(args)
        .output()
        .expect("running docker");
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
}

/// Polls `f` every 100 ms until it is Some or `limit` passes.
pub fn wait_for<T>(limit: Duration, what: &str, f: impl FnMut() -> Option<T>) -> T {
    wait_or(limit, what, String::new, f)
}

/// `wait_for`, with `context()` in the failure message.
pub fn wait_or<T>(
    limit: Duration,
    what: &str,
    context: impl Fn() -> String,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            context()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Removes a container on drop.
#[derive(Debug)]
pub struct ContainerGuard(pub String);

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rm", "-f", &self.0]).output();
    }
}

/// Removes every image matching `<name>*` on drop.
#[derive(Debug)]
pub struct ImageGuard(pub String);

impl Drop for ImageGuard {
    fn drop(&mut self) {
        let filter = format!("reference={}*", self.0);
        let out = Command::new("docker")
            .args([
                "images",
                "--filter",
                &filter,
                "--format",
                "{{.Repository}}:{{.Tag}}",
            ])
            .output();
        if let Ok(out) = out {
            for image in String::from_utf8_lossy(&out.stdout).lines() {
                let _ = Command::new("docker").args(["rmi", "-f", image]).output();
            }
        }
    }
}

/// Builds `tag` FROM scratch with `binary` (and the shared libraries ldd lists for it) at
/// /t, run with `args`.
pub fn scratch_image(tag: &str, binary: &Path, args: &[&str]) {
    let ctx = tempfile::tempdir().expect("a temporary directory");
    let rootfs = ctx.path().join("rootfs");
    std::fs::create_dir_all(&rootfs).expect("creating rootfs/");
    std::fs::copy(binary, rootfs.join("t")).expect("copying the binary");
    let ldd = Command::new("ldd")
        .arg(binary)
        .output()
        .expect("running ldd");
    for line in String::from_utf8_lossy(&ldd.stdout).lines() {
        // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)` or `/lib64/ld-linux... (0x...)`
        let path = line
            .split("=>")
            .last()
            .and_then(|r| r.split_whitespace().next())
            .filter(|p| p.starts_with('/'));
        if let Some(p) = path {
            let dest = rootfs.join(p.trim_start_matches('/'));
            let parent = dest.parent().expect("a library path has a directory");
            std::fs::create_dir_all(parent).expect("creating a library directory");
            std::fs::copy(p, &dest).unwrap_or_else(|e| panic!("copying {p}: {e}"));
        }
    }
    let entry: Vec<String> = std::iter::once("/t".to_owned())
        .chain(args.iter().map(|a| a.to_string()))
        .map(|a| format!("{a:?}"))
        .collect();
    std::fs::write(
        ctx.path().join("Dockerfile"),
        format!(
            "FROM scratch\nCOPY rootfs/ /\nENTRYPOINT [{}]\n",
            entry.join(", ")
        ),
    )
    .expect("writing the Dockerfile");
    let dir = ctx.path().to_str().expect("temporary paths are UTF-8");
    docker(&["build", "-q", "-t", tag, dir]);
}

/// The monitor binary of this build.
pub fn monitor_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hearth-monitor"))
}

/// A running `hearth-monitor`; SIGTERMed (then killed) on drop.
#[derive(Debug)]
pub struct Monitor {
    pub child: Child,
}

impl Monitor {
    pub fn start(spec: &str, logs: &Path, extra: &[&str]) -> Self {
        let child = Command::new(monitor_bin())
            .args(["--spec", spec, "--logs", logs.to_str().expect("UTF-8 path")])
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .env("RUST_LOG", "hearth_monitor=debug,warn")
            .env("NO_COLOR", "1")
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(logs.with_extension("monitor-stderr"))
                    .expect("opening the monitor's stderr file"),
            )
            .spawn()
            .expect("starting hearth-monitor");
        Monitor { child }
    }

    /// SIGTERM and the exit status.
    pub fn stop(mut self) -> ExitStatus {
        let status = terminate(&mut self.child);
        std::mem::forget(self);
        status
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        terminate(&mut self.child);
    }
}

/// SIGTERM, wait up to 10 s, then SIGKILL.
pub fn terminate(child: &mut Child) -> ExitStatus {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(s)) = child.try_wait() {
            return s;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    child.wait().expect("waiting for the monitor")
}

/// serve.log and its rotated files, oldest first.
pub fn serve_log(logs: &Path) -> Vec<String> {
    hearth_monitor::rotate::read_all(logs, "serve.log").unwrap_or_default()
}

/// The monitor's stderr (for failure messages).
pub fn monitor_stderr(logs: &Path) -> String {
    std::fs::read_to_string(logs.with_extension("monitor-stderr")).unwrap_or_default()
}

/// serve.log's markers and the monitor's stderr, for failure messages.
pub fn dump(logs: &Path) -> String {
    let markers: Vec<String> = serve_log(logs)
        .into_iter()
        .filter(|l| l.contains(" [hearth-monitor] "))
        .collect();
    format!(
        "serve.log markers:\n{}\nmonitor stderr:\n{}",
        markers.join("\n"),
        monitor_stderr(logs)
    )
}
