//! `hearth compose [SPEC]`: the compose file that runs a spec with `docker compose up`, the same
//! deployment `hearth up` makes: the same image, command, spec file, mounts, port, restart
//! policy, log options and GPU settings, with the values `.env` can change left as `${VAR}`
//! for compose to fill (its interpolation syntax is the spec's).
//!
//! compose.yaml at the repository root is this command's output for specs/default.yaml; a
//! test keeps the two equal. Compose cannot build the CPU image (it carries the host-built
//! engine) nor fetch `pip:` models, so `hearth build` comes first. The monitor and the
//! observability services come from compose_sidecars.rs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use hearth_spec::{Gpus, ModelSource, ResolvedSpec};
use serde_yaml::{Mapping, Value};

use crate::image::wants_gpus;
use crate::mounts::{CACHE_IN_CONTAINER, HF_HUB_IN_CONTAINER, SPEC_IN_CONTAINER};
use crate::plan::{container_name, STOP_TIMEOUT_SECS};
use crate::{compose_sidecars, env, labels, load, repo};

#[derive(Debug, Args)]
pub struct ComposeArgs {
    /// Deployment spec (default: specs/default.yaml).
    pub spec: Option<PathBuf>,
    /// Write here instead of printing (e.g. compose.yaml).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// The working directory of the engine inside a compose container; relative spec paths are
/// mounted below it.
const WORKDIR: &str = "/hearth";

pub fn run(repo: Option<PathBuf>, a: ComposeArgs) -> anyhow::Result<ExitCode> {
    let repo = repo::find(repo.as_deref())?;
    let path = repo::spec_path(&repo, a.spec.as_deref());
    let spec = load::spec(&path)?;
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let shown = relative_to(&repo::absolute(&path), &repo);
    let yaml = generate(&spec, &text, &shown)?;
    match &a.output {
        Some(out) => {
            std::fs::write(out, &yaml).with_context(|| format!("writing {}", out.display()))?;
            eprintln!("wrote {}", out.display());
        }
        None => print!("{yaml}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// `./specs/default.yaml` for a spec inside the repository, else the absolute path.
fn relative_to(path: &Path, repo: &Path) -> String {
    let repo = repo::absolute(repo);
    match path.strip_prefix(&repo) {
        Ok(rel) => format!("./{}", rel.display()),
        Err(_) => path.display().to_string(),
    }
}

/// The compose file for `spec` (its text `raw`, at `spec_path` as the compose file names it).
pub fn generate(spec: &ResolvedSpec, raw: &str, spec_path: &str) -> anyhow::Result<String> {
    let doc: Value = serde_yaml::from_str(raw).context("the spec is not YAML")?;
    let raw_str = |keys: &[&str]| -> Option<String> {
        let mut v = &doc;
        for k in keys {
            v = v.get(*k)?;
        }
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let mut svc = Mapping::new();
    let mut set = |k: &str, v: Value| {
        svc.insert(k.into(), v);
    };
    set("image", spec.deploy.image.clone().into());
    set("container_name", container_name(&spec.name).into());
    set(
        "command",
        strings(&["serve", "--spec", SPEC_IN_CONTAINER, "--host", "0.0.0.0"]),
    );
    set("working_dir", WORKDIR.into());

    let mut environment = Mapping::new();
    let mut volumes = vec![format!("${{SPEC:-{spec_path}}}:{SPEC_IN_CONTAINER}:ro")];
    for (k, v) in &spec.deploy.env {
        environment.insert(k.clone().into(), escape(v).into());
    }
    for name in env::referenced(raw) {
        environment.insert(name.clone().into(), format!("${{{name}:-}}").into());
    }
    let sources = std::iter::once((&spec.model, raw_str(&["model"])))
        .chain(spec.tokenizer.iter().map(|t| (t, raw_str(&["tokenizer"]))));
    for (source, raw_text) in sources {
        match source {
            ModelSource::Pip { .. } => {
                volumes.push(format!(
                    "${{HEARTH_CACHE:-~/.cache/hearth}}:{CACHE_IN_CONTAINER}:ro"
                ));
                environment.insert("HEARTH_CACHE".into(), CACHE_IN_CONTAINER.into());
            }
            ModelSource::Hf { .. } => {
                volumes.push(format!(
                    "${{HF_HOME:-~/.cache/huggingface}}/hub:{HF_HUB_IN_CONTAINER}:ro"
                ));
                environment.insert("HF_HUB_CACHE".into(), HF_HUB_IN_CONTAINER.into());
            }
            ModelSource::LocalDir(p) | ModelSource::GgufFile(p) => {
                let text = raw_text.unwrap_or_else(|| p.display().to_string());
                volumes.push(same_path_mount(&text));
            }
        }
    }
    if spec.chat_template.is_some() {
        if let Some(t) = raw_str(&["chat_template"]) {
            volumes.push(same_path_mount(&t));
        }
    }
    volumes.extend(spec.deploy.volumes.iter().cloned());
    dedup(&mut volumes);
    set("environment", Value::Mapping(environment));
    set("volumes", strings(&volumes));

    let port = raw_str(&["server", "port"]).unwrap_or_else(|| spec.server.port.to_string());
    let published = match spec.server.host.as_str() {
        "0.0.0.0" | "::" | "" => format!("{port}:{port}"),
        _ => {
            let host = raw_str(&["server", "host"]).unwrap_or_else(|| spec.server.host.clone());
            format!("{host}:{port}:{port}")
        }
    };
    set("ports", strings(&[&published]));
    let r = &spec.deploy.restart;
    let retries = r.max_retries.map(|n| format!(":{n}")).unwrap_or_default();
    set("restart", format!("{}{retries}", r.policy.as_str()).into());
    set("stop_grace_period", format!("{STOP_TIMEOUT_SECS}s").into());
    set("logging", logging());
    set("healthcheck", healthcheck());
    if wants_gpus(spec) {
        set("deploy", gpu_reservation(&spec.deploy.gpus));
        let shm = spec.deploy.shm_size.map_or("8g".into(), |s| s.to_string());
        set("shm_size", shm.into());
        set("ulimits", ulimits());
    } else if let Some(shm) = spec.deploy.shm_size {
        set("shm_size", shm.to_string().into());
    }
    if let Some(ipc) = &spec.deploy.ipc {
        set("ipc", ipc.clone().into());
    }
    let mut l = Mapping::new();
    l.insert(labels::MANAGED.into(), "true".into());
    l.insert(labels::SPEC.into(), spec.name.clone().into());
    l.insert(
        labels::SERVED_MODEL.into(),
        spec.served_model_name.clone().into(),
    );
    l.insert(
        labels::ENDPOINT.into(),
        format!("http://127.0.0.1:{port}").into(),
    );
    set("labels", Value::Mapping(l));

    let mut services = Mapping::new();
    services.insert("engine".into(), Value::Mapping(svc));
    for (name, service) in compose_sidecars::services(spec, &port) {
        services.insert(name.into(), service);
    }
    let mut root = Mapping::new();
    root.insert("services".into(), Value::Mapping(services));
    let body = serde_yaml::to_string(&Value::Mapping(root)).context("rendering YAML")?;
    Ok(format!("{}{body}", header(spec_path)))
}

fn header(spec_path: &str) -> String {
    let cmd = format!("hearth compose {}", spec_path.trim_start_matches("./"));
    format!(
        "# Generated by `{cmd}`: edit the spec and regenerate, not this file\n\
         # (a test checks that they agree).\n\
         #\n\
         # The deployment `./launch` makes, for `docker compose up -d`. First run\n\
         # `target/release/hearth build` (or ./launch once): compose cannot build the image\n\
         # (it carries the host-built engine) nor fetch pip: models. Values come from the\n\
         # environment and .env (see .env.example), as for ./launch; SPEC may name another\n\
         # spec of the same kind (CPU or GPU), else regenerate for it.\n\
         # The monitor service follows the engine into ${{HEARTH_LOGS:-./logs}} (serve.log,\n\
         # peak.json, hang watchdog); `--profile observability` adds Prometheus and Grafana.\n"
    )
}

/// A host path mounted at the same path; relative ones below the container's working dir.
fn same_path_mount(path: &str) -> String {
    if path.starts_with('/') || path.starts_with("${") {
        format!("{path}:{path}:ro")
    } else {
        let rel = path.trim_start_matches("./");
        format!("./{rel}:{WORKDIR}/{rel}:ro")
    }
}

/// A literal value for compose, which would otherwise interpolate its `$`s.
fn escape(v: &str) -> String {
    v.replace('$', "$$")
}

fn dedup(v: &mut Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    v.retain(|x| seen.insert(x.clone()));
}

fn strings<S: AsRef<str>>(items: &[S]) -> Value {
    Value::Sequence(items.iter().map(|s| s.as_ref().into()).collect())
}

fn logging() -> Value {
    let mut options = Mapping::new();
    options.insert("max-size".into(), "100m".into());
    options.insert("max-file".into(), "3".into());
    let mut m = Mapping::new();
    m.insert("driver".into(), "json-file".into());
    m.insert("options".into(), Value::Mapping(options));
    Value::Mapping(m)
}

/// The images' own HEALTHCHECK, repeated so compose shows it and can depend on it.
fn healthcheck() -> Value {
    let mut m = Mapping::new();
    m.insert(
        "test".into(),
        strings(&[
            "CMD",
            "/usr/local/bin/hearth-engine",
            "health",
            "--spec",
            SPEC_IN_CONTAINER,
        ]),
    );
    m.insert("interval".into(), "30s".into());
    m.insert("timeout".into(), "5s".into());
    m.insert("retries".into(), 3.into());
    m.insert("start_period".into(), "20m".into());
    Value::Mapping(m)
}

fn gpu_reservation(gpus: &Gpus) -> Value {
    let mut device = Mapping::new();
    device.insert("driver".into(), "nvidia".into());
    match gpus {
        Gpus::All => {
            device.insert("count".into(), "all".into());
        }
        Gpus::Count(n) => {
            device.insert("count".into(), (*n).into());
        }
        Gpus::Ids(ids) => {
            device.insert("device_ids".into(), strings(ids));
        }
    }
    device.insert("capabilities".into(), strings(&["gpu"]));
    let mut reservations = Mapping::new();
    reservations.insert(
        "devices".into(),
        Value::Sequence(vec![Value::Mapping(device)]),
    );
    let mut resources = Mapping::new();
    resources.insert("reservations".into(), Value::Mapping(reservations));
    let mut deploy = Mapping::new();
    deploy.insert("resources".into(), Value::Mapping(resources));
    Value::Mapping(deploy)
}

fn ulimits() -> Value {
    let mut m = Mapping::new();
    m.insert("memlock".into(), (-1).into());
    m.insert("stack".into(), (64i64 << 20).into());
    Value::Mapping(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generate_for(text: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.yaml");
        std::fs::write(&file, text).unwrap();
        let opts = hearth_spec::LoadOptions {
            env: Some(Default::default()),
            dotenv: hearth_spec::DotenvFile::Off,
        };
        let spec = hearth_spec::load_with(&file, &opts).unwrap();
        generate(&spec, text, "./specs/s.yaml").unwrap()
    }

    #[test]
    fn the_checked_in_compose_file_is_the_generated_one() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let spec_path = repo.join(repo::DEFAULT_SPEC);
        let text = std::fs::read_to_string(&spec_path).unwrap();
        // The environment must not leak into what the spec resolves to here.
        let opts = hearth_spec::LoadOptions {
            env: Some(Default::default()),
            dotenv: hearth_spec::DotenvFile::Off,
        };
        let spec = hearth_spec::load_with(&spec_path, &opts).unwrap();
        let generated = generate(&spec, &text, "./specs/default.yaml").unwrap();
        let checked_in = std::fs::read_to_string(repo.join("compose.yaml")).unwrap();
        assert_eq!(
            checked_in, generated,
            "compose.yaml is stale: run `target/release/hearth compose -o compose.yaml`"
        );
    }

    #[test]
    fn gpu_specs_reserve_devices_and_keep_env_expressions() {
        let y = generate_for(
            "name: q\nmodel: ${MODEL_DIR:-/mnt/llm_models}/Qwen3-8B\n\
             engine: {device: cuda}\nserver: {port: '${PORT:-8000}'}\n\
             deploy: {gpus: 1, env: {NCCL_P2P_DISABLE: '1', X: 'a$b'}, shm_size: 16g}\n",
        );
        let doc: Value = serde_yaml::from_str(&y).unwrap();
        let e = &doc["services"]["engine"];
        assert_eq!(
            e["deploy"]["resources"]["reservations"]["devices"][0]["count"],
            1
        );
        assert_eq!(e["shm_size"], "16g");
        assert_eq!(e["ports"][0], "${PORT:-8000}:${PORT:-8000}");
        assert_eq!(
            e["volumes"][1],
            "${MODEL_DIR:-/mnt/llm_models}/Qwen3-8B:${MODEL_DIR:-/mnt/llm_models}/Qwen3-8B:ro"
        );
        assert_eq!(e["environment"]["NCCL_P2P_DISABLE"], "1");
        assert_eq!(e["environment"]["X"], "a$$b");
        assert_eq!(e["environment"]["MODEL_DIR"], "${MODEL_DIR:-}");
        assert_eq!(e["ulimits"]["memlock"], -1);
    }

    #[test]
    fn relative_paths_mount_below_the_working_dir() {
        assert_eq!(
            same_path_mount("models/x.gguf"),
            "./models/x.gguf:/hearth/models/x.gguf:ro"
        );
        assert_eq!(same_path_mount("/m/x"), "/m/x:/m/x:ro");
    }
}
