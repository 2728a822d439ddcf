//! The log follower: one task that owns serve.log. It streams the engine container's log with
//! Docker's timestamps, writes each line once (the `Cursor` drops what a re-opened stream sends
//! again), and writes a marker line whenever the container stops, restarts or is replaced:
//! the exit code and whether it was OOM-killed, taken from Docker's `die` and `oom` events
//! (after a quick `docker restart` the container's own state no longer has them).
//!
//! The stream of one run ends when the container stops; the follower then looks the container
//! up again by its labels and re-opens from the cursor's second. Other tasks talk to it through
//! `Msg`: Docker events, and notes (the watchdog's) to put in the log.

use std::sync::Arc;
use std::time::Duration;

use bollard::query_parameters::LogsOptionsBuilder;
use bollard::Docker;
use futures_util::StreamExt;
use tokio::sync::{mpsc, watch};

use crate::clock::Stamp;
use crate::cursor::{split_stamped, Cursor, MARKER};
use crate::docker::{self, Found, Selector};
use crate::events::Event;
use crate::metrics::Counters;
use crate::peaks::{PeakHandle, Source};
use crate::rates;
use crate::rotate::RotatingFile;
use crate::Error;

/// What other tasks send the follower.
#[derive(Debug)]
pub enum Msg {
    Docker(Event),
    /// A line for serve.log, written as a marker.
    Note(String),
}

/// How the followed container last ended.
#[derive(Debug, Clone, Default)]
struct Death {
    exit_code: Option<i64>,
    oom: bool,
}

impl Death {
    fn describe(&self) -> String {
        match self.exit_code {
            Some(c) => format!("exit code {c}{}, OOMKilled {}", signal(c), self.oom),
            None => format!("exit code unknown, OOMKilled {}", self.oom),
        }
    }
}

/// `137` -> ` (SIGKILL)`: exit codes above 128 are signals.
fn signal(code: i64) -> &'static str {
    match code {
        137 => " (SIGKILL)",
        143 => " (SIGTERM)",
        139 => " (SIGSEGV)",
        134 => " (SIGABRT)",
        _ => "",
    }
}

enum Flow {
    Ended,
    Shutdown,
}

/// What the follower needs; `run` consumes it.
#[derive(Debug)]
pub struct Follower {
    pub docker: Docker,
    pub sel: Selector,
    pub out: RotatingFile,
    pub cursor: Cursor,
    pub counters: Arc<Counters>,
    pub peaks: PeakHandle,
    pub rx: mpsc::UnboundedReceiver<Msg>,
    /// Kept so `rx` never reports "all senders gone" while the follower runs.
    pub tx: mpsc::UnboundedSender<Msg>,
    pub shutdown: watch::Receiver<bool>,
    /// The run followed last (from peak.json at start: a restart while the monitor was away
    /// still gets its marker).
    pub followed: Option<Found>,
    /// Restarts seen so far (peak.json's count), for the markers' numbers.
    pub restarts: u64,
}

#[derive(Debug, Default)]
struct State {
    death: Option<Death>,
    death_written: bool,
    waiting_said: bool,
    /// Whether this process has followed a run yet (its first one gets a marker).
    resumed: bool,
}

