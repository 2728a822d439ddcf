//! `hearth status`: every Hearth deployment on this Docker host, with its spec, state, uptime,
//! restart count, readiness (asked over HTTP), endpoint, model and the peak prefill / decode
//! throughput its monitor recorded (logs/peak.json). Several specs with their own names and
//! ports run side by side; this lists them all.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use bollard::models::ContainerSummaryStateEnum;
use clap::Args;

use crate::container::{self, summary_label, summary_name};
use crate::{labels, monitor, repo};

#[derive(Debug, Args)]
pub struct StatusArgs {}

/// One row of the table.
#[derive(Debug)]
struct Row {
    name: String,
    spec: String,
    state: String,
    restarts: String,
    ready: String,
    endpoint: String,
    model: String,
    peak: String,
}

pub async fn run(repo: Option<PathBuf>, _: StatusArgs) -> anyhow::Result<ExitCode> {
    let logs = monitor::logs_root(None, repo::find(repo.as_deref()).ok().as_deref());
    let docker = crate::docker::connect()
        .await
        .map_err(|p| crate::problem::Problems::one("status", p))?;
    let found = container::list(&docker, None).await?;
    if found.is_empty() {
        println!("no Hearth deployments on this Docker host (start one with ./launch)");
        return Ok(ExitCode::SUCCESS);
    }
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()?;
    let mut rows = Vec::new();
    for c in &found {
        let name = summary_name(c);
        let restarts = container::inspect(&docker, &name)
            .await?
            .and_then(|i| i.restart_count)
            .map_or("?".into(), |n| n.to_string());
        let endpoint = summary_label(c, labels::ENDPOINT).unwrap_or_default();
        let running = matches!(c.state, Some(ContainerSummaryStateEnum::RUNNING));
        let ready = if !running || endpoint.is_empty() {
            "no".to_owned()
        } else {
            match http.get(format!("{endpoint}/ready")).send().await {
                Ok(r) if r.status().is_success() => "yes".into(),
                Ok(r) => format!("no ({})", r.status().as_u16()),
                Err(_) => "no (no answer)".into(),
            }
        };
        rows.push(Row {
            name,
            spec: summary_label(c, labels::SPEC_FILE)
                .or_else(|| summary_label(c, labels::SPEC))
                .unwrap_or_default(),
            state: c.status.clone().unwrap_or_default(),
            restarts,
            ready,
            endpoint,
            model: summary_label(c, labels::SERVED_MODEL).unwrap_or_default(),
            peak: summary_label(c, labels::SPEC)
                .and_then(|s| monitor::peaks(&logs, &s))
                .map_or("-".into(), |p| p.short()),
        });
    }
    print!("{}", table(&rows));
    Ok(ExitCode::SUCCESS)
}

fn table(rows: &[Row]) -> String {
    let header = [
        "CONTAINER",
        "STATE",
        "RESTARTS",
        "READY",
        "ENDPOINT",
        "MODEL",
        "PEAK",
        "SPEC",
    ];
    let cells: Vec<[&str; 8]> = rows
        .iter()
        .map(|r| {
            [
                r.name.as_str(),
                &r.state,
                &r.restarts,
                &r.ready,
                &r.endpoint,
                &r.model,
                &r.peak,
                &r.spec,
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&cells) {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let row = |name: &str, ready: &str| Row {
            name: name.into(),
            spec: "/r/specs/default.yaml".into(),
            state: "Up 2 minutes".into(),
            restarts: "0".into(),
            ready: ready.into(),
            endpoint: "http://127.0.0.1:8000".into(),
            model: "smol".into(),
            peak: "pp 10.0 tg 2.0 tok/s".into(),
        };
        let t = table(&[row("hearth-a", "yes"), row("hearth-bb", "no (503)")]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("CONTAINER  STATE         RESTARTS  READY     ENDPOINT"));
        assert!(lines[2].starts_with("hearth-bb  Up 2 minutes  0         no (503)  http://"));
    }
}
