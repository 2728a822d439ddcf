//! Test support for driving the real `hearth` binary: running it, unique spec files, free
//! ports, and RAII guards that remove the containers and images a test made, even when the
//! test fails.

#![allow(dead_code)] // each test binary uses a different part of this

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("launcher/ sits in the repository")
        .to_path_buf()
}

/// A finished `hearth` run.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

impl Run {
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {} after {:.1} s\n--- stdout\n{}--- stderr\n{}",
            self.code,
            self.took.as_secs_f64(),
            self.stdout,
            self.stderr
        )
    }
}

/// The `hearth` binary with `args` and extra environment, run from the repository root.
pub fn hearth_cmd(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hearth"));
    cmd.args(args).current_dir(repo());
    // The monitor `up` starts writes here, not into the repository's logs/, and serves its
    // /metrics on a port of its own.
    cmd.env("HEARTH_LOGS", std::env::temp_dir().join(unique("logs")))
        .env("HEARTH_MONITOR_LISTEN", "127.0.0.1:0");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

pub fn hearth(args: &[&str], env: &[(&str, &str)]) -> Run {
    let t = Instant::now();
    let out = hearth_cmd(args, env).output().expect("running hearth");
    finish(out, t)
}

pub fn finish(out: Output, started: Instant) -> Run {
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        took: started.elapsed(),
    }
}

/// A name no other test run uses: `t<pid>-<what>`.
pub fn unique(what: &str) -> String {
    format!("t{}-{what}", std::process::id())
}

/// A TCP port nothing listens on right now.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binding a free port");
    l.local_addr()
        .expect("a bound socket has an address")
        .port()
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
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Names of the containers (running or not) whose name is exactly `name`.
pub fn containers_named(name: &str) -> Vec<String> {
    let filter = format!("name=^/{name}$");
    let out = docker(&["ps", "-a", "--filter", &filter, "--format", "{{.Names}}"]);
    out.lines().map(str::to_owned).collect()
}

/// `repository:tag` of every image whose reference matches `pattern` (docker's wildcards).
pub fn images_matching(pattern: &str) -> Vec<String> {
    let filter = format!("reference={pattern}");
    let out = docker(&[
        "images",
        "--filter",
        &filter,
        "--format",
        "{{.Repository}}:{{.Tag}}",
    ]);
    out.lines().map(str::to_owned).collect()
}

/// Removes a container on drop.
#[derive(Debug)]
pub struct ContainerGuard(pub String);

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rm", "-f", &self.0]).output();
    }
}

/// Removes every image matching `<repository>:<tag prefix>*` on drop (a test's image is
/// tagged with its own name plus the content tag derived from it).
#[derive(Debug)]
pub struct ImageGuard(pub String);

impl Drop for ImageGuard {
    fn drop(&mut self) {
        for image in images_matching(&format!("{}*", self.0)) {
            let _ = Command::new("docker").args(["rmi", "-f", &image]).output();
        }
    }
}

/// A spec file in its own temporary directory, removed on drop.
#[derive(Debug)]
pub struct SpecFile {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl SpecFile {
    pub fn new(text: &str) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("spec.yaml");
        std::fs::write(&path, text).expect("writing the spec");
        Self { dir, path }
    }

    pub fn arg(&self) -> &str {
        self.path.to_str().expect("temporary paths are UTF-8")
    }
}
