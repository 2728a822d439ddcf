//! `Plan`: everything `up` will create for a spec, as plain data: the container's name, image,
//! command, environment, mounts, ports, restart policy, log options, labels and GPU settings.
//! `--dry-run` prints it; `container::create` turns it into Docker's create request as is.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use bollard::models::{
    ContainerCreateBody, DeviceRequest, HostConfig, HostConfigLogConfig, PortBinding,
    ResourcesUlimits, RestartPolicy, RestartPolicyNameEnum,
};
use hearth_spec::{Gpus, ResolvedSpec};
use sha2::{Digest, Sha256};

use crate::image::{wants_gpus, ImagePlan, ENGINE_VERSION};
use crate::labels;
use crate::mounts::{Placement, SPEC_IN_CONTAINER};
use crate::repo::absolute;

/// Seconds Docker waits after SIGTERM before SIGKILL: the engine drains requests for 30 s.
pub const STOP_TIMEOUT_SECS: i64 = 35;
/// The json-file log driver keeps this much per container.
const LOG_MAX_SIZE: &str = "100m";
const LOG_MAX_FILES: &str = "3";
/// `/dev/shm` for GPU specs that do not say (NCCL and the engine's workers use it).
const DEFAULT_GPU_SHM: i64 = 8 << 30;

/// Where clients reach the deployment from this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The host address the port is published on (`0.0.0.0`: every interface).
    pub bind_ip: String,
    pub port: u16,
}

impl Endpoint {
    /// `http://127.0.0.1:8000`: a wildcard bind is reached through loopback.
    pub fn url(&self) -> String {
        let host = match self.bind_ip.as_str() {
            "0.0.0.0" | "::" | "" => "127.0.0.1",
            ip => ip,
        };
        format!("http://{host}:{}", self.port)
    }
}

/// Everything about one deployment that `up` creates.
#[derive(Debug)]
pub struct Plan {
    pub spec: ResolvedSpec,
    pub spec_hash: String,
    /// `hearth-<spec name>`.
    pub container: String,
    pub image: ImagePlan,
    pub placement: Placement,
    /// The container's environment, in order (later entries won over earlier ones).
    pub env: Vec<(String, String)>,
    pub endpoint: Endpoint,
    /// The container's working directory: this one, so relative spec paths mean the same.
    pub workdir: PathBuf,
}

impl Plan {
    /// `vars`: the spec's variables with their values here (env.rs).
    pub fn new(
        spec: ResolvedSpec,
        image: ImagePlan,
        placement: Placement,
        vars: Vec<(String, String)>,
    ) -> Self {
        let mut env: Vec<(String, String)> = Vec::new();
        let mut set = |k: &str, v: &str| {
            env.retain(|(key, _)| key != k);
            env.push((k.to_owned(), v.to_owned()));
        };
        // The spec's own deploy.env first; then the variables the spec was resolved with, so
        // the container resolves it to the same values; then the mount locations.
        for (k, v) in &spec.deploy.env {
            set(k, v);
        }
        for (k, v) in vars.iter().chain(&placement.env) {
            set(k, v);
        }
        Self {
            spec_hash: spec.spec_hash(),
            container: container_name(&spec.name),
            endpoint: Endpoint {
                bind_ip: spec.server.host.clone(),
                port: spec.server.port,
            },
            workdir: absolute(std::path::Path::new(".")),
            spec,
            image,
            placement,
            env,
        }
    }

    pub fn labels(&self) -> HashMap<String, String> {
        HashMap::from([
            (labels::CONFIG_HASH.to_owned(), self.config_hash()),
            (labels::MANAGED.to_owned(), "true".to_owned()),
            (labels::SPEC.to_owned(), self.spec.name.clone()),
            (labels::SPEC_HASH.to_owned(), self.spec_hash.clone()),
            (
                labels::SPEC_FILE.to_owned(),
                absolute(&self.spec.file).display().to_string(),
            ),
            (labels::ENGINE_VERSION.to_owned(), ENGINE_VERSION.to_owned()),
            (
                labels::SERVED_MODEL.to_owned(),
                self.spec.served_model_name.clone(),
            ),
            (labels::ENDPOINT.to_owned(), self.endpoint.url()),
            (labels::IMAGE_NAME.to_owned(), self.image.name.clone()),
        ])
    }