impl Follower {
    /// Follows until shutdown. Errors only when serve.log cannot be written or the selector
    /// is ambiguous; Docker hiccups are retried.
    pub async fn run(mut self) -> Result<(), Error> {
        let mut st = State::default();
        loop {
            if *self.shutdown.borrow() {
                return Ok(());
            }
            let found = match docker::find(&self.docker, &self.sel).await {
                Ok(f) => f,
                Err(e @ Error::Usage(_)) => return Err(e),
                Err(e) => {
                    tracing::warn!("{e}");
                    None
                }
            };
            let found = match found {
                Some(f) if f.running => f,
                other => {
                    self.stopped(other.as_ref(), &mut st)?;
                    if self.wait(Duration::from_secs(2), &mut st).await {
                        return Ok(());
                    }
                    continue;
                }
            };
            st.waiting_said = false;
            self.peaks.identify(found.identity());
            let new_run = match self.followed.clone() {
                Some(prev) if prev.same_run(&found) => {
                    if !st.resumed {
                        self.marker(&format!(
                            "monitor started; resuming {} ({}) where serve.log ends",
                            found.name,
                            found.short_id()
                        ))?;
                    }
                    false
                }
                Some(prev) => {
                    self.restarted(&prev, &found, &mut st).await?;
                    true
                }
                None => {
                    self.marker(&format!(
                        "following {} ({}), started {}",
                        found.name,
                        found.short_id(),
                        found.started_at.as_deref().unwrap_or("?")
                    ))?;
                    true
                }
            };
            if new_run {
                st.death = None;
                st.death_written = false;
            }
            st.resumed = true;
            self.followed = Some(found.clone());
            match self.stream(&found, &mut st).await? {
                Flow::Shutdown => return Ok(()),
                Flow::Ended => {
                    // A stream that ends while the same run goes on is re-opened at once;
                    // a short pause keeps a misbehaving daemon from spinning us.
                    if self.wait(Duration::from_millis(100), &mut st).await {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// One log stream of one run, from the cursor, until it ends.
    async fn stream(&mut self, found: &Found, st: &mut State) -> Result<Flow, Error> {
        self.cursor.reopen();
        let mut options = LogsOptionsBuilder::default()
            .stdout(true)
            .stderr(true)
            .follow(true)
            .timestamps(true);
        if let Some(s) = self.cursor.since_secs() {
            options = options.since(i32::try_from(s).unwrap_or(i32::MAX));
        }
        let mut logs = self.docker.logs(&found.id, Some(options.build()));
        Counters::add(&self.counters.log_streams_opened, 1);
        loop {
            tokio::select! {
                biased;
                _ = self.shutdown.changed() => return Ok(Flow::Shutdown),
                chunk = logs.next() => match chunk {
                    Some(Ok(out)) => self.lines(&out.into_bytes())?,
                    Some(Err(e)) => {
                        tracing::debug!("log stream of {}: {e}", found.name);
                        return Ok(Flow::Ended);
                    }
                    None => return Ok(Flow::Ended),
                },
                Some(msg) = self.rx.recv() => self.handle(msg, st)?,
            }
        }
    }

    /// Writes the new lines of one chunk (one or more `timestamp text` lines).
    fn lines(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let text = String::from_utf8_lossy(bytes);
        for line in text.split('\n').filter(|l| !l.is_empty()) {
            let line = line.strip_suffix('\r').unwrap_or(line);
            let Some((ts, body)) = split_stamped(line) else {
                // Docker always stamps lines when asked; keep anything else, stamped now.
                self.out
                    .write_line(&format!("{} {line}", Stamp::now().rfc3339()))?;
                Counters::add(&self.counters.lines_written, 1);
                continue;
            };
            if !self.cursor.admit(ts, body) {
                continue;
            }
            self.out.write_line(line)?;
            Counters::add(&self.counters.lines_written, 1);
            if let Some(r) = rates::stats_line(body) {
                self.peaks.observe(r, Source::StatsLog);
            }
        }
        Ok(())
    }

    fn handle(&mut self, msg: Msg, st: &mut State) -> Result<(), Error> {
        let ours = |id: &str| self.followed.as_ref().is_none_or(|f| f.id == id);
        match msg {
            Msg::Note(text) => self.marker(&text)?,
            Msg::Docker(Event::Died { id, exit_code }) if ours(&id) => {
                let oom = st.death.as_ref().is_some_and(|d| d.oom);
                st.death = Some(Death { exit_code, oom });
            }
            Msg::Docker(Event::Oom { id }) if ours(&id) => {
                st.death.get_or_insert_with(Death::default).oom = true;
            }
            Msg::Docker(_) => {}
        }
        Ok(())
    }

    /// Waits `d` (less when a container starts); true when shutting down.
    async fn wait(&mut self, d: Duration, st: &mut State) -> bool {
        let deadline = tokio::time::Instant::now() + d;
        loop {
            tokio::select! {
                _ = self.shutdown.changed() => return true,
                _ = tokio::time::sleep_until(deadline) => return false,
                Some(msg) = self.rx.recv() => {
                    let started = matches!(msg, Msg::Docker(Event::Started { .. }));
                    if let Err(e) = self.handle(msg, st) {
                        tracing::warn!("{e}");
                    }
                    if started {
                        return false;
                    }
                }
            }
        }
    }

    /// The followed container is not running: say how it ended, once.
    fn stopped(&mut self, found: Option<&Found>, st: &mut State) -> Result<(), Error> {
        let (Some(found), Some(prev)) = (found, &self.followed) else {
            if !st.waiting_said {
                tracing::info!(
                    "no running container with label {} yet; waiting",
                    self.sel.label_filter()
                );
                st.waiting_said = true;
            }
            return Ok(());
        };
        if st.death_written || found.id != prev.id {
            return Ok(());
        }
        let death = st.death.get_or_insert(Death {
            exit_code: found.exit_code,
            oom: false,
        });
        death.oom |= found.oom_killed;
        let text = format!(
            "{} stopped: {}; waiting for it to start again",
            found.name,
            death.describe()
        );
        st.death_written = true;
        self.marker(&text)
    }

    /// A new run of the container (or a new container): the restart marker.
    async fn restarted(&mut self, prev: &Found, now: &Found, st: &mut State) -> Result<(), Error> {
        self.restarts += 1;
        Counters::add(&self.counters.restarts_seen, 1);
        self.peaks.restart();
        let n = self.restarts;
        if prev.id != now.id {
            return self.marker(&format!(
                "restart #{n}: container {} replaced by a new one ({} -> {}), started {}",
                now.name,
                prev.short_id(),
                now.short_id(),
                now.started_at.as_deref().unwrap_or("?")
            ));
        }
        // Docker sends `die` before `start`; give the event a moment to arrive.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while st.death.is_none() && tokio::time::Instant::now() < deadline {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => break,
                Some(msg) = self.rx.recv() => self.handle(msg, st)?,
            }
        }
        let how = match &st.death {
            Some(d) => format!("after {}", d.describe()),
            None => "exit code unknown (the monitor was not watching)".to_owned(),
        };
        self.marker(&format!(
            "restart #{n}: {} started again {}, {how}; log resumes",
            now.name,
            now.started_at.as_deref().unwrap_or("?")
        ))
    }

    fn marker(&mut self, text: &str) -> Result<(), Error> {
        tracing::info!("{text}");
        self.out
            .write_line(&format!("{} {MARKER} {text}", Stamp::now().rfc3339()))
    }
}
