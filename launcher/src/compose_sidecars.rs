//! The services compose.yaml runs beside the engine: the monitor sidecar (always) and, in the
//! `observability` profile, Prometheus and Grafana with the scrape config and dashboard kept
//! under monitor/.
//!
//! The monitor runs from the engine's own image (both images carry /usr/local/bin/hearth-monitor
//! beside the engine: the CPU image copies the host-built one, the CUDA image builds it), so
//! compose needs no second image. It talks to Docker through the socket (as root, which the
//! socket requires), finds the engine by its `hearth.spec` label, scrapes it at the engine
//! service's address, and writes `${HEARTH_LOGS:-./logs}`. It carries no hearth label itself, so
//! it never follows itself and `hearth status` does not list it.

use hearth_spec::ResolvedSpec;
use serde_yaml::{Mapping, Value};

use crate::plan::container_name;

/// Where the monitor serves its own /metrics inside the compose network.
const MONITOR_METRICS_PORT: u16 = 9400;

/// `(service name, definition)` pairs, in file order. `port` is the engine's port as compose
/// writes it (`${PORT:-8000}`).
pub fn services(spec: &ResolvedSpec, port: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("monitor", monitor(spec, port)),
        ("prometheus", prometheus()),
        ("grafana", grafana()),
    ]
}

fn monitor(spec: &ResolvedSpec, port: &str) -> Value {
    let mut m = Mapping::new();
    m.insert("image".into(), spec.deploy.image.clone().into());
    m.insert(
        "container_name".into(),
        format!("{}-monitor", container_name(&spec.name)).into(),
    );
    m.insert(
        "entrypoint".into(),
        strings(&["/usr/local/bin/hearth-monitor"]),
    );
    let engine_url = format!("http://engine:{port}");
    let listen = format!("0.0.0.0:{MONITOR_METRICS_PORT}");
    m.insert(
        "command".into(),
        strings(&[
            "--spec",
            &spec.name,
            "--logs",
            "/logs",
            "--engine-url",
            &engine_url,
            "--listen",
            &listen,
            "--hang-after",
            "${HEARTH_MONITOR_HANG_AFTER:-120s}",
        ]),
    );
    // The Docker socket belongs to root.
    m.insert("user".into(), "0:0".into());
    m.insert(
        "volumes".into(),
        strings(&[
            "/var/run/docker.sock:/var/run/docker.sock",
            "${HEARTH_LOGS:-./logs}:/logs",
        ]),
    );
    m.insert("depends_on".into(), strings(&["engine"]));
    m.insert("restart".into(), "unless-stopped".into());
    // The image's HEALTHCHECK is the engine's.
    let mut health = Mapping::new();
    health.insert("disable".into(), true.into());
    m.insert("healthcheck".into(), Value::Mapping(health));
    Value::Mapping(m)
}

fn prometheus() -> Value {
    let mut m = Mapping::new();
    m.insert("image".into(), "prom/prometheus:v2.53.2".into());
    m.insert("profiles".into(), strings(&["observability"]));
    m.insert(
        "command".into(),
        strings(&["--config.file=/etc/prometheus/prometheus.yml"]),
    );
    m.insert(
        "volumes".into(),
        strings(&["./monitor/prometheus.yml:/etc/prometheus/prometheus.yml:ro"]),
    );
    m.insert(
        "ports".into(),
        strings(&["127.0.0.1:${PROMETHEUS_PORT:-9090}:9090"]),
    );
    m.insert("depends_on".into(), strings(&["engine", "monitor"]));
    Value::Mapping(m)
}

fn grafana() -> Value {
    let mut m = Mapping::new();
    m.insert("image".into(), "grafana/grafana:11.2.0".into());
    m.insert("profiles".into(), strings(&["observability"]));
    m.insert(
        "volumes".into(),
        strings(&[
            "./monitor/grafana/provisioning:/etc/grafana/provisioning:ro",
            "./monitor/grafana/dashboards:/var/lib/grafana/dashboards:ro",
        ]),
    );
    let mut env = Mapping::new();
    env.insert("GF_AUTH_ANONYMOUS_ENABLED".into(), "true".into());
    env.insert("GF_AUTH_ANONYMOUS_ORG_ROLE".into(), "Viewer".into());
    m.insert("environment".into(), Value::Mapping(env));
    m.insert(
        "ports".into(),
        strings(&["127.0.0.1:${GRAFANA_PORT:-3000}:3000"]),
    );
    m.insert("depends_on".into(), strings(&["prometheus"]));
    Value::Mapping(m)
}

fn strings<S: AsRef<str>>(items: &[S]) -> Value {
    Value::Sequence(items.iter().map(|s| s.as_ref().into()).collect())
}
