//! Wiring: takes the logs directory's lock, reads peak.json and the serve.log cursor back,
//! starts the tasks (peak record owner, Docker events, log follower, scraper and watchdog,
//! /metrics server) and stops them all on shutdown, the follower last so that every line read
//! is written. Each task owns its state; they talk through channels.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use crate::clock::Stamp;
use crate::cursor::Cursor;
use crate::docker::{self, Found, Selector};
use crate::follow::Follower;
use crate::lock::{DirLock, MonitorInfo};
use crate::metrics::{self, Counters};
use crate::rotate::RotatingFile;
use crate::scrape::{ScrapeConfig, Scraper};
use crate::{events, peaks, Error};

/// The log file's name in the logs directory.
pub const SERVE_LOG: &str = "serve.log";

/// Everything the monitor is told (the binary fills it from its command line).
#[derive(Debug, Clone)]
pub struct Config {
    pub sel: Selector,
    pub logs: PathBuf,
    pub max_bytes: u64,
    pub keep: usize,
    /// Where to serve the monitor's own /metrics; None: not served.
    pub listen: Option<SocketAddr>,
    pub scrape: ScrapeConfig,
}

/// Runs until `stop` resolves (SIGTERM, Ctrl-C), then finishes writing and returns.
pub async fn run(
    cfg: Config,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let lock = DirLock::take(&cfg.logs)?;
    let docker = docker::connect().await?;
    let record = peaks::load(&cfg.logs)?;
    let out = RotatingFile::open(&cfg.logs, SERVE_LOG, cfg.max_bytes, cfg.keep)?;
    let cursor = Cursor::recover(&cfg.logs, SERVE_LOG);
    let counters = Arc::new(Counters::default());
    let (shutdown_tx, shutdown) = watch::channel(false);

    let mut metrics_addr = None;
    let mut metrics_task = None;
    if let Some(addr) = cfg.listen {
        let mut down = shutdown.clone();
        let stopped = async move {
            let _ = down.changed().await;
        };
        match metrics::serve(addr, counters.clone(), stopped).await {
            Ok((bound, task)) => {
                tracing::info!("own metrics at http://{bound}/metrics");
                metrics_addr = Some(bound.to_string());
                metrics_task = Some(task);
            }
            // Auxiliary: a taken port must not cost the logs.
            Err(e) => tracing::warn!("not serving /metrics on {addr}: {e}"),
        }
    }
    lock.publish(&MonitorInfo {
        pid: std::process::id(),
        spec: cfg.sel.spec.clone(),
        metrics: metrics_addr,
        started: Stamp::now().rfc3339_secs(),
    })?;

    let followed = record.container_id.clone().map(|id| Found {
        name: record.container.clone().unwrap_or_default(),
        id,
        running: false,
        paused: false,
        started_at: record.container_started_at.clone(),
        oom_killed: false,
        exit_code: None,
        labels: Default::default(),
    });
    let restarts = record.restarts;
    let (peak_handle, peak_task) = peaks::spawn(cfg.logs.clone(), record, counters.clone());
    let (tx, rx) = mpsc::unbounded_channel();
    let events_task = tokio::spawn(events::run(
        docker.clone(),
        cfg.sel.clone(),
        tx.clone(),
        shutdown.clone(),
    ));
    let scraper = Scraper {
        docker: docker.clone(),
        sel: cfg.sel.clone(),
        cfg: cfg.scrape.clone(),
        counters: counters.clone(),
        peaks: peak_handle.clone(),
        notes: tx.clone(),
        shutdown: shutdown.clone(),
    };
    let scrape_task = tokio::spawn(scraper.run());
    let follower = Follower {
        docker,
        sel: cfg.sel.clone(),
        out,
        cursor,
        counters,
        peaks: peak_handle,
        rx,
        tx,
        shutdown,
        followed,
        restarts,
    };
    let mut follow_task = tokio::spawn(follower.run());

    let result = tokio::select! {
        _ = stop => None,
        r = &mut follow_task => Some(r),
    };
    let _ = shutdown_tx.send(true);
    let followed = match result {
        Some(r) => r,
        None => follow_task.await,
    };
    let _ = scrape_task.await;
    let _ = events_task.await;
    if let Some(t) = metrics_task {
        let _ = t.await;
    }
    // Every handle is gone now; the record's owner writes its last change and ends.
    let _ = peak_task.await;
    drop(lock);
    followed.unwrap_or_else(|e| Err(Error::Internal(format!("the log follower: {e}"))))
}
