//! Waiting for a started engine container to answer `GET /ready`, showing the startup phase
//! read from its log as it goes. The wait ends early, with the reason, when the container exits
//! or restarts (Docker's restart policy would otherwise hide a crash loop behind a timeout):
//! the report has the exit code, whether the kernel OOM-killed it, and the last 50 log lines.

use std::collections::VecDeque;
use std::fmt;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use bollard::query_parameters::LogsOptionsBuilder;
use bollard::Docker;
use futures_util::StreamExt;
use tokio::sync::mpsc;

use crate::container;
use crate::phase::Startup;

/// How many log lines a failure report shows.
pub const TAIL_LINES: usize = 50;
const POLL: Duration = Duration::from_millis(500);

/// How the wait ended badly.
#[derive(Debug)]
pub enum NotReady {
    /// The container stopped or was restarted by Docker.
    Exited {
        exit_code: Option<i64>,
        oom_killed: bool,
        restarts: i64,
        error: Option<String>,
        tail: Vec<String>,
    },
    TimedOut {
        after: Duration,
        phase: Option<String>,
        tail: Vec<String>,
    },
}

impl fmt::Display for NotReady {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tail = match self {
            NotReady::Exited {
                exit_code,
                oom_killed,
                restarts,
                error,
                tail,
            } => {
                let code = exit_code.map_or("unknown".into(), |c| c.to_string());
                writeln!(
                    f,
                    "the engine container stopped before it was ready: exit code {code}, \
                     OOMKilled {oom_killed}, restarts {restarts}{}",
                    exit_meaning(*exit_code, *oom_killed)
                )?;
                if let Some(e) = error.as_deref().filter(|e| !e.is_empty()) {
                    writeln!(f, "docker: {e}")?;
                }
                if let Some(e) = engine_error(tail) {
                    writeln!(f, "engine: {e}")?;
                }
                tail
            }
            NotReady::TimedOut { after, phase, tail } => {
                writeln!(
                    f,
                    "the engine was not ready after {} (last phase: {}); it is still starting. \
                     Raise --timeout if this model loads slowly, or look for a hang below",
                    crate::duration::show(*after),
                    phase.as_deref().unwrap_or("none logged")
                )?;
                tail
            }
        };
        writeln!(f, "last {} log lines:", tail.len())?;
        for line in tail {
            writeln!(f, "  | {line}")?;
        }
        Ok(())
    }
}

impl std::error::Error for NotReady {}

/// The engine's last error line in a log tail (`error: ...` as main prints it, or an ERROR).
fn engine_error(tail: &[String]) -> Option<String> {
    tail.iter().rev().find_map(|line| {
        let mut s = Startup::default();
        s.observe(line);
        s.last_error
    })
}

fn exit_meaning(code: Option<i64>, oom: bool) -> &'static str {
    match (code, oom) {
        (_, true) => " (out of memory: lower max_model_len / max_num_seqs, or give it more memory)",
        (Some(137), false) => " (killed with SIGKILL)",
        (Some(143), false) => " (stopped with SIGTERM)",
        (Some(139), false) => " (segmentation fault)",
        _ => "",
    }
}

/// What the wait learned: the phases and facts of the startup log, and how long it took.
#[derive(Debug)]
pub struct Ready {
    pub startup: Startup,
    pub took: Duration,
}

