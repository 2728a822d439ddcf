//! The engine container of a deployment: finding Hearth's containers by label, deciding whether
//! an existing one is reused (same spec hash and image) or replaced, creating and starting it.

use std::collections::HashMap;

use anyhow::Context;
use bollard::models::{ContainerInspectResponse, ContainerSummary};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
    StopContainerOptionsBuilder,
};
use bollard::Docker;

use crate::docker::is_not_found;
use crate::labels;
use crate::plan::{Plan, STOP_TIMEOUT_SECS};

/// What `up` does with the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Create,
    /// Same spec hash and image, already running.
    ReuseRunning,
    /// Same spec hash and image, stopped: start it again.
    ReuseStopped,
    /// Something differs; the reason says what.
    Replace(String),
}

/// What `up` needs to know about an existing container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Existing {
    pub spec_hash: Option<String>,
    pub config_hash: Option<String>,
    pub image: Option<String>,
    pub running: bool,
    pub managed: bool,
}

impl Existing {
    pub fn from_inspect(c: &ContainerInspectResponse) -> Self {
        let config = c.config.as_ref();
        let labels = config.and_then(|c| c.labels.as_ref());
        let label = |k: &str| labels.and_then(|l| l.get(k)).cloned();
        Self {
            spec_hash: label(labels::SPEC_HASH),
            config_hash: label(labels::CONFIG_HASH),
            image: config.and_then(|c| c.image.clone()),
            running: c.state.as_ref().and_then(|s| s.running).unwrap_or(false),
            managed: label(labels::MANAGED).as_deref() == Some("true"),
        }
    }
}

/// Reuse only what is exactly this deployment; replace anything else of the same name.
pub fn decide(existing: Option<&Existing>, plan: &Plan) -> Action {
    let Some(e) = existing else {
        return Action::Create;
    };
    if e.spec_hash.as_deref() != Some(plan.spec_hash.as_str()) {
        let old = e.spec_hash.as_deref().map(short).unwrap_or("none");
        return Action::Replace(format!(
            "spec changed (hash {old} -> {})",
            short(&plan.spec_hash)
        ));
    }
    if e.image.as_deref() != Some(plan.image.tag.as_str()) {
        return Action::Replace(format!(
            "image changed ({} -> {})",
            e.image.as_deref().unwrap_or("none"),
            plan.image.tag
        ));
    }
    if e.config_hash.as_deref() != Some(plan.config_hash().as_str()) {
        return Action::Replace(
            "settings changed (environment such as the API key, mounts or ports)".into(),
        );
    }
    if e.running {
        Action::ReuseRunning
    } else {
        Action::ReuseStopped
    }
}

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

pub async fn inspect(
    docker: &Docker,
    name: &str,
) -> anyhow::Result<Option<ContainerInspectResponse>> {
    match docker.inspect_container(name, None).await {
        Ok(c) => Ok(Some(c)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e).with_context(|| format!("inspecting container {name}")),
    }
}

pub async fn create(docker: &Docker, plan: &Plan) -> anyhow::Result<()> {
    let options = CreateContainerOptionsBuilder::default()
        .name(&plan.container)
        .build();
    let created = docker
        .create_container(Some(options), plan.create_body())
        .await
        .with_context(|| format!("creating container {}", plan.container))?;
    for w in created.warnings {
        eprintln!("docker: {w}");
    }
    Ok(())
}

pub async fn start(docker: &Docker, name: &str) -> anyhow::Result<()> {
    docker
        .start_container(name, None)
        .await
        .with_context(|| format!("starting container {name}"))
}

/// Stops (SIGTERM, then SIGKILL after `timeout_secs`); a container already gone is fine.
pub async fn stop(docker: &Docker, name: &str, timeout_secs: i32) -> anyhow::Result<()> {
    let options = StopContainerOptionsBuilder::default()
        .t(timeout_secs)
        .build();
    match docker.stop_container(name, Some(options)).await {
        Ok(()) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        // 304: already stopped.
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 304, ..
        }) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("stopping container {name}")),
    }
}

/// Stops gracefully (the engine drains for up to 30 s), then removes; gone already is fine.
pub async fn remove(docker: &Docker, name: &str) -> anyhow::Result<()> {
    stop(docker, name, STOP_TIMEOUT_SECS as i32).await?;
    let options = RemoveContainerOptionsBuilder::default().force(true).build();
    match docker.remove_container(name, Some(options)).await {
        Ok(()) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing container {name}")),
    }
}

/// Hearth's containers (running or not), optionally only one spec's.
pub async fn list(docker: &Docker, spec: Option<&str>) -> anyhow::Result<Vec<ContainerSummary>> {
    let label = match spec {
        Some(name) => labels::spec_filter(name),
        None => format!("{}=true", labels::MANAGED),
    };
    let filters = HashMap::from([("label".to_owned(), vec![label])]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    docker
        .list_containers(Some(options))
        .await
        .context("listing Hearth's containers")
}

/// A container summary's name without Docker's leading `/`.
pub fn summary_name(c: &ContainerSummary) -> String {
    c.names
        .as_ref()
        .and_then(|n| n.first())
        .map(|n| n.trim_start_matches('/').to_owned())
        .or_else(|| c.id.clone())
        .unwrap_or_default()
}

/// A label of a container summary.
pub fn summary_label(c: &ContainerSummary, key: &str) -> Option<String> {
    c.labels.as_ref().and_then(|l| l.get(key)).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuse_only_the_same_spec_and_image() {
        // decide() only reads the plan's hash and image tag; build a minimal plan around them.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.yaml");
        std::fs::write(&file, "name: x\nmodel: /m/x.gguf\n").unwrap();
        let opts = hearth_spec::LoadOptions {
            env: Some(Default::default()),
            dotenv: hearth_spec::DotenvFile::Off,
        };
        let spec = hearth_spec::load_with(&file, &opts).unwrap();
        let image = crate::image::ImagePlan {
            recipe: crate::image::Recipe::Prebuilt,
            name: "img:1".into(),
            tag: "img:1".into(),
            context: None,
        };
        let plan = Plan::new(spec, image, Default::default(), Vec::new());
        let same = Existing {
            spec_hash: Some(plan.spec_hash.clone()),
            config_hash: Some(plan.config_hash()),
            image: Some("img:1".into()),
            running: true,
            managed: true,
        };
        assert_eq!(decide(None, &plan), Action::Create);
        assert_eq!(decide(Some(&same), &plan), Action::ReuseRunning);
        let stopped = Existing {
            running: false,
            ..same.clone()
        };
        assert_eq!(decide(Some(&stopped), &plan), Action::ReuseStopped);
        let other_spec = Existing {
            spec_hash: Some("0123456789abcdef".into()),
            ..same.clone()
        };
        assert!(matches!(
            decide(Some(&other_spec), &plan),
            Action::Replace(r) if r.starts_with("spec changed (hash 0123456789ab -> ")
        ));
        let other_image = Existing {
            image: Some("img:2".into()),
            ..same.clone()
        };
        assert_eq!(
            decide(Some(&other_image), &plan),
            Action::Replace("image changed (img:2 -> img:1)".into())
        );
        let other_settings = Existing {
            config_hash: Some("x".into()),
            ..same
        };
        assert!(matches!(
            decide(Some(&other_settings), &plan),
            Action::Replace(r) if r.starts_with("settings changed")
        ));
    }
}
