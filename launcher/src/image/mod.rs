//! The engine image a spec runs in: which recipe (images/cpu.Dockerfile for CPU specs,
//! images/cuda.Dockerfile for GPU specs, or a prebuilt image the spec names), its content tag,
//! and building it with bollard, the context streamed from memory and the build output shown
//! as it comes. An image whose content tag exists is reused without building.

mod context;
mod ldd;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use bollard::query_parameters::{BuildImageOptionsBuilder, TagImageOptionsBuilder};
use bollard::Docker;
use futures_util::StreamExt;
use hearth_spec::{Device, Gpus, ResolvedSpec};

pub use context::Context;

use crate::labels;

/// The engine version images and containers are labelled with: the workspace version, which
/// the engine shares with this CLI.
pub const ENGINE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// How the spec's image comes to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recipe {
    /// `FROM scratch` with the host-built engine: images/cpu.Dockerfile.
    Cpu { engine: PathBuf },
    /// Multi-stage CUDA 12.8 build of the engine: images/cuda.Dockerfile.
    Cuda,
    /// An image the spec names that Hearth does not build; it must be present.
    Prebuilt,
}

/// Whether a spec runs on GPUs (and so needs the CUDA image, device requests, shm, ulimits).
pub fn wants_gpus(spec: &ResolvedSpec) -> bool {
    spec.engine.device != Device::Cpu && spec.deploy.gpus != Gpus::Count(0)
}

/// The recipe for `spec`: images named `hearth-engine:*` are Hearth's own and built here.
pub fn recipe(spec: &ResolvedSpec, engine: PathBuf) -> Recipe {
    let repository = spec.deploy.image.split(':').next().unwrap_or_default();
    if repository != "hearth-engine" {
        Recipe::Prebuilt
    } else if wants_gpus(spec) {
        Recipe::Cuda
    } else {
        Recipe::Cpu { engine }
    }
}

/// An image to run: what the spec calls it, and the content-addressed tag it runs as.
#[derive(Debug)]
pub struct ImagePlan {
    pub recipe: Recipe,
    /// `deploy.image`; Hearth's builds are tagged with it too (compose.yaml runs that name).
    pub name: String,
    /// `hearth-engine:<tag>-<version>-<hash12>` for Hearth's builds, else `name`.
    pub tag: String,
    pub context: Option<Context>,
}

impl ImagePlan {
    /// Makes the build context (for Hearth's images) and the content tag.
    pub fn new(repo: &Path, spec: &ResolvedSpec, recipe: Recipe) -> anyhow::Result<Self> {
        let context = match &recipe {
            Recipe::Cpu { engine } => Some(context::cpu(repo, engine)?),
            Recipe::Cuda => Some(context::cuda(repo)?),
            Recipe::Prebuilt => None,
        };
        let name = spec.deploy.image.clone();
        let tag = match &context {
            Some(ctx) => content_tag(&name, &ctx.hash),
            None => name.clone(),
        };
        Ok(Self {
            recipe,
            name,
            tag,
            context,
        })
    }
}

/// `hearth-engine:cpu` + hash -> `hearth-engine:cpu-0.1.0-<first 12 hex>`.
fn content_tag(name: &str, hash: &str) -> String {
    let (repository, tag) = name.split_once(':').unwrap_or((name, "latest"));
    format!(
        "{repository}:{tag}-{ENGINE_VERSION}-{}",
        &hash[..hash.len().min(12)]
    )
}

/// What `ensure` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Reused,
    Built,
}

/// Makes sure `plan.tag` exists: reused when present, else built (Hearth's recipes) with the
/// build output streamed to stderr. Prebuilt images must already be there.
pub async fn ensure(docker: &Docker, plan: &ImagePlan) -> anyhow::Result<Outcome> {
    if docker.inspect_image(&plan.tag).await.is_ok() {
        tag_as_name(docker, plan).await?;
        return Ok(Outcome::Reused);
    }
    let Some(ctx) = &plan.context else {
        bail!(
            "image {} is not on this Docker host; pull or build it first (only hearth-engine:* \
             images are built by hearth)",
            plan.tag
        );
    };
    eprintln!(
        "building image {} ({}, {} files, {:.1} MB context)",
        plan.tag,
        match plan.recipe {
            Recipe::Cuda => "images/cuda.Dockerfile",
            _ => "images/cpu.Dockerfile",
        },
        ctx.files,
        ctx.tar.len() as f64 / 1e6
    );
    let image_labels = HashMap::from([
        (labels::MANAGED.to_owned(), "true".to_owned()),
        (labels::ENGINE_VERSION.to_owned(), ENGINE_VERSION.to_owned()),
        (labels::INPUTS_HASH.to_owned(), ctx.hash.clone()),
    ]);
    let options = BuildImageOptionsBuilder::default()
        .dockerfile("Dockerfile")
        .t(&plan.tag)
        .rm(true)
        .forcerm(true)
        .labels(&image_labels)
        .build();
    let body = bollard::body_full(ctx.tar.clone().into());
    let mut stream = docker.build_image(options, None, Some(body));
    let mut err = std::io::stderr();
    while let Some(item) = stream.next().await {
        let info = item.context("building the image")?;
        if let Some(detail) = info.error_detail {
            bail!(
                "image build failed: {}",
                detail.message.unwrap_or_default().trim()
            );
        }
        if let Some(text) = info.stream {
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let _ = writeln!(err, "  | {line}");
            }
        }
    }
    docker
        .inspect_image(&plan.tag)
        .await
        .with_context(|| format!("the build finished but {} is not there", plan.tag))?;
    tag_as_name(docker, plan).await?;
    Ok(Outcome::Built)
}

/// Points the spec's own image name (`hearth-engine:cpu`) at the content tag, for compose and
/// for people typing `docker run`.
async fn tag_as_name(docker: &Docker, plan: &ImagePlan) -> anyhow::Result<()> {
    if plan.tag == plan.name {
        return Ok(());
    }
    let (repo, tag) = plan.name.split_once(':').unwrap_or((&plan.name, "latest"));
    let options = TagImageOptionsBuilder::default()
        .repo(repo)
        .tag(tag)
        .build();
    docker
        .tag_image(&plan.tag, Some(options))
        .await
        .with_context(|| format!("tagging {} as {}", plan.tag, plan.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_tags_carry_version_and_hash() {
        assert_eq!(
            content_tag("hearth-engine:cpu", "0123456789abcdef"),
            format!("hearth-engine:cpu-{ENGINE_VERSION}-0123456789ab")
        );
        assert_eq!(
            content_tag("hearth-engine", "ab"),
            format!("hearth-engine:latest-{ENGINE_VERSION}-ab")
        );
    }
}
