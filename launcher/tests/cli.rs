//! `hearth` as a user runs it, where no Docker daemon is needed: spec and preflight errors
//! print what to fix and exit 2 before Docker is used; the checked-in compose.yaml is what
//! `hearth compose` prints; the CUDA Dockerfile has the shape the launcher relies on.

mod support;

use support::{hearth, repo, SpecFile};

/// A Docker endpoint where nothing listens: any attempt to use Docker fails loudly.
const NO_DOCKER: (&str, &str) = ("DOCKER_HOST", "unix:///nonexistent/hearth-test.sock");

#[test]
fn spec_errors_name_key_value_and_fix_before_docker_is_touched() {
    let spec = SpecFile::new(
        "name: bad\nmodel: /nowhere/m.gguf\nengine: {kv_cache_dtype: fp9}\n\
         server: {port: '${HEARTH_TEST_UNSET_PORT}'}\n",
    );
    let run = hearth(&["up", spec.arg()], &[NO_DOCKER]);
    assert_eq!(run.code, 2, "{run}");
    let err = &run.stderr;
    assert!(
        err.contains("spec: 2 problems, nothing was started"),
        "{run}"
    );
    assert!(
        err.contains("engine.kv_cache_dtype") && err.contains("fp9"),
        "{run}"
    );
    assert!(
        err.contains("${HEARTH_TEST_UNSET_PORT} is not set"),
        "{run}"
    );
    assert_eq!(err.matches("    fix: ").count(), 2, "{run}");
    // The spec is checked first: Docker was never asked.
    assert!(!err.contains("Docker is not reachable"), "{run}");
}

#[test]
fn a_missing_spec_file_says_where_specs_are() {
    let run = hearth(&["up", "specs/no-such-spec.yaml"], &[NO_DOCKER]);
    assert_eq!(run.code, 2, "{run}");
    assert!(run.stderr.contains("cannot read"), "{run}");
    assert!(
        run.stderr.contains("fix: name an existing spec file"),
        "{run}"
    );
}

#[test]
fn preflight_reports_every_problem_with_its_fix() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.gguf");
    let spec = SpecFile::new(&format!(
        "name: pre\nmodel: {}\nengine: {{device: cpu}}\ndeploy: {{gpus: 0}}\n",
        missing.display()
    ));
    let run = hearth(&["up", spec.arg()], &[NO_DOCKER]);
    assert_eq!(run.code, 2, "{run}");
    let err = &run.stderr;
    assert!(err.contains("preflight:"), "{run}");
    assert!(
        err.contains("Docker is not reachable at unix:///nonexistent"),
        "{run}"
    );
    assert!(err.contains("fix: start the Docker daemon"), "{run}");
    assert!(err.contains("missing.gguf: no such GGUF file"), "{run}");
    assert!(err.contains("fix: fix `model:` in the spec"), "{run}");
}

#[test]
fn compose_yaml_is_what_hearth_compose_prints() {
    let run = hearth(&["compose"], &[]);
    assert_eq!(run.code, 0, "{run}");
    let checked_in = std::fs::read_to_string(repo().join("compose.yaml")).unwrap();
    // The spec resolves against this process's environment; CI and developers keep PORT etc.
    // in .env, which compose reads itself, so the generated file does not depend on them.
    assert_eq!(
        run.stdout, checked_in,
        "compose.yaml is stale: target/release/hearth compose -o compose.yaml"
    );
}

#[test]
fn cuda_dockerfile_builds_the_cuda_engine_in_two_stages_and_runs_it_unprivileged() {
    let text = std::fs::read_to_string(repo().join("images/cuda.Dockerfile")).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let froms: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("FROM "))
        .collect();
    assert!(text.contains("ARG CUDA_VERSION=12.8."), "CUDA 12.8.x base");
    assert!(
        froms
            .iter()
            .any(|f| f.contains("nvidia/cuda:${CUDA_VERSION}-devel-") && f.ends_with("AS build")),
        "{froms:?}"
    );
    let last = froms.last().unwrap();
    assert!(
        last.contains("nvidia/cuda:${CUDA_VERSION}-runtime-"),
        "{last}"
    );
    assert!(text.contains("--features cuda") && text.contains("-p hearth-server"));
    assert!(text.contains("COPY --from=build /usr/local/bin/hearth-engine"));
    let user = lines.iter().rev().find(|l| l.starts_with("USER ")).unwrap();
    assert!(!user.contains(" 0") && !user.contains("root"), "{user}");
    assert!(lines.iter().any(|l| l.starts_with("HEALTHCHECK ")));
    assert!(text.contains("\"serve\", \"--spec\", \"/etc/hearth/spec.yaml\""));
    // Every stage a COPY --from names exists.
    for l in lines.iter().filter(|l| l.contains("--from=")) {
        let stage = l
            .split("--from=")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap();
        assert!(
            froms.iter().any(|f| f.ends_with(&format!("AS {stage}"))),
            "COPY --from={stage} names no stage"
        );
    }
}
