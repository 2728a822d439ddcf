//! hearth-monitor: the sidecar that follows a Hearth engine container across restarts.
//!
//! - `follow` keeps logs/serve.log: the container's log with Docker's timestamps, every line
//!   exactly once across restarts (`cursor`), restart markers with exit code and OOM-kill, in a
//!   size-rotated file (`rotate`).
//! - `peaks` keeps logs/peak.json: peak prefill and decode tokens/s from the engine's /metrics
//!   counters and its stats log line (`rates`), never going down.
//! - `scrape` + `watchdog`: an engine with running requests whose progress counters stop is
//!   restarted after a diagnostic bundle is saved (`diagnose`).
//! - `metrics`: the monitor's own /metrics; `lock`: one monitor per logs directory.
//!
//! It finds the engine by its hearth labels (`docker`), never links the engine or the launcher,
//! and runs as a host process (`hearth up` starts it) or as a compose service.

pub mod clock;
pub mod cursor;
pub mod diagnose;
pub mod docker;
mod error;
pub mod events;
pub mod follow;
pub mod lock;
pub mod metrics;
pub mod peaks;
pub mod rates;
pub mod rotate;
pub mod run;
pub mod scrape;
pub mod watchdog;

pub use error::Error;
pub use run::{run, Config, SERVE_LOG};
