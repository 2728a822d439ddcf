//! The scraper: every `interval` it reads the engine's /metrics, turns the token counters into
//! prefill and decode rates for peak.json, and feeds the watchdog. When the watchdog says the
//! engine is hung (or has stopped answering) it saves a diagnostic bundle, notes it in serve.log, and restarts the
//! container (unpausing it first if it was paused); the follower then sees the restart.
//!
//! The engine is reached at `--engine-url`, else at the container's `hearth.endpoint` label
//! (`hearth up` sets it; a compose sidecar passes the service address instead).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bollard::query_parameters::RestartContainerOptions;
use bollard::Docker;
use tokio::sync::{mpsc, watch};

use crate::clock::Stamp;
use crate::diagnose::{self, Evidence};
use crate::docker::{self, labels, Found, Selector};
use crate::follow::Msg;
use crate::metrics::Counters;
use crate::peaks::{PeakHandle, Source};
use crate::rates::{RateWindow, Sample};
use crate::watchdog::Watchdog;

/// The scraper's settings (from the command line).
#[derive(Debug, Clone)]
pub struct ScrapeConfig {
    pub engine_url: Option<String>,
    pub interval: Duration,
    pub window: Duration,
    /// None: the watchdog is off.
    pub hang_after: Option<Duration>,
    /// Seconds Docker waits after SIGTERM before SIGKILL when the watchdog restarts.
    pub restart_grace: i32,
    pub logs: PathBuf,
}

#[derive(Debug)]
pub struct Scraper {
    pub docker: Docker,
    pub sel: Selector,
    pub cfg: ScrapeConfig,
    pub counters: Arc<Counters>,
    pub peaks: PeakHandle,
    pub notes: mpsc::UnboundedSender<Msg>,
    pub shutdown: watch::Receiver<bool>,
}

impl Scraper {
    pub async fn run(mut self) {
        let timeout = self
            .cfg
            .interval
            .clamp(Duration::from_secs(1), Duration::from_secs(3));
        let http = match reqwest::Client::builder().timeout(timeout).build() {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("no HTTP client, so no peaks from /metrics and no watchdog: {e}");
                return;
            }
        };
        let now = Instant::now();
        let mut window = RateWindow::new(self.cfg.window);
        let mut dog = Watchdog::new(self.cfg.hang_after.unwrap_or(Duration::MAX), now);
        let mut current: Option<Found> = None;
        let mut last_metrics: Option<(Stamp, String)> = None;
        let mut tick = tokio::time::interval(self.cfg.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = self.shutdown.changed() => return,
                _ = tick.tick() => {}
            }
            let now = Instant::now();
            let found = match docker::find(&self.docker, &self.sel).await {
                Ok(Some(f)) if f.running => f,
                Ok(_) | Err(_) => {
                    current = None;
                    continue;
                }
            };
            if current.as_ref().is_none_or(|c| !c.same_run(&found)) {
                dog.reset(now);
                window.clear();
                last_metrics = None;
                current = Some(found.clone());
            }
            let Some(url) = self
                .cfg
                .engine_url
                .clone()
                .or_else(|| found.labels.get(labels::ENDPOINT).cloned())
            else {
                continue;
            };
            let text = scrape(&http, &url).await;
            if text.is_none() {
                Counters::add(&self.counters.scrape_failures, 1);
            }
            let sample = text.as_deref().and_then(Sample::parse);
            if let Some(t) = text {
                last_metrics = Some((Stamp::now(), t));
            }
            if let Some(s) = &sample {
                if let Some(r) = window.push(now, s) {
                    self.peaks.observe(r, Source::Metrics);
                }
            }
            if self.cfg.hang_after.is_none() {
                continue;
            }
            let reason = dog.observe(sample.as_ref(), now).reason();
            if let Some(reason) = reason {
                self.act(&found, &reason, last_metrics.as_ref()).await;
                dog.reset(Instant::now());
                window.clear();
            }
        }
    }

    /// Diagnostics, a note in serve.log, then the restart.
    async fn act(&self, found: &Found, reason: &str, metrics: Option<&(Stamp, String)>) {
        tracing::warn!("{reason}; restarting {}", found.name);
        let ev = Evidence { reason, metrics };
        let saved = match diagnose::save(&self.docker, &self.cfg.logs, found, &ev).await {
            Ok(dir) => format!("diagnostics in {}", dir.display()),
            Err(e) => format!("saving diagnostics failed: {e}"),
        };
        let _ = self.notes.send(Msg::Note(format!(
            "{reason}; {saved}; restarting {}",
            found.name
        )));
        Counters::add(&self.counters.watchdog_actions, 1);
        self.peaks.watchdog_restart();
        if found.paused {
            if let Err(e) = self.docker.unpause_container(&found.id).await {
                tracing::warn!("unpausing {}: {e}", found.name);
            }
        }
        let options = RestartContainerOptions {
            signal: None,
            t: Some(self.cfg.restart_grace),
        };
        if let Err(e) = self
            .docker
            .restart_container(&found.id, Some(options))
            .await
        {
            tracing::error!("the watchdog could not restart {}: {e}", found.name);
        }
    }
}

/// The engine's /metrics text; None when it does not answer 200 in time.
async fn scrape(http: &reqwest::Client, url: &str) -> Option<String> {
    match http.get(format!("{url}/metrics")).send().await {
        Ok(r) if r.status().is_success() => r.text().await.ok(),
        _ => None,
    }
}
