//! logs/peak.json: the highest prefill and decode throughput the deployment has reached, when,
//! and from which source, with the deployment's identity and how often it restarted.
//!
//! The file is the state: it is read back at start, so peaks accumulate over the life of the
//! deployment across engine and monitor restarts and never go down; a different spec name in
//! the same directory starts the record over. Every change is written atomically (a temporary
//! file renamed over the old one), so a reader never sees half a file.
//!
//! One task owns the record (`spawn`); the log follower, the scraper and the watchdog send it
//! what they saw through a `PeakHandle`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::clock::Stamp;
use crate::metrics::Counters;
use crate::rates::Rates;
use crate::Error;

pub const FILE: &str = "peak.json";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PeakRecord {
    /// Prompt tokens per second.
    pub peak_prefill_tps: f64,
    /// Generated tokens per second.
    pub peak_decode_tps: f64,
    /// When this file last changed.
    pub updated: Option<String>,
    pub peak_prefill_at: Option<String>,
    pub peak_decode_at: Option<String>,
    /// `metrics` (rate of the /metrics counters) or `stats_log` (the engine's stats line).
    pub peak_prefill_source: Option<String>,
    pub peak_decode_source: Option<String>,
    pub spec: Option<String>,
    pub spec_hash: Option<String>,
    pub engine_version: Option<String>,
    pub container: Option<String>,
    pub container_id: Option<String>,
    /// Docker's StartedAt of the container run last followed.
    pub container_started_at: Option<String>,
    /// Engine restarts the monitor saw (crashes, restarts by Docker's policy, by hand, by the
    /// watchdog), over the life of the deployment.
    pub restarts: u64,
    /// Restarts the watchdog made because the engine stopped making progress.
    pub watchdog_restarts: u64,
}

/// Where a throughput figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Metrics,
    StatsLog,
}

impl Source {
    fn as_str(self) -> &'static str {
        match self {
            Source::Metrics => "metrics",
            Source::StatsLog => "stats_log",
        }
    }
}

/// The deployment the monitor follows, from the container's hearth labels.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Identity {
    pub spec: Option<String>,
    pub spec_hash: Option<String>,
    pub engine_version: Option<String>,
    pub container: String,
    pub container_id: String,
    pub started_at: Option<String>,
}

impl PeakRecord {
    /// Raises the peaks `rates` beat; whether anything changed.
    pub fn observe(&mut self, rates: Rates, source: Source, at: Stamp) -> bool {
        let when = Some(at.rfc3339_secs());
        let mut changed = false;
        if rates.prefill.is_finite() && rates.prefill > self.peak_prefill_tps {
            self.peak_prefill_tps = round1(rates.prefill);
            self.peak_prefill_at = when.clone();
            self.peak_prefill_source = Some(source.as_str().into());
            changed = true;
        }
        if rates.decode.is_finite() && rates.decode > self.peak_decode_tps {
            self.peak_decode_tps = round1(rates.decode);
            self.peak_decode_at = when;
            self.peak_decode_source = Some(source.as_str().into());
            changed = true;
        }
        changed
    }

    /// Takes on the followed deployment's identity; a different spec name starts over.
    pub fn identify(&mut self, id: &Identity) {
        if self.spec.is_some() && id.spec.is_some() && self.spec != id.spec {
            *self = PeakRecord::default();
        }
        self.spec = id.spec.clone().or(self.spec.take());
        self.spec_hash = id.spec_hash.clone().or(self.spec_hash.take());
        self.engine_version = id.engine_version.clone().or(self.engine_version.take());
        self.container = Some(id.container.clone());
        self.container_id = Some(id.container_id.clone());
        self.container_started_at = id.started_at.clone();
    }
}

/// One decimal: peaks are read by people, and rates carry no more precision than that.
fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Reads `dir/peak.json`; an empty record when there is none yet.
pub fn load(dir: &Path) -> Result<PeakRecord, Error> {
    let path = dir.join(FILE);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| Error::Peaks { path, source }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(PeakRecord::default()),
        Err(e) => Err(Error::io("reading", &path, e)),
    }
}

