//! The observability files under monitor/ stay consistent with what the programs export: every
//! metric the Grafana dashboard queries exists in the engine's or the monitor's exposition
//! source, the dashboard uses the provisioned data source, and the compose file mounts files
//! that exist. (`promtool check config` of the scrape config runs in tests/docker.rs, which
//! needs promtool.)

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("monitor/ sits in the repository")
        .to_path_buf()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// `vllm:foo_bar` and `hearth:baz` names in a PromQL expression.
fn metric_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    for prefix in ["vllm:", "hearth:"] {
        let mut rest = expr;
        while let Some(i) = rest.find(prefix) {
            let tail = &rest[i..];
            let end = tail
                .char_indices()
                .find(|&(j, c)| j >= prefix.len() && !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(tail.len(), |(j, _)| j);
            out.push(tail[..end].to_owned());
            rest = &tail[end..];
        }
    }
    out
}

/// Whether `text` has `name` not followed by more of a metric name.
fn names_whole(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(i, _)| {
        text[i + name.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'))
    })
}

#[test]
fn every_dashboard_query_names_an_exported_metric() {
    let dash: serde_json::Value =
        serde_json::from_str(&read("monitor/grafana/dashboards/hearth.json")).unwrap();
    let exported = read("engine/server/src/metrics.rs") + &read("monitor/src/metrics.rs");
    let panels = dash["panels"].as_array().unwrap();
    assert!(panels.len() >= 8);
    let mut seen = 0;
    for p in panels {
        assert_eq!(
            p["datasource"]["uid"], "hearth-prometheus",
            "{}",
            p["title"]
        );
        for t in p["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            for name in metric_names(expr) {
                let base = name.strip_suffix("_bucket").unwrap_or(&name);
                assert!(
                    names_whole(&exported, base),
                    "{}: {base} is not exported",
                    p["title"]
                );
                seen += 1;
            }
        }
    }
    assert!(seen >= 15, "{seen} metric references");
    let ds = read("monitor/grafana/provisioning/datasources/prometheus.yml");
    assert!(ds.contains("uid: hearth-prometheus"));
}

#[test]
fn compose_mounts_the_observability_files_that_exist() {
    let compose = read("compose.yaml");
    for rel in [
        "monitor/prometheus.yml",
        "monitor/grafana/provisioning",
        "monitor/grafana/dashboards",
    ] {
        assert!(
            compose.contains(&format!("./{rel}:")),
            "{rel} is not mounted"
        );
        assert!(repo().join(rel).exists(), "{rel} is missing");
    }
    assert!(compose.contains("- observability"));
    let scrape = read("monitor/prometheus.yml");
    assert!(scrape.contains("monitor:9400") && scrape.contains("engine:8000"));
}

#[test]
fn finds_metric_names_in_promql() {
    assert_eq!(
        metric_names("sum(rate(vllm:prompt_tokens_total[1m])) / max(hearth:x_y)"),
        ["vllm:prompt_tokens_total", "hearth:x_y"]
    );
}
