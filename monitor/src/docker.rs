//! The engine container as the monitor sees it: found by its hearth labels, never by id, so a
//! container that `hearth up` or compose recreates is picked up again. The label names are the
//! launcher's contract (launcher/src/labels.rs); the few the monitor reads are repeated here,
//! since the monitor does not link the launcher.
//!
//! Connecting negotiates the API version down to what the daemon speaks (Docker 20.10: 1.41).

use std::collections::HashMap;

use bollard::models::{ContainerInspectResponse, ContainerSummaryStateEnum};
use bollard::query_parameters::ListContainersOptionsBuilder;
use bollard::Docker;

use crate::peaks::Identity;
use crate::Error;

pub mod labels {
    pub const MANAGED: &str = "hearth.managed";
    pub const SPEC: &str = "hearth.spec";
    pub const SPEC_HASH: &str = "hearth.spec-hash";
    pub const ENGINE_VERSION: &str = "hearth.engine-version";
    pub const ENDPOINT: &str = "hearth.endpoint";
}

/// `DOCKER_HOST` or the local socket, version negotiated, pinged.
pub async fn connect() -> Result<Docker, Error> {
    let docker =
        Docker::connect_with_local_defaults().map_err(|e| Error::docker("connecting", e))?;
    let docker = docker
        .negotiate_version()
        .await
        .map_err(|e| Error::docker("negotiating the API version", e))?;
    docker
        .ping()
        .await
        .map_err(|e| Error::docker("pinging the daemon", e))?;
    Ok(docker)
}

/// Which container to follow: the one labelled with this spec name, or (None) the only
/// Hearth container on the host.
#[derive(Debug, Clone)]
pub struct Selector {
    pub spec: Option<String>,
}

impl Selector {
    /// The label filter for Docker's list and events calls.
    pub fn label_filter(&self) -> String {
        match &self.spec {
            Some(s) => format!("{}={s}", labels::SPEC),
            None => format!("{}=true", labels::MANAGED),
        }
    }
}

/// One run of the engine container.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub name: String,
    pub id: String,
    /// Running now (not waiting in a restart policy's back-off).
    pub running: bool,
    pub paused: bool,
    /// Docker's State.StartedAt: a new value is a new run (a restart).
    pub started_at: Option<String>,
    pub oom_killed: bool,
    pub exit_code: Option<i64>,
    pub labels: HashMap<String, String>,
}

impl Found {
    fn from_inspect(c: &ContainerInspectResponse) -> Self {
        let state = c.state.as_ref();
        Self {
            name: c
                .name
                .as_deref()
                .unwrap_or_default()
                .trim_start_matches('/')
                .to_owned(),
            id: c.id.clone().unwrap_or_default(),
            // Docker keeps Running true while a restart policy waits to start it again.
            running: state.and_then(|s| s.running).unwrap_or(false)
                && !state.and_then(|s| s.restarting).unwrap_or(false),
            paused: state.and_then(|s| s.paused).unwrap_or(false),
            started_at: state.and_then(|s| s.started_at.clone()),
            oom_killed: state.and_then(|s| s.oom_killed).unwrap_or(false),
            exit_code: state.and_then(|s| s.exit_code),
            labels: c
                .config
                .as_ref()
                .and_then(|c| c.labels.clone())
                .unwrap_or_default(),
        }
    }

    pub fn identity(&self) -> Identity {
        let label = |k: &str| self.labels.get(k).cloned();
        Identity {
            spec: label(labels::SPEC),
            spec_hash: label(labels::SPEC_HASH),
            engine_version: label(labels::ENGINE_VERSION),
            container: self.name.clone(),
            container_id: self.id.clone(),
            started_at: self.started_at.clone(),
        }
    }

    /// The same run of the same container.
    pub fn same_run(&self, other: &Found) -> bool {
        self.id == other.id && self.started_at == other.started_at
    }

    pub fn short_id(&self) -> &str {
        &self.id[..self.id.len().min(12)]
    }
}

/// The container to follow: the running one with the labels, else the newest; None when
/// there is none. Several running for a selector without a spec name is the user's to resolve.
pub async fn find(docker: &Docker, sel: &Selector) -> Result<Option<Found>, Error> {
    let filters = HashMap::from([("label".to_owned(), vec![sel.label_filter()])]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    let mut list = docker
        .list_containers(Some(options))
        .await
        .map_err(|e| Error::docker("listing containers", e))?;
    let running = |c: &bollard::models::ContainerSummary| {
        matches!(
            c.state,
            Some(ContainerSummaryStateEnum::RUNNING | ContainerSummaryStateEnum::PAUSED)
        )
    };
    if sel.spec.is_none() && list.iter().filter(|c| running(c)).count() > 1 {
        return Err(Error::Usage(
            "several Hearth containers are running on this host; name the one to follow with \
             --spec NAME"
                .into(),
        ));
    }
    list.sort_by_key(|c| (running(c), c.created.unwrap_or(0)));
    let Some(id) = list.last().and_then(|c| c.id.clone()) else {
        return Ok(None);
    };
    inspect(docker, &id).await
}

/// The container's current state; None when it is gone.
pub async fn inspect(docker: &Docker, id: &str) -> Result<Option<Found>, Error> {
    match docker.inspect_container(id, None).await {
        Ok(c) => Ok(Some(Found::from_inspect(&c))),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(None),
        Err(e) => Err(Error::docker(format!("inspecting {id}"), e)),
    }
}
