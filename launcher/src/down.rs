//! `hearth down [SPEC]`: stop (SIGTERM, the engine drains for up to 30 s) and remove a
//! deployment's container; `--all` every Hearth container; `--images` also the images they ran.
//! The deployment's monitor sidecar (started by `up`) is stopped too.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use bollard::query_parameters::RemoveImageOptions;
use bollard::Docker;
use clap::Args;

use crate::docker::is_not_found;
use crate::{container, labels, monitor};
use crate::{load, repo};

#[derive(Debug, Args)]
pub struct DownArgs {
    /// The spec whose deployment to remove (default: specs/default.yaml).
    pub spec: Option<PathBuf>,
    /// Remove every Hearth deployment on this Docker host.
    #[arg(long, conflicts_with = "spec")]
    pub all: bool,
    /// Also remove the images the removed containers ran.
    #[arg(long)]
    pub images: bool,
}

pub async fn run(repo: Option<PathBuf>, a: DownArgs) -> anyhow::Result<ExitCode> {
    let spec_name = if a.all {
        None
    } else {
        let repo = repo::find(repo.as_deref())?;
        Some(load::spec(&repo::spec_path(&repo, a.spec.as_deref()))?.name)
    };
    let logs = monitor::logs_root(None, repo::find(repo.as_deref()).ok().as_deref());
    let docker = crate::docker::connect()
        .await
        .map_err(|p| crate::problem::Problems::one("down", p))?;
    let found = container::list(&docker, spec_name.as_deref()).await?;
    if found.is_empty() {
        match &spec_name {
            Some(n) => {
                if let Some(pid) = monitor::stop(&logs, n) {
                    println!("stopped the monitor of {n} (pid {pid})");
                }
                println!("no deployment of spec {n} is running; nothing to do")
            }
            None => println!("no Hearth deployments on this Docker host; nothing to do"),
        }
        return Ok(ExitCode::SUCCESS);
    }
    for c in &found {
        let name = container::summary_name(c);
        eprintln!("stopping and removing {name}");
        container::remove(&docker, &name).await?;
        println!("removed container {name}");
        if let Some(spec) = container::summary_label(c, labels::SPEC) {
            if let Some(pid) = monitor::stop(&logs, &spec) {
                println!("stopped the monitor of {spec} (pid {pid})");
            }
        }
        if a.images {
            if let Some(image) = c.image.as_deref() {
                let alias = container::summary_label(c, labels::IMAGE_NAME);
                remove_image_tags(&docker, image, alias.as_deref()).await?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Removes the image's content tag and, when it points at the same image, the spec's name
/// for it. Tags are removed, not the image by id: another deployment may run the same image
/// under its own tags, and an image a container still uses is kept, with a note.
async fn remove_image_tags(docker: &Docker, tag: &str, alias: Option<&str>) -> anyhow::Result<()> {
    let id = match docker.inspect_image(tag).await {
        Ok(i) => i.id,
        Err(e) if is_not_found(&e) => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("inspecting image {tag}")),
    };
    let mut tags = vec![tag.to_owned()];
    if let Some(alias) = alias.filter(|a| *a != tag) {
        if docker.inspect_image(alias).await.is_ok_and(|i| i.id == id) {
            tags.push(alias.to_owned());
        }
    }
    for t in tags {
        match docker
            .remove_image(&t, None::<RemoveImageOptions>, None)
            .await
        {
            Ok(_) => println!("removed image {t}"),
            Err(e) if is_not_found(&e) => {}
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409,
                message,
            }) => println!("kept image {t}: {message}"),
            Err(e) => return Err(e).with_context(|| format!("removing image {t}")),
        }
    }
    Ok(())
}