/// Waits until `url/ready` answers 200, the container stops or restarts, or `timeout` passes.
/// A container that stopped or restarted is stopped for good before this returns.
/// `since` (unix seconds) skips log lines of earlier runs of a reused container.
pub async fn wait(
    docker: &Docker,
    name: &str,
    url: &str,
    timeout: Duration,
    since: i64,
) -> anyhow::Result<Result<Ready, NotReady>> {
    let started = Instant::now();
    let first = container::inspect(docker, name).await?;
    let restarts_at_start = first.as_ref().and_then(|c| c.restart_count).unwrap_or(0);
    let (tx, mut lines) = mpsc::channel::<String>(1024);
    let follower = tokio::spawn(follow_logs(docker.clone(), name.to_owned(), since, tx));
    let _stop_following = AbortOnDrop(follower);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()?;
    let mut progress = Progress::new();
    let mut startup = Startup::default();
    let mut tail: VecDeque<String> = VecDeque::with_capacity(TAIL_LINES);
    let mut tick = tokio::time::interval(POLL);
    loop {
        tokio::select! {
            Some(line) = lines.recv() => {
                if startup.observe(&line) {
                    progress.phase(started.elapsed(), startup.phase.as_deref().unwrap_or_default());
                }
                if tail.len() == TAIL_LINES {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
            _ = tick.tick() => {
                progress.tick(started.elapsed(), startup.phase.as_deref());
                if let Some(stopped) = check_container(docker, name, restarts_at_start).await? {
                    progress.done();
                    return Ok(Err(stopped));
                }
                let ready = http.get(format!("{url}/ready")).send().await;
                if ready.is_ok_and(|r| r.status().is_success()) {
                    // The log may trail the HTTP answer by a moment; take what has arrived.
                    while let Ok(line) = lines.try_recv() {
                        startup.observe(&line);
                    }
                    progress.phase(started.elapsed(), "GET /ready: 200");
                    progress.done();
                    return Ok(Ok(Ready { startup, took: started.elapsed() }));
                }
                if started.elapsed() >= timeout {
                    progress.done();
                    return Ok(Err(NotReady::TimedOut {
                        after: started.elapsed(),
                        phase: startup.phase.clone(),
                        tail: tail.into_iter().collect(),
                    }));
                }
            }
        }
    }
}

/// `Some` when the container is no longer running as it was when the wait began.
async fn check_container(
    docker: &Docker,
    name: &str,
    restarts_at_start: i64,
) -> anyhow::Result<Option<NotReady>> {
    let Some(c) = container::inspect(docker, name).await? else {
        return Ok(Some(NotReady::Exited {
            exit_code: None,
            oom_killed: false,
            restarts: 0,
            error: Some("the container was removed".into()),
            tail: Vec::new(),
        }));
    };
    let state = c.state.clone().unwrap_or_default();
    let restarts = c.restart_count.unwrap_or(0);
    let running = state.running.unwrap_or(false);
    let restarting = state.restarting.unwrap_or(false);
    if running && !restarting && restarts == restarts_at_start {
        return Ok(None);
    }
    // Stop it for good, so Docker's restart policy does not loop it while the user reads the
    // report; a container caught between restarts shows its real exit code only once stopped.
    container::stop(docker, name, 5).await?;
    let c = container::inspect(docker, name).await?.unwrap_or(c);
    let state = c.state.clone().unwrap_or_default();
    Ok(Some(NotReady::Exited {
        exit_code: state.exit_code,
        oom_killed: state.oom_killed.unwrap_or(false),
        restarts: c.restart_count.unwrap_or(restarts),
        error: state.error,
        tail: tail(docker, name, TAIL_LINES).await,
    }))
}

/// The last `n` lines of a container's log (stdout and stderr), empty if it cannot be read.
pub async fn tail(docker: &Docker, name: &str, n: usize) -> Vec<String> {
    let options = LogsOptionsBuilder::default()
        .stdout(true)
        .stderr(true)
        .tail(&n.to_string())
        .build();
    let mut out = Vec::new();
    let mut logs = docker.logs(name, Some(options));
    while let Some(Ok(chunk)) = logs.next().await {
        let text = String::from_utf8_lossy(&chunk.into_bytes()).into_owned();
        out.extend(text.lines().map(str::to_owned));
    }
    let skip = out.len().saturating_sub(n);
    out.split_off(skip)
}

/// What the startup log of an already running container says (for a reused deployment): its
/// log is read from the start until the engine says it serves.
pub async fn startup_of(docker: &Docker, name: &str) -> Startup {
    let options = LogsOptionsBuilder::default()
        .stdout(true)
        .stderr(true)
        .build();
    let mut startup = Startup::default();
    let mut logs = docker.logs(name, Some(options));
    while let Some(Ok(chunk)) = logs.next().await {
        for line in String::from_utf8_lossy(&chunk.into_bytes()).lines() {
            startup.observe(line);
        }
        if startup
            .phase
            .as_deref()
            .is_some_and(|p| p.contains("serving"))
        {
            break;
        }
    }
    startup
}

/// Sends every log line of the container since `since`, until the receiver goes away.
async fn follow_logs(docker: Docker, name: String, since: i64, tx: mpsc::Sender<String>) {
    let options = LogsOptionsBuilder::default()
        .stdout(true)
        .stderr(true)
        .follow(true)
        .since(i32::try_from(since).unwrap_or(0))
        .build();
    let mut logs = docker.logs(&name, Some(options));
    let mut partial = String::new();
    while let Some(Ok(chunk)) = logs.next().await {
        partial.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
        while let Some(i) = partial.find('\n') {
            let line: String = partial.drain(..=i).collect();
            if tx.send(line.trim_end().to_owned()).await.is_err() {
                return;
            }
        }
    }
}

/// Aborts the log follower when the wait returns, however it returns.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The progress display: one rewritten line on a terminal, one line per phase otherwise.
struct Progress {
    tty: bool,
    spinner: usize,
}

impl Progress {
    fn new() -> Self {
        Self {
            tty: std::io::stderr().is_terminal(),
            spinner: 0,
        }
    }

    fn phase(&mut self, elapsed: Duration, phase: &str) {
        let mut err = std::io::stderr();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K");
        }
        let _ = writeln!(err, "  [{:>6.1}s] {phase}", elapsed.as_secs_f64());
    }

    fn tick(&mut self, elapsed: Duration, phase: Option<&str>) {
        if !self.tty {
            return;
        }
        const FRAMES: [char; 4] = ['|', '/', '-', '\\'];
        self.spinner = (self.spinner + 1) % FRAMES.len();
        let _ = write!(
            std::io::stderr(),
            "\r\x1b[2K  [{:>6.1}s] {} {}",
            elapsed.as_secs_f64(),
            FRAMES[self.spinner],
            phase.unwrap_or("starting")
        );
    }

    fn done(&mut self) {
        if self.tty {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_reports_name_code_oom_and_tail() {
        let e = NotReady::Exited {
            exit_code: Some(137),
            oom_killed: true,
            restarts: 1,
            error: None,
            tail: vec!["error: /m.gguf: not a GGUF file".into(), "b".into()],
        };
        let text = e.to_string();
        assert!(
            text.starts_with(
                "the engine container stopped before it was ready: exit code 137, OOMKilled true, \
             restarts 1 (out of memory"
            ),
            "{text}"
        );
        assert!(
            text.contains("\nengine: /m.gguf: not a GGUF file\n"),
            "{text}"
        );
        assert!(
            text.ends_with("last 2 log lines:\n  | error: /m.gguf: not a GGUF file\n  | b\n"),
            "{text}"
        );
    }
}