/// Writes `dir/peak.json` atomically: a temporary file beside it, then a rename.
pub fn save(dir: &Path, record: &PeakRecord) -> Result<(), Error> {
    let path = dir.join(FILE);
    let tmp = dir.join(format!(".{FILE}.tmp"));
    let mut text = serde_json::to_string_pretty(record).map_err(|source| Error::Peaks {
        path: path.clone(),
        source,
    })?;
    text.push('\n');
    std::fs::write(&tmp, text).map_err(|e| Error::io("writing", &tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| Error::io("renaming", &tmp, e))
}

/// What the other tasks tell the record's owner.
#[derive(Debug)]
enum Msg {
    Observe(Rates, Source),
    Identify(Identity),
    Restart,
    WatchdogRestart,
}

/// A cloneable way to update peak.json.
#[derive(Debug, Clone)]
pub struct PeakHandle {
    tx: mpsc::UnboundedSender<Msg>,
}

impl PeakHandle {
    pub fn observe(&self, rates: Rates, source: Source) {
        let _ = self.tx.send(Msg::Observe(rates, source));
    }
    pub fn identify(&self, id: Identity) {
        let _ = self.tx.send(Msg::Identify(id));
    }
    pub fn restart(&self) {
        let _ = self.tx.send(Msg::Restart);
    }
    pub fn watchdog_restart(&self) {
        let _ = self.tx.send(Msg::WatchdogRestart);
    }
}

/// Starts the task that owns `record` (as loaded from `dir`). It ends, having written the
/// file, when every handle is dropped.
pub fn spawn(
    dir: PathBuf,
    record: PeakRecord,
    counters: Arc<Counters>,
) -> (PeakHandle, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let mut record = record;
        counters.set_peaks(record.peak_prefill_tps, record.peak_decode_tps);
        while let Some(msg) = rx.recv().await {
            let changed = match msg {
                Msg::Observe(rates, source) => record.observe(rates, source, Stamp::now()),
                Msg::Identify(id) => {
                    let before = record.clone();
                    record.identify(&id);
                    record != before
                }
                Msg::Restart => {
                    record.restarts += 1;
                    true
                }
                Msg::WatchdogRestart => {
                    record.watchdog_restarts += 1;
                    true
                }
            };
            if changed {
                record.updated = Some(Stamp::now().rfc3339_secs());
                counters.set_peaks(record.peak_prefill_tps, record.peak_decode_tps);
                if let Err(e) = save(&dir, &record) {
                    tracing::warn!("{e}");
                }
            }
        }
    });
    (PeakHandle { tx }, task)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(prefill: f64, decode: f64) -> Rates {
        Rates { prefill, decode }
    }

    #[test]
    fn peaks_only_go_up_each_with_its_time_and_source() {
        let mut r = PeakRecord::default();
        let t = Stamp::parse("2026-01-01T00:00:00Z").unwrap();
        assert!(r.observe(rates(100.0, 10.0), Source::Metrics, t));
        assert!(!r.observe(rates(50.0, 5.0), Source::Metrics, t));
        let later = Stamp(t.0 + 60_000_000_000);
        assert!(r.observe(rates(90.0, 12.34), Source::StatsLog, later));
        assert_eq!(r.peak_prefill_tps, 100.0);
        assert_eq!(r.peak_prefill_at.as_deref(), Some("2026-01-01T00:00:00Z"));
        assert_eq!(r.peak_decode_tps, 12.3);
        assert_eq!(r.peak_decode_at.as_deref(), Some("2026-01-01T00:01:00Z"));
        assert_eq!(r.peak_decode_source.as_deref(), Some("stats_log"));
        assert!(!r.observe(rates(f64::NAN, f64::INFINITY), Source::Metrics, t));
    }

    #[test]
    fn saved_atomically_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()).unwrap(), PeakRecord::default());
        let mut r = PeakRecord::default();
        r.observe(rates(1.5, 2.5), Source::Metrics, Stamp::now());
        r.restarts = 3;
        save(dir.path(), &r).unwrap();
        assert_eq!(load(dir.path()).unwrap(), r);
        assert!(!dir.path().join(".peak.json.tmp").exists());
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert!(text.contains("\"peak_prefill_tps\": 1.5"), "{text}");
        std::fs::write(dir.path().join(FILE), "{ half").unwrap();
        assert!(matches!(load(dir.path()), Err(Error::Peaks { .. })));
    }

    #[test]
    fn identity_is_kept_and_another_spec_starts_over() {
        let mut r = PeakRecord::default();
        let id = |spec: &str| Identity {
            spec: Some(spec.into()),
            spec_hash: Some("abc".into()),
            engine_version: Some("0.1.0".into()),
            container: format!("hearth-{spec}"),
            container_id: "1234".into(),
            started_at: None,
        };
        r.identify(&id("a"));
        r.observe(rates(10.0, 1.0), Source::Metrics, Stamp::now());
        r.restarts = 2;
        // A container without labels (compose) keeps what is known.
        r.identify(&Identity {
            container: "hearth-a".into(),
            ..Identity::default()
        });
        assert_eq!(r.spec.as_deref(), Some("a"));
        assert_eq!(r.peak_prefill_tps, 10.0);
        r.identify(&id("b"));
        assert_eq!(r.peak_prefill_tps, 0.0);
        assert_eq!(r.restarts, 0);
        assert_eq!(r.spec.as_deref(), Some("b"));
    }
}
