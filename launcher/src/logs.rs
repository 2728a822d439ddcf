//! `hearth logs [SPEC] [-f] [--tail N]`: a deployment's engine log (stdout and stderr).
//! Without SPEC it shows the one Hearth deployment there is.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use bollard::models::ContainerSummaryStateEnum;
use bollard::query_parameters::LogsOptionsBuilder;
use bollard::Docker;
use clap::Args;
use futures_util::StreamExt;

use crate::container::{self, summary_name};
use crate::plan::container_name;
use crate::{load, repo};

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The spec whose deployment to show (default: the only Hearth deployment running).
    pub spec: Option<PathBuf>,
    /// Keep following the log.
    #[arg(short, long)]
    pub follow: bool,
    /// Only the last N lines ("all" for everything).
    #[arg(long, default_value = "200")]
    pub tail: String,
}

pub async fn run(repo: Option<PathBuf>, a: LogsArgs) -> anyhow::Result<ExitCode> {
    let docker = crate::docker::connect()
        .await
        .map_err(|p| crate::problem::Problems::one("logs", p))?;
    let name = match &a.spec {
        Some(spec) => {
            let repo = repo::find(repo.as_deref())?;
            container_name(&load::spec(&repo::spec_path(&repo, Some(spec)))?.name)
        }
        None => only_deployment(&docker, "hearth logs").await?,
    };
    let options = LogsOptionsBuilder::default()
        .stdout(true)
        .stderr(true)
        .follow(a.follow)
        .tail(&a.tail)
        .build();
    let mut logs = docker.logs(&name, Some(options));
    let mut out = std::io::stdout();
    while let Some(chunk) = logs.next().await {
        let chunk = chunk.map_err(|e| anyhow::anyhow!("reading the log of {name}: {e}"))?;
        out.write_all(&chunk.into_bytes())?;
        out.flush()?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The name of the one Hearth deployment on this host: the one running, else the one there is.
/// `what` completes the hint when several qualify (`hearth logs`, `./chat --spec`).
pub async fn only_deployment(docker: &Docker, what: &str) -> anyhow::Result<String> {
    let found = container::list(docker, None).await?;
    let running: Vec<_> = found
        .iter()
        .filter(|c| matches!(c.state, Some(ContainerSummaryStateEnum::RUNNING)))
        .collect();
    let pick: Vec<_> = if running.is_empty() {
        found.iter().collect()
    } else {
        running
    };
    match pick.as_slice() {
        [one] => Ok(summary_name(one)),
        [] => bail!("no Hearth deployment on this Docker host; start one with ./launch"),
        many => {
            let names: Vec<String> = many.iter().map(|c| summary_name(c)).collect();
            bail!(
                "several Hearth deployments ({}); name the spec: {what} specs/NAME.yaml",
                names.join(", ")
            )
        }
    }
}
