//! The watchdog's diagnostic bundle, saved before it restarts a stalled engine, so the cause
//! can still be studied afterwards: `logs/watchdog-<UTC time>/` with
//! - `reason.txt`: what the watchdog saw (running requests, how long nothing moved);
//! - `log-tail.txt`: the container's last log lines, from Docker, with timestamps;
//! - `metrics.txt`: the last /metrics the engine answered, and when (a wedged engine often no
//!   longer answers);
//! - `inspect.json`: `docker inspect` of the container.

use std::path::{Path, PathBuf};

use bollard::query_parameters::LogsOptionsBuilder;
use bollard::Docker;
use futures_util::StreamExt;

use crate::clock::Stamp;
use crate::docker::Found;
use crate::Error;

/// How many log lines the bundle keeps.
pub const LOG_TAIL: usize = 300;

/// What goes into a bundle besides what Docker is asked for.
#[derive(Debug)]
pub struct Evidence<'a> {
    pub reason: &'a str,
    /// The last /metrics text and when it was read.
    pub metrics: Option<&'a (Stamp, String)>,
}

/// Writes the bundle under `logs`; its directory.
pub async fn save(
    docker: &Docker,
    logs: &Path,
    found: &Found,
    ev: &Evidence<'_>,
) -> Result<PathBuf, Error> {
    let now = Stamp::now();
    let name = format!("watchdog-{}", now.rfc3339_secs().replace(':', ""));
    let dir = logs.join(name);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io("creating", &dir, e))?;
    let write = |file: &str, text: &str| {
        let p = dir.join(file);
        std::fs::write(&p, text).map_err(|e| Error::io("writing", &p, e))
    };
    write(
        "reason.txt",
        &format!(
            "{}\ncontainer {} ({}), started {}\nsaved {}\n",
            ev.reason,
            found.name,
            found.id,
            found.started_at.as_deref().unwrap_or("?"),
            now.rfc3339()
        ),
    )?;
    let metrics = match ev.metrics {
        Some((at, text)) => format!("# scraped {}\n{text}", at.rfc3339()),
        None => "# the engine never answered /metrics in this run\n".to_owned(),
    };
    write("metrics.txt", &metrics)?;
    write("log-tail.txt", &log_tail(docker, &found.id).await)?;
    let inspect = match docker.inspect_container(&found.id, None).await {
        Ok(c) => serde_json::to_string_pretty(&c).unwrap_or_else(|e| format!("{e}")),
        Err(e) => format!("docker inspect failed: {e}"),
    };
    write("inspect.json", &inspect)?;
    Ok(dir)
}

async fn log_tail(docker: &Docker, id: &str) -> String {
    let options = LogsOptionsBuilder::default()
        .stdout(true)
        .stderr(true)
        .timestamps(true)
        .tail(&LOG_TAIL.to_string())
        .build();
    let mut stream = docker.logs(id, Some(options));
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(c) => out.extend_from_slice(&c.into_bytes()),
            Err(e) => {
                out.extend_from_slice(format!("\n(reading the log failed: {e})\n").as_bytes());
                break;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