    /// The engine's command line: the image's entrypoint is the engine binary. Inside the
    /// container it always listens on every interface; `server.host` decides where on this
    /// host the port is published.
    pub fn cmd(&self) -> Vec<String> {
        ["serve", "--spec", SPEC_IN_CONTAINER, "--host", "0.0.0.0"]
            .map(str::to_owned)
            .to_vec()
    }

    /// Docker's create request for this plan.
    pub fn create_body(&self) -> ContainerCreateBody {
        ContainerCreateBody {
            labels: Some(self.labels()),
            ..self.unlabelled_body()
        }
    }

    /// Hex sha256 of everything the container is created with but its labels and working
    /// directory: environment (the API key too), mounts, ports, image, limits. Equal spec
    /// hashes with different settings (a new key, another model path) must not be reused.
    pub fn config_hash(&self) -> String {
        let body = ContainerCreateBody {
            working_dir: None,
            ..self.unlabelled_body()
        };
        let value = serde_json::to_value(&body).expect("a create body is plain data");
        let digest = Sha256::digest(canonical(value).to_string().as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn unlabelled_body(&self) -> ContainerCreateBody {
        let port_key = format!("{}/tcp", self.endpoint.port);
        let binding = PortBinding {
            host_ip: Some(self.endpoint.bind_ip.clone()),
            host_port: Some(self.endpoint.port.to_string()),
        };
        let restart = &self.spec.deploy.restart;
        let mut host = HostConfig {
            binds: Some(self.placement.binds.iter().map(|b| b.to_docker()).collect()),
            port_bindings: Some(HashMap::from([(port_key.clone(), Some(vec![binding]))])),
            restart_policy: Some(RestartPolicy {
                name: Some(restart_name(restart.policy.as_str())),
                maximum_retry_count: restart.max_retries.map(i64::from),
            }),
            log_config: Some(HostConfigLogConfig {
                typ: Some("json-file".into()),
                config: Some(HashMap::from([
                    ("max-size".into(), LOG_MAX_SIZE.into()),
                    ("max-file".into(), LOG_MAX_FILES.into()),
                ])),
            }),
            shm_size: self.spec.deploy.shm_size.map(|s| s.0 as i64),
            ipc_mode: self.spec.deploy.ipc.clone(),
            ..Default::default()
        };
        if wants_gpus(&self.spec) {
            host.device_requests = Some(vec![device_request(&self.spec.deploy.gpus)]);
            host.shm_size = host.shm_size.or(Some(DEFAULT_GPU_SHM));
            // Pinned host memory for NCCL and CUDA graphs; deep stacks in the workers.
            host.ulimits = Some(vec![ulimit("memlock", -1), ulimit("stack", 64 << 20)]);
        }
        ContainerCreateBody {
            image: Some(self.image.tag.clone()),
            cmd: Some(self.cmd()),
            env: Some(self.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
            exposed_ports: Some(vec![port_key]),
            working_dir: Some(self.workdir.display().to_string()),
            stop_timeout: Some(STOP_TIMEOUT_SECS),
            host_config: Some(host),
            ..Default::default()
        }
    }

    /// What `--dry-run` prints: the plan, secrets masked.
    pub fn describe(&self) -> String {
        let secret = self.spec.server.api_key.as_ref().map(|k| k.expose());
        let mut s = String::new();
        let _ = writeln!(
            s,
            "spec       {} ({})",
            self.spec.name,
            self.spec.file.display()
        );
        let _ = writeln!(s, "spec hash  {}", self.spec_hash);
        let _ = writeln!(s, "model      {}", self.spec.model);
        let _ = writeln!(s, "container  {}", self.container);
        let _ = writeln!(s, "image      {} (as {})", self.image.tag, self.image.name);
        let _ = writeln!(s, "command    {}", self.cmd().join(" "));
        let _ = writeln!(s, "workdir    {}", self.workdir.display());
        let _ = writeln!(
            s,
            "port       {}:{} -> {}/tcp",
            self.endpoint.bind_ip, self.endpoint.port, self.endpoint.port
        );
        for b in &self.placement.binds {
            let _ = writeln!(s, "mount      {}", b.to_docker());
        }
        for (k, v) in &self.env {
            let shown = if Some(v.as_str()) == secret && !v.is_empty() {
                "***"
            } else {
                v
            };
            let _ = writeln!(s, "env        {k}={shown}");
        }
        let r = &self.spec.deploy.restart;
        let retries = r.max_retries.map(|n| format!(":{n}")).unwrap_or_default();
        let _ = writeln!(s, "restart    {}{retries}", r.policy.as_str());
        let _ = writeln!(
            s,
            "logs       json-file, max-size {LOG_MAX_SIZE}, max-file {LOG_MAX_FILES}"
        );
        if wants_gpus(&self.spec) {
            let _ = writeln!(s, "gpus       {}", gpus_text(&self.spec.deploy.gpus));
        }
        let mut labels: Vec<_> = self.labels().into_iter().collect();
        labels.sort();
        for (k, v) in labels {
            let _ = writeln!(s, "label      {k}={v}");
        }
        s
    }
}

/// `v` with every object's keys sorted, so maps serialize the same whatever their order.
fn canonical(v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, canonical(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

/// `hearth-<name>` with anything Docker does not allow in a name replaced by `-`.
pub fn container_name(spec_name: &str) -> String {
    let clean: String = spec_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("hearth-{clean}")
}

fn restart_name(policy: &str) -> RestartPolicyNameEnum {
    match policy {
        "always" => RestartPolicyNameEnum::ALWAYS,
        "unless-stopped" => RestartPolicyNameEnum::UNLESS_STOPPED,
        "on-failure" => RestartPolicyNameEnum::ON_FAILURE,
        _ => RestartPolicyNameEnum::NO,
    }
}

fn device_request(gpus: &Gpus) -> DeviceRequest {
    let mut r = DeviceRequest {
        driver: Some("nvidia".into()),
        capabilities: Some(vec![vec!["gpu".into()]]),
        ..Default::default()
    };
    match gpus {
        Gpus::All => r.count = Some(-1),
        Gpus::Count(n) => r.count = Some(i64::from(*n)),
        Gpus::Ids(ids) => r.device_ids = Some(ids.clone()),
    }
    r
}

fn gpus_text(gpus: &Gpus) -> String {
    match gpus {
        Gpus::All => "all".into(),
        Gpus::Count(n) => n.to_string(),
        Gpus::Ids(ids) => ids.join(","),
    }
}

fn ulimit(name: &str, value: i64) -> ResourcesUlimits {
    ResourcesUlimits {
        name: Some(name.into()),
        soft: Some(value),
        hard: Some(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Recipe;
    use crate::mounts::{place, LocalSource};

    fn plan(text: &str, vars: &[(&str, &str)]) -> Plan {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.yaml");
        std::fs::write(&file, text).unwrap();
        let env = vars.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        let opts = hearth_spec::LoadOptions {
            env: Some(env.clone().collect()),
            dotenv: hearth_spec::DotenvFile::Off,
        };
        let spec = hearth_spec::load_with(&file, &opts).unwrap();
        let model = LocalSource {
            source: spec.model.clone(),
            path: "/m/x.gguf".into(),
        };
        let placement = place(&spec, &model, None).unwrap();
        let image = ImagePlan {
            recipe: Recipe::Prebuilt,
            name: spec.deploy.image.clone(),
            tag: spec.deploy.image.clone(),
            context: None,
        };
        Plan::new(spec, image, placement, env.collect())
    }

    #[test]
    fn cpu_plan_publishes_the_port_mounts_read_only_and_labels() {
        let p = plan(
            "name: smol\nmodel: /m/x.gguf\nengine: {device: cpu}\n\
             server: {port: '${PORT:-8000}', api_key: '${API_KEY:-}'}\n\
             deploy: {image: 'hearth-engine:cpu', gpus: 0, env: {A: '1', PORT: '1'}, \
             restart: {policy: on-failure, max_retries: 5}}\n",
            &[("PORT", "9123"), ("API_KEY", "sk-secret")],
        );
        assert_eq!(p.container, "hearth-smol");
        assert_eq!(p.endpoint.url(), "http://127.0.0.1:9123");
        let body = p.create_body();
        let host = body.host_config.as_ref().unwrap();
        let binds = host.binds.as_ref().unwrap();
        assert!(binds[0].ends_with(":/etc/hearth/spec.yaml:ro"), "{binds:?}");
        assert_eq!(binds[1], "/m/x.gguf:/m/x.gguf:ro");
        let ports = host.port_bindings.as_ref().unwrap();
        let b = ports["9123/tcp"].as_ref().unwrap();
        assert_eq!(b[0].host_port.as_deref(), Some("9123"));
        let restart = host.restart_policy.as_ref().unwrap();
        assert_eq!(restart.name, Some(RestartPolicyNameEnum::ON_FAILURE));
        assert_eq!(restart.maximum_retry_count, Some(5));
        assert!(host.device_requests.is_none() && host.ulimits.is_none());
        // The spec's variables win over deploy.env, so the container resolves the same spec.
        let env = body.env.unwrap();
        assert_eq!(env, ["A=1", "PORT=9123", "API_KEY=sk-secret"]);
        let labels = body.labels.unwrap();
        assert_eq!(labels[labels::SPEC], "smol");
        assert_eq!(labels[labels::SPEC_HASH], p.spec.spec_hash());
        assert_eq!(labels[labels::ENGINE_VERSION], ENGINE_VERSION);
        // Same plan, same hash, whatever the maps' order; another key is another config.
        assert_eq!(p.config_hash(), p.config_hash());
        assert_eq!(labels[labels::CONFIG_HASH], p.config_hash());
        let other = plan(
            "name: smol\nmodel: /m/x.gguf\nengine: {device: cpu}\n\
             server: {port: '${PORT:-8000}', api_key: '${API_KEY:-}'}\n\
             deploy: {image: 'hearth-engine:cpu', gpus: 0, env: {A: '1', PORT: '1'}, \
             restart: {policy: on-failure, max_retries: 5}}\n",
            &[("PORT", "9123"), ("API_KEY", "sk-other")],
        );
        assert_eq!(other.spec_hash, p.spec_hash);
        assert_ne!(other.config_hash(), p.config_hash());
        // The dry run never shows the key.
        let d = p.describe();
        assert!(d.contains("env        API_KEY=***"), "{d}");
        assert!(!d.contains("sk-secret"), "{d}");
    }

    #[test]
    fn gpu_plan_requests_devices_shm_and_ulimits() {
        let p = plan(
            "name: big\nmodel: /m/x.gguf\nengine: {device: cuda, tensor_parallel_size: 2}\n\
             deploy: {gpus: [0, 1], env: {NCCL_P2P_DISABLE: '1'}}\n",
            &[],
        );
        let body = p.create_body();
        let host = body.host_config.unwrap();
        let dr = &host.device_requests.unwrap()[0];
        assert_eq!(dr.device_ids, Some(vec!["0".to_owned(), "1".to_owned()]));
        assert_eq!(dr.capabilities, Some(vec![vec!["gpu".to_owned()]]));
        assert_eq!(host.shm_size, Some(8 << 30));
        assert_eq!(host.ulimits.unwrap().len(), 2);
        assert_eq!(body.env.unwrap(), ["NCCL_P2P_DISABLE=1"]);
    }

    #[test]
    fn container_names_are_docker_safe() {
        assert_eq!(
            container_name("glm-4.7 nvfp4/tp4"),
            "hearth-glm-4.7-nvfp4-tp4"
        );
    }
}
