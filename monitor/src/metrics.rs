//! The monitor's own /metrics: engine restarts it saw, log lines it wrote, watchdog actions and
//! the current peaks, as Prometheus text. Names go under `hearth:monitor_*` (DESIGN.md: what
//! vLLM lacks goes under `hearth:`). The counters are atomics shared by the tasks that count.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;

#[derive(Debug, Default)]
pub struct Counters {
    pub lines_written: AtomicU64,
    pub restarts_seen: AtomicU64,
    pub watchdog_actions: AtomicU64,
    pub log_streams_opened: AtomicU64,
    pub scrape_failures: AtomicU64,
    peak_prefill: AtomicU64,
    peak_decode: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn set_peaks(&self, prefill: f64, decode: f64) {
        self.peak_prefill
            .store(prefill.to_bits(), Ordering::Relaxed);
        self.peak_decode.store(decode.to_bits(), Ordering::Relaxed);
    }

    pub fn render(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut out = String::new();
        let mut one = |name: &str, kind: &str, help: &str, v: f64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
            );
        };
        one(
            "hearth:monitor_restarts_seen_total",
            "counter",
            "Engine container restarts the monitor saw.",
            get(&self.restarts_seen) as f64,
        );
        one(
            "hearth:monitor_lines_written_total",
            "counter",
            "Engine log lines written to serve.log.",
            get(&self.lines_written) as f64,
        );
        one(
            "hearth:monitor_watchdog_actions_total",
            "counter",
            "Times the watchdog saved diagnostics and restarted a stalled engine.",
            get(&self.watchdog_actions) as f64,
        );
        one(
            "hearth:monitor_log_streams_opened_total",
            "counter",
            "Log streams opened (one per engine start, more after interruptions).",
            get(&self.log_streams_opened) as f64,
        );
        one(
            "hearth:monitor_scrape_failures_total",
            "counter",
            "Engine /metrics scrapes that failed.",
            get(&self.scrape_failures) as f64,
        );
        one(
            "hearth:monitor_peak_prefill_tokens_per_second",
            "gauge",
            "Peak prefill throughput recorded in peak.json.",
            f64::from_bits(get(&self.peak_prefill)),
        );
        one(
            "hearth:monitor_peak_decode_tokens_per_second",
            "gauge",
            "Peak decode throughput recorded in peak.json.",
            f64::from_bits(get(&self.peak_decode)),
        );
        out
    }
}

/// Binds `addr`; the server runs until `shutdown` resolves.
pub async fn serve(
    addr: SocketAddr,
    counters: Arc<Counters>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = Router::new().route(
        "/metrics",
        get(move || {
            let c = counters.clone();
            async move { ([("content-type", "text/plain; version=0.0.4")], c.render()) }
        }),
    );
    let task = tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await;
        if let Err(e) = served {
            tracing::warn!("the /metrics server stopped: {e}");
        }
    });
    Ok((bound, task))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_peaks() {
        let c = Counters::default();
        Counters::add(&c.lines_written, 5);
        c.set_peaks(12.5, 3.0);
        let text = c.render();
        assert!(
            text.contains("hearth:monitor_lines_written_total 5\n"),
            "{text}"
        );
        assert!(text.contains("hearth:monitor_peak_prefill_tokens_per_second 12.5\n"));
        assert!(text.contains("# TYPE hearth:monitor_watchdog_actions_total counter\n"));
    }
}
