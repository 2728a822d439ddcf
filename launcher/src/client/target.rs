//! Which server a client tool talks to, as which model, with which key: `--url` for any
//! OpenAI-compatible server, else the spec's endpoint (`--spec`, or the one Hearth deployment
//! running on this Docker host).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Args;

use crate::container::{self, summary_label};
use crate::plan::Endpoint;
use crate::{labels, load, repo};

/// The server options every client tool takes.
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// The spec of the deployment to talk to (default: the one Hearth deployment running).
    #[arg(long)]
    pub spec: Option<PathBuf>,
    /// Talk to this server instead: any OpenAI-compatible base URL (http://HOST:PORT, with
    /// or without /v1), e.g. a vLLM or llama.cpp server to compare with.
    #[arg(long)]
    pub url: Option<String>,
    /// The API key (default: the spec's server.api_key, else $API_KEY, else API_KEY in .env).
    #[arg(long)]
    pub api_key: Option<String>,
    /// The model to ask for (default: the spec's served_model_name, else the server's first).
    #[arg(long)]
    pub model: Option<String>,
}

/// Where to send requests, as what model, with which key.
#[derive(Debug, Clone)]
pub struct Target {
    /// Base URL without `/v1` and without a trailing slash.
    pub url: String,
    pub model: Option<String>,
    pub key: Option<String>,
}

/// Resolves the options into a target; Docker is only asked when neither --url nor --spec
/// says where the server is.
pub async fn resolve(repo: Option<PathBuf>, a: &ServerArgs) -> anyhow::Result<Target> {
    let mut t = match &a.url {
        Some(url) => Target {
            url: base_url(url),
            model: None,
            key: None,
        },
        None => from_spec(repo.clone(), a.spec.as_deref()).await?,
    };
    if a.model.is_some() {
        t.model.clone_from(&a.model);
    }
    t.key = a
        .api_key
        .clone()
        .or(t.key)
        .or_else(|| env_key(repo.as_deref()))
        .filter(|k| !k.is_empty());
    Ok(t)
}

/// `http://h:8000/v1/` -> `http://h:8000`: the tools add the `/v1/...` paths themselves.
pub fn base_url(url: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    let url = url.strip_suffix("/v1").unwrap_or(url);
    if url.contains("://") {
        url.to_owned()
    } else {
        format!("http://{url}")
    }
}

/// $API_KEY, else API_KEY in the `.env` of the current directory or the repository.
fn env_key(repo: Option<&Path>) -> Option<String> {
    if let Some(k) = std::env::var("API_KEY").ok().filter(|k| !k.is_empty()) {
        return Some(k);
    }
    let mut places = vec![PathBuf::from(".env")];
    if let Ok(r) = repo::find(repo) {
        places.push(r.join(".env"));
    }
    places
        .iter()
        .filter(|p| p.is_file())
        .find_map(|p| hearth_spec::read_dotenv(p).ok()?.get("API_KEY").cloned())
}

async fn from_spec(repo: Option<PathBuf>, spec: Option<&Path>) -> anyhow::Result<Target> {
    let spec_file = match spec {
        Some(s) => s.to_path_buf(),
        None => running_spec().await?,
    };
    let repo = repo::find(repo.as_deref())?;
    let spec = load::spec(&repo::spec_path(&repo, Some(&spec_file)))?;
    let endpoint = Endpoint {
        bind_ip: spec.server.host.clone(),
        port: spec.server.port,
    };
    Ok(Target {
        url: endpoint.url(),
        model: Some(spec.served_model_name.clone()),
        key: spec.server.api_key.map(|k| k.expose().to_owned()),
    })
}

/// The spec file of the one Hearth deployment on this Docker host.
async fn running_spec() -> anyhow::Result<PathBuf> {
    let docker = crate::docker::connect().await.map_err(|mut p| {
        p.fix.push_str("; or name the server with --url / --spec");
        crate::problem::Problems::one("server", p)
    })?;
    let name = crate::logs::only_deployment(&docker, "--spec").await?;
    let found = container::list(&docker, None).await?;
    let c = found
        .iter()
        .find(|c| container::summary_name(c) == name)
        .context("the deployment went away")?;
    match summary_label(c, labels::SPEC_FILE) {
        Some(f) => Ok(PathBuf::from(f)),
        None => bail!(
            "{name} has no {} label; pass --spec or --url",
            labels::SPEC_FILE
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_drops_v1_and_slashes_and_adds_a_scheme() {
        assert_eq!(base_url("http://h:8000/v1/"), "http://h:8000");
        assert_eq!(base_url("http://h:8000"), "http://h:8000");
        assert_eq!(base_url("127.0.0.1:8080/v1"), "http://127.0.0.1:8080");
    }
}
