//! `hearth-monitor`: follows a Hearth engine container (found by its hearth labels) into
//! logs/serve.log and logs/peak.json, and restarts it when it hangs. Started by `hearth up` as a
//! background host process, or as the `monitor` service of compose.yaml. SIGTERM or Ctrl-C:
//! finish writing, exit 0. SIGHUP (its terminal closing) is ignored.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use hearth_monitor::docker::Selector;
use hearth_monitor::scrape::ScrapeConfig;
use hearth_monitor::Config;

#[derive(Debug, Parser)]
#[command(
    name = "hearth-monitor",
    version,
    about = "Keep a Hearth engine's logs across restarts, record peak throughput, restart hangs"
)]
struct Args {
    /// The spec name whose container to follow (its `hearth.spec` label). Default: the only
    /// Hearth container on this Docker host.
    #[arg(long, env = "HEARTH_MONITOR_SPEC")]
    spec: Option<String>,
    /// Directory for serve.log, peak.json and watchdog bundles.
    #[arg(long, env = "HEARTH_LOGS", default_value = "logs")]
    logs: PathBuf,
    /// Rotate serve.log when it would pass this size: 100M, 512k, 1G or bytes.
    #[arg(long, default_value = "100M", value_parser = parse_size)]
    max_size: u64,
    /// How many rotated files to keep (serve.log.1 ... serve.log.N).
    #[arg(long, default_value_t = 5)]
    keep: usize,
    /// Where to serve the monitor's own /metrics ("off": nowhere).
    #[arg(long, env = "HEARTH_MONITOR_LISTEN", default_value = "127.0.0.1:9400")]
    listen: String,
    /// The engine's base URL for /metrics. Default: the container's hearth.endpoint label.
    #[arg(long, env = "HEARTH_ENGINE_URL")]
    engine_url: Option<String>,
    /// How often to scrape the engine's /metrics.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    scrape_interval: Duration,
    /// The window the prefill and decode rates are averaged over.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    rate_window: Duration,
    /// Restart the engine when requests run but nothing progresses for this long ("off": never).
    #[arg(long, env = "HEARTH_MONITOR_HANG_AFTER", default_value = "120s")]
    hang_after: String,
    /// Seconds Docker gives a hung engine after SIGTERM before SIGKILL on a watchdog restart.
    #[arg(long, env = "HEARTH_MONITOR_RESTART_GRACE", default_value_t = 10)]
    restart_grace: i32,
}

fn main() -> ExitCode {
    let args = Args::parse();
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "hearth_monitor=info,warn".into()),
        )
        .init();
    match try_main(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hearth-monitor: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn try_main(args: Args) -> anyhow::Result<()> {
    let listen = match args.listen.as_str() {
        "off" | "none" | "" => None,
        a => Some(
            a.parse::<SocketAddr>()
                .with_context(|| format!("--listen {a}: expected HOST:PORT or off"))?,
        ),
    };
    let hang_after = match args.hang_after.as_str() {
        "off" | "never" | "0" => None,
        d => Some(parse_duration(d).map_err(anyhow::Error::msg)?),
    };
    let cfg = Config {
        sel: Selector { spec: args.spec },
        logs: args.logs.clone(),
        max_bytes: args.max_size,
        keep: args.keep,
        listen,
        scrape: ScrapeConfig {
            engine_url: args.engine_url.map(|u| u.trim_end_matches('/').to_owned()),
            interval: args.scrape_interval,
            window: args.rate_window,
            hang_after,
            restart_grace: args.restart_grace,
            logs: args.logs,
        },
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        // Started in the background by `hearth up`: the terminal it came from may close.
        // A handler that is never polled keeps SIGHUP from ending the monitor.
        let _hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup());
        let stop = async {
            let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
            match term {
                Ok(mut term) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = tokio::signal::ctrl_c() => {}
                    }
                }
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
            tracing::info!("stopping");
        };
        hearth_monitor::run(cfg, stop).await
    })?;
    Ok(())
}

/// `100M`, `512k`, `1G`, `4096` (binary multiples).
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().trim_end_matches(['B', 'b']);
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m' | 'M') => (&t[..t.len() - 1], 1 << 20),
        Some('g' | 'G') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    match num.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n * mult),
        _ => Err(format!("{s:?}: expected a size such as 100M, 512k or 4096")),
    }
}

/// `120s`, `2m`, `500ms`, `1h`, or plain seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a duration such as 120s, 2m or 500ms"))?;
    Ok(match unit {
        "" | "s" => Duration::from_secs(n),
        "ms" => Duration::from_millis(n),
        "m" => Duration::from_secs(n * 60),
        "h" => Duration::from_secs(n * 3600),
        _ => return Err(format!("{s:?}: the unit must be ms, s, m or h")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations() {
        assert_eq!(parse_size("100M"), Ok(100 << 20));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("1GB"), Ok(1 << 30));
        assert_eq!(parse_size("77"), Ok(77));
        assert!(parse_size("0").is_err());
        assert!(parse_size("x").is_err());
        assert_eq!(parse_duration("120s"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("3 weeks").is_err());
    }
}
