//! `hearth build [SPEC]`: fetch the spec's model and build (or reuse) its image, and run
//! nothing. What `docker compose up` needs first, since compose cannot build the CPU image
//! (it carries the host-built engine) or fetch `pip:` models.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::image::{self, ImagePlan, Outcome};
use crate::{load, preflight, repo};

#[derive(Debug, Args)]
pub struct BuildArgs {
    /// Deployment spec (default: specs/default.yaml).
    pub spec: Option<PathBuf>,
}

pub async fn run(repo: Option<PathBuf>, a: BuildArgs) -> anyhow::Result<ExitCode> {
    let repo = repo::find(repo.as_deref())?;
    let spec = load::spec(&repo::spec_path(&repo, a.spec.as_deref()))?;
    let recipe = image::recipe(&spec, repo::engine_binary(&repo));
    let checked = preflight::run(&spec, &recipe, preflight::Purpose::Build).await?;
    eprintln!("model {} at {}", spec.model, checked.model.path.display());
    let plan = ImagePlan::new(&repo, &spec, recipe)?;
    let outcome = image::ensure(&checked.docker, &plan).await?;
    let how = match outcome {
        Outcome::Reused => "reused",
        Outcome::Built => "built",
    };
    println!("image {} {how}, tagged {}", plan.tag, plan.name);
    Ok(ExitCode::SUCCESS)
}
