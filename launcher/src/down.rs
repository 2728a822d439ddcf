//! `hearth down [SPEC]`: stop (SIGTERM, the engine drains for up to 30 s) and remove a
//! deployment's container; `--all` every Hearth container; `--images` also the images they ran.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use bollard::query_parameters::RemoveImageOptionsBuilder;
use bollard::Docker;
use clap::Args;

use crate::container;
use crate::docker::is_not_found;
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
    let docker = crate::docker::connect()
        .await
        .map_err(|p| crate::problem::Problems::one("down", p))?;
    let found = container::list(&docker, spec_name.as_deref()).await?;
    if found.is_empty() {
        match &spec_name {
            Some(n) => println!("no deployment of spec {n} is running; nothing to do"),
            None => println!("no Hearth deployments on this Docker host; nothing to do"),
        }
        return Ok(ExitCode::SUCCESS);
    }
    for c in &found {
        let name = container::summary_name(c);
        eprintln!("stopping and removing {name}");
        container::remove(&docker, &name).await?;
        println!("removed container {name}");
        if a.images {
            if let Some(image) = c.image.as_deref() {
                remove_image(&docker, image).await?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Removes an image with every tag it has (the content tag and `deploy.image`).
async fn remove_image(docker: &Docker, image: &str) -> anyhow::Result<()> {
    let id = match docker.inspect_image(image).await {
        Ok(i) => i.id.unwrap_or_else(|| image.to_owned()),
        Err(e) if is_not_found(&e) => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("inspecting image {image}")),
    };
    let options = RemoveImageOptionsBuilder::default().force(true).build();
    match docker.remove_image(&id, Some(options), None).await {
        Ok(_) => {
            println!("removed image {image}");
            Ok(())
        }
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing image {image}")),
    }
}
