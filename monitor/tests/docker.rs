//! hearth-monitor against the real Docker daemon:
//! - a container printing numbered lines, restarted by `docker restart`, killed with SIGKILL,
//!   crashing with a non-zero exit, and the monitor itself restarted meanwhile: serve.log
//!   (rotated at a small size) holds exactly the container's log as Docker has it, every line
//!   once and in order, plus a marker per restart with its exit code;
//! - a real engine run of the default spec booted by `hearth up` (which starts the monitor):
//!   peak.json gets peaks that survive an engine restart and a monitor restart and never go
//!   down; an engine stopped with SIGSTOP mid-request is caught by the watchdog, diagnostics
//!   are saved and the container restarted; `hearth down` stops the monitor.
//!
//! They need Docker, so they are `#[ignore]`d in a plain `cargo test`; tests/run.sh runs them
//! with `-- --ignored`. Names and labels carry the test process id; guards clean up.
//!
//! The numbered-lines container runs this test executable itself (FROM scratch, with the
//! libraries ldd lists): `child_counter` is that program, and does nothing unless
//! HEARTH_MONITOR_TEST_CHILD is set.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::{
    docker, dump, monitor_stderr, scratch_image, serve_log, unique, wait_for, wait_or,
    ContainerGuard, ImageGuard, Monitor,
};

const CHILD_ENV: &str = "HEARTH_MONITOR_TEST_CHILD";

/// The numbered-lines program run inside the test container: `run=<id> n=<k>` every few ms,
/// exiting with code 3 when /ctl/crash appears (which it removes first).
#[test]
#[ignore = "the program of the test container, not a test"]
fn child_counter() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let every = Duration::from_millis(
        std::env::var("COUNT_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10),
    );
    for n in 0u64.. {
        println!("run={run} n={n}");
        if Path::new("/ctl/crash").exists() {
            let _ = std::fs::remove_file("/ctl/crash");
            println!("run={run} crashing");
            std::process::exit(3);
        }
        std::thread::sleep(every);
    }
}

fn restart_markers(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l.contains("[hearth-monitor] restart #"))
        .cloned()
        .collect()
}

fn started_at(container: &str) -> String {
    docker(&["inspect", "-f", "{{.State.StartedAt}}", container])
}

/// Waits until the container runs again after `before` (its previous StartedAt).
fn wait_restarted(container: &str, before: &str, logs: &Path) -> String {
    wait_or(
        Duration::from_secs(30),
        "the container to start again",
        || dump(logs),
        || {
            let now = docker(&[
                "inspect",
                "-f",
                "{{.State.Running}} {{.State.StartedAt}}",
                container,
            ]);
            let (running, at) = now.split_once(' ')?;
            (running == "true" && at != before).then(|| at.to_owned())
        },
    )
}

#[test]
#[ignore = "needs Docker: tests/run.sh runs it with --ignored"]
fn numbered_lines_across_restarts_kills_and_crashes_are_kept_once_in_order() {
    let t0 = Instant::now();
    let spec = unique("counter");
    let image = format!("hearth-monitor-test:{}", unique("counter"));
    let _image_guard = ImageGuard(image.clone());
    let exe = std::env::current_exe().unwrap();
    scratch_image(
        &image,
        &exe,
        &[
            "child_counter",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ],
    );
    let container = format!("hearth-{spec}");
    let _container_guard = ContainerGuard(container.clone());
    let tmp = tempfile::tempdir().unwrap();
    let ctl = tmp.path().join("ctl");
    std::fs::create_dir_all(&ctl).unwrap();
    let logs = tmp.path().join("logs");
    let spec_label = format!("hearth.spec={spec}");
    let ctl_mount = format!("{}:/ctl", ctl.display());
    docker(&[
        "run",
        "-d",
        "--name",
        &container,
        "--label",
        "hearth.managed=true",
        "--label",
        &spec_label,
        "--restart",
        "on-failure:10",
        "-v",
        &ctl_mount,
        "-e",
        &format!("{CHILD_ENV}=1"),
        "-e",
        "COUNT_MS=10",
        &image,
    ]);
    // Small files, many kept: rotation happens several times and nothing is dropped.
    let args = ["--max-size", "16k", "--keep", "200", "--hang-after", "off"];
    let monitor = Monitor::start(&spec, &logs, &args);
    let pause = || std::thread::sleep(Duration::from_millis(1500));
    pause();

    // 1. docker restart: the program is PID 1 and does not handle SIGTERM, so Docker kills
    //    it after the grace second (137).
    let mut at = started_at(&container);
    docker(&["restart", "-t", "1", &container]);
    at = wait_restarted(&container, &at, &logs);
    pause();
    // 2. The process killed with SIGKILL from the host: Docker's policy restarts it (137).
    let pid = docker(&["inspect", "-f", "{{.State.Pid}}", &container]);
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !killed {
        // Not allowed to signal the container's process from here (not root): the same SIGKILL
        // through Docker, which counts as a manual stop, so it is started again by hand.
        docker(&["kill", "-s", "KILL", &container]);
        docker(&["start", &container]);
    }
    at = wait_restarted(&container, &at, &logs);
    pause();
    // 3. The monitor restarts while the engine keeps printing.
    let status = monitor.stop();
    assert!(status.success(), "the monitor's exit on SIGTERM: {status}");
    std::thread::sleep(Duration::from_millis(700));
    let monitor = Monitor::start(&spec, &logs, &args);
    pause();
    // 4. A crash with exit code 3; the policy restarts it.
    std::fs::write(ctl.join("crash"), b"").unwrap();
    at = wait_restarted(&container, &at, &logs);
    pause();
    // 5. Stopped for good.
    docker(&["stop", "-t", "1", &container]);
    wait_or(
        Duration::from_secs(20),
        "the stop marker",
        || dump(&logs),
        || {
            serve_log(&logs)
                .iter()
                .any(|l| l.contains(&format!("{container} stopped: exit code 137")))
                .then_some(())
        },
    );
    let status = monitor.stop();
    assert!(status.success(), "the monitor's exit on SIGTERM: {status}");
    let _ = at;

    let lines = serve_log(&logs);
    let err = monitor_stderr(&logs);
    let (markers, written): (Vec<&String>, Vec<&String>) =
        lines.iter().partition(|l| l.contains(" [hearth-monitor] "));
    // The oracle: Docker's own record of the container's output, with the same timestamps.
    let truth = docker(&["logs", "-t", &container]);
    let truth: Vec<&str> = truth.lines().collect();
    let written: Vec<&str> = written.iter().map(|s| s.as_str()).collect();
    if written != truth {
        let first = written.iter().zip(&truth).position(|(a, b)| a != b);
        panic!(
            "serve.log differs from docker logs: {} vs {} lines, first difference at {first:?}\n\
             markers: {markers:#?}\nmonitor stderr:\n{err}",
            written.len(),
            truth.len()
        );
    }
    // Each run counts up from 0 without a gap; runs are distinct.
    let mut runs: Vec<(String, u64)> = Vec::new();
    for l in &written {
        let Some((run, n)) = l
            .split_once(" run=")
            .and_then(|(_, r)| r.split_once(" n="))
            .and_then(|(r, n)| Some((r.to_owned(), n.parse::<u64>().ok()?)))
        else {
            continue;
        };
        match runs.last_mut() {
            Some((r, last)) if *r == run => {
                assert_eq!(n, *last + 1, "a gap or repeat in run {run}");
                *last = n;
            }
            _ => {
                assert_eq!(n, 0, "run {run} does not start at 0");
                assert!(runs.iter().all(|(r, _)| *r != run), "run {run} came back");
                runs.push((run, n));
            }
        }
    }
    assert_eq!(runs.len(), 4, "four runs: {runs:?}");
    let restarts = restart_markers(&lines);
    assert_eq!(restarts.len(), 3, "{markers:#?}\n{err}");
    assert!(
        restarts[0].contains("exit code 137 (SIGKILL)"),
        "{markers:#?}"
    );
    assert!(
        restarts[1].contains("exit code 137 (SIGKILL)"),
        "{markers:#?}"
    );
    assert!(restarts[2].contains("exit code 3,"), "{markers:#?}");
    assert!(markers.iter().all(|m| !m.contains("OOMKilled true")));
    assert!(
        markers
            .iter()
            .any(|m| m.contains("monitor started; resuming")),
        "{markers:#?}"
    );
    // Rotated at the configured size, lines whole.
    let rotated: Vec<_> = (1..)
        .map(|n| logs.join(format!("serve.log.{n}")))
        .take_while(|p| p.exists())
        .collect();
    assert!(rotated.len() >= 2, "expected several rotations");
    for f in rotated.iter().chain([&logs.join("serve.log")]) {
        let len = std::fs::metadata(f).unwrap().len();
        assert!(len <= 16 * 1024, "{}: {len} bytes", f.display());
    }
    eprintln!(
        "{} lines in {} files, {} markers, {:.1} s",
        written.len(),
        rotated.len() + 1,
        markers.len(),
        t0.elapsed().as_secs_f64()
    );
}

/// promtool: `$HEARTH_PROMTOOL`, else the one tests/fetch_fixtures.sh unpacks into the cache.
fn promtool() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("HEARTH_PROMTOOL") {
        return p.into();
    }
    let cache = std::env::var_os("HEARTH_CACHE").map_or_else(
        || Path::new(&std::env::var("HOME").unwrap_or_default()).join(".cache/hearth"),
        Into::into,
    );
    cache.join("promtool/usr/bin/promtool")
}

#[test]
#[ignore = "needs promtool (tests/fetch_fixtures.sh): tests/run.sh runs it with --ignored"]
fn the_prometheus_scrape_config_passes_promtool() {
    let tool = promtool();
    let out = std::process::Command::new(&tool)
        .args(["check", "config", "monitor/prometheus.yml"])
        .current_dir(support::repo())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", tool.display()));
    assert!(
        out.status.success(),
        "promtool check config:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// peak.json as JSON (Null when missing or unreadable).
fn peak_json(logs: &Path) -> serde_json::Value {
    std::fs::read(logs.join("peak.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

fn peak_pair(p: &serde_json::Value) -> (f64, f64) {
    (
        p["peak_prefill_tps"].as_f64().unwrap_or(0.0),
        p["peak_decode_tps"].as_f64().unwrap_or(0.0),
    )
}

/// Chat requests against `url` on `threads` tasks until `stop` turns true.
fn load(
    rt: &tokio::runtime::Runtime,
    url: &str,
    max_tokens: u32,
    threads: usize,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let body = format!(
        r#"{{"model": "smollm2-135m-instruct", "max_tokens": {max_tokens}, "temperature": 0.7,
            "messages": [{{"role": "user", "content": "Write a long story about a lighthouse keeper who finds a map."}}]}}"#
    );
    (0..threads)
        .map(|_| {
            let (url, body, stop) = (url.to_owned(), body.clone(), stop.clone());
            rt.spawn(async move {
                let http = reqwest::Client::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let sent = http
                        .post(format!("{url}/v1/chat/completions"))
                        .header("content-type", "application/json")
                        .body(body.clone())
                        .send()
                        .await;
                    match sent {
                        Ok(r) => {
                            let _ = r.bytes().await;
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                    }
                }
            })
        })
        .collect()
}

fn get(rt: &tokio::runtime::Runtime, url: &str) -> Option<String> {
    rt.block_on(async {
        let r = reqwest::Client::new()
            .get(url)
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .ok()?;
        if !r.status().is_success() {
            return None;
        }
        r.text().await.ok()
    })
}

fn pid_alive(pid: &str) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rfind(')')
        .is_some_and(|i| !stat[i + 1..].trim_start().starts_with('Z'))
}

/// SIGTERMs a pid on drop (the monitor `hearth up` started, which is not our child).
struct PidGuard(String);

impl Drop for PidGuard {
    fn drop(&mut self) {
        if pid_alive(&self.0) {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &self.0])
                .status();
        }
    }
}

#[test]
#[ignore = "needs Docker and the release build of hearth: tests/run.sh runs it with --ignored"]
fn a_real_engine_peaks_survive_restarts_and_the_watchdog_restarts_a_stopped_engine() {
    let t0 = Instant::now();
    let hearth = support::monitor_bin().with_file_name("hearth");
    assert!(
        hearth.is_file(),
        "{} is not built (cargo build --release -p hearth-launcher)",
        hearth.display()
    );
    let name = unique("engine");
    let image = format!("hearth-engine:{}", unique("img"));
    let _image_guard = ImageGuard(image.clone());
    let container = format!("hearth-{name}");
    let _container_guard = ContainerGuard(container.clone());
    let tmp = tempfile::tempdir().unwrap();
    let logs = tmp.path().join("logs");
    let text = std::fs::read_to_string(support::repo().join("specs/default.yaml")).unwrap();
    let spec = tmp.path().join("spec.yaml");
    std::fs::write(
        &spec,
        text.replace("name: smollm2-135m\n", &format!("name: {name}\n"))
            .replace("image: hearth-engine:cpu\n", &format!("image: {image}\n")),
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let url = format!("http://127.0.0.1:{port}");
    let hearth_run = |args: &[&str]| {
        let out = std::process::Command::new(&hearth)
            .args(args)
            .current_dir(support::repo())
            .env("PORT", &port)
            .env("HEARTH_LOGS", &logs)
            .env("HEARTH_MONITOR_HANG_AFTER", "8s")
            .env("HEARTH_MONITOR_RESTART_GRACE", "2")
            .env("HEARTH_MONITOR_LISTEN", "127.0.0.1:0")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "hearth {args:?}:\n{text}");
        text
    };
    let spec_arg = spec.to_str().unwrap();

    // 1. `hearth up` boots the engine and starts the monitor into $HEARTH_LOGS.
    let up = hearth_run(&["up", spec_arg, "--timeout", "5m"]);
    assert!(
        up.contains(&format!("monitor    {}/serve.log", logs.display())),
        "{up}"
    );
    let info: serde_json::Value =
        serde_json::from_slice(&std::fs::read(logs.join("monitor.json")).unwrap()).unwrap();
    let first_pid = info["pid"].to_string();
    let first_guard = PidGuard(first_pid.clone());
    eprintln!("up: {:.1} s", t0.elapsed().as_secs_f64());

    // 2. Load: peaks appear in peak.json, from /metrics and the stats line.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers = load(&rt, &url, 64, 3, stop.clone());
    let p1 = wait_or(
        Duration::from_secs(90),
        "peaks in peak.json",
        || dump(&logs),
        || {
            let p = peak_json(&logs);
            let (pp, tg) = peak_pair(&p);
            (pp > 0.0 && tg > 0.0 && p["peak_decode_source"].is_string()).then_some(p)
        },
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in workers {
        let _ = rt.block_on(w);
    }
    let (pp1, tg1) = peak_pair(&peak_json(&logs));
    assert_eq!(p1["spec"], name.as_str(), "{p1}");
    assert!(
        p1["spec_hash"].as_str().is_some_and(|h| h.len() >= 12),
        "{p1}"
    );
    assert!(p1["engine_version"].is_string(), "{p1}");
    let status = hearth_run(&["status"]);
    let row = status
        .lines()
        .find(|l| l.starts_with(&container))
        .unwrap_or_default();
    assert!(row.contains(" pp ") && row.contains(" tg "), "{status}");
    eprintln!(
        "peaks pp {pp1} tg {tg1}: {:.1} s",
        t0.elapsed().as_secs_f64()
    );

    // 3. An engine restart: counted, peaks kept.
    let before = started_at(&container);
    docker(&["restart", "-t", "5", &container]);
    wait_restarted(&container, &before, &logs);
    wait_for(Duration::from_secs(120), "the engine ready again", || {
        get(&rt, &format!("{url}/ready"))
    });
    wait_or(
        Duration::from_secs(20),
        "the restart in peak.json",
        || dump(&logs),
        || (peak_json(&logs)["restarts"].as_u64() >= Some(1)).then_some(()),
    );
    let (pp, tg) = peak_pair(&peak_json(&logs));
    assert!(
        pp >= pp1 && tg >= tg1,
        "peaks went down after an engine restart"
    );

    // 4. A monitor restart: the new one reads peak.json back; peaks never go down.
    let status = std::process::Command::new("kill")
        .args(["-TERM", &first_pid])
        .status()
        .unwrap();
    assert!(status.success());
    wait_for(Duration::from_secs(15), "the first monitor to exit", || {
        (!pid_alive(&first_pid)).then_some(())
    });
    drop(first_guard);
    assert!(
        !logs.join("monitor.json").exists(),
        "monitor.json outlived the monitor"
    );
    let args = ["--hang-after", "8s", "--restart-grace", "2"];
    let monitor = Monitor::start(&name, &logs, &args);
    std::thread::sleep(Duration::from_secs(3));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers = load(&rt, &url, 16, 1, stop.clone());
    std::thread::sleep(Duration::from_secs(6));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in workers {
        let _ = rt.block_on(w);
    }
    let (pp, tg) = peak_pair(&peak_json(&logs));
    assert!(
        pp >= pp1 && tg >= tg1,
        "peaks went down after a monitor restart"
    );

    // 5. The watchdog: a request runs, the engine is stopped (SIGSTOP); within the hang time
    //    plus a few scrapes, diagnostics are saved and the container restarted.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers = load(&rt, &url, 2000, 1, stop.clone());
    wait_for(Duration::from_secs(30), "a running request", || {
        let m = get(&rt, &format!("{url}/metrics"))?;
        m.lines()
            .any(|l| l.starts_with("vllm:num_requests_running{") && !l.ends_with(" 0"))
            .then_some(())
    });
    let before = started_at(&container);
    docker(&["kill", "-s", "STOP", &container]);
    let stopped_at = Instant::now();
    let restarted = wait_restarted(&container, &before, &logs);
    let took = stopped_at.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(
        took >= Duration::from_secs(5) && took < Duration::from_secs(30),
        "restarted {took:?} after SIGSTOP\n{}",
        dump(&logs)
    );
    let bundle = std::fs::read_dir(&logs)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("watchdog-"))
        })
        .unwrap_or_else(|| panic!("no watchdog bundle\n{}", dump(&logs)));
    for f in ["reason.txt", "log-tail.txt", "metrics.txt", "inspect.json"] {
        let text = std::fs::read_to_string(bundle.join(f)).unwrap_or_default();
        assert!(!text.is_empty(), "{f} is empty");
    }
    let reason = std::fs::read_to_string(bundle.join("reason.txt")).unwrap();
    // Hung with the request running, or silent (SIGSTOP stops /metrics too) after it was seen.
    assert!(reason.starts_with("watchdog: "), "{reason}");
    let metrics = std::fs::read_to_string(bundle.join("metrics.txt")).unwrap();
    assert!(
        metrics.contains("vllm:generation_tokens_total"),
        "{metrics}"
    );
    let inspect = std::fs::read_to_string(bundle.join("inspect.json")).unwrap();
    assert!(inspect.contains(&container), "inspect.json");
    wait_for(
        Duration::from_secs(120),
        "the engine ready after the watchdog",
        || get(&rt, &format!("{url}/ready")),
    );
    for w in workers {
        rt.block_on(async { drop(tokio::time::timeout(Duration::from_secs(5), w).await) });
    }
    wait_or(
        Duration::from_secs(10),
        "the watchdog in peak.json",
        || dump(&logs),
        || (peak_json(&logs)["watchdog_restarts"].as_u64() == Some(1)).then_some(()),
    );
    let p = peak_json(&logs);
    assert!(p["restarts"].as_u64() >= Some(2), "{p}");
    let lines = serve_log(&logs);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("[hearth-monitor] watchdog: ")),
        "{}",
        dump(&logs)
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("restart #") && l.contains(&restarted)),
        "{}",
        dump(&logs)
    );
    let (pp, tg) = peak_pair(&p);
    assert!(pp >= pp1 && tg >= tg1, "peaks went down");

    // 6. `hearth down` removes the container and stops the monitor.
    let down = hearth_run(&["down", spec_arg]);
    assert!(
        down.contains(&format!("stopped the monitor of {name}")),
        "{down}"
    );
    let status = monitor.stop();
    assert!(status.success(), "the monitor's exit: {status}");
    eprintln!("total {:.1} s", t0.elapsed().as_secs_f64());
}

/// `docker compose` (v2 plugin) or `docker-compose` (v1), whichever this host has.
fn compose() -> std::process::Command {
    let v2 = std::process::Command::new("docker")
        .args(["compose", "version"])
        .output();
    if v2.is_ok_and(|o| o.status.success()) {
        let mut c = std::process::Command::new("docker");
        c.arg("compose");
        c
    } else {
        std::process::Command::new("docker-compose")
    }
}

/// Runs `compose down` for a project on drop.
struct ComposeGuard {
    file: std::path::PathBuf,
    project: String,
}

impl Drop for ComposeGuard {
    fn drop(&mut self) {
        let _ = compose()
            .arg("-f")
            .arg(&self.file)
            .args(["-p", &self.project, "down", "-t", "5"])
            .output();
    }
}

#[test]
#[ignore = "needs Docker's compose and the release build of hearth: tests/run.sh runs it with --ignored"]
fn the_compose_monitor_service_follows_the_engine_from_its_image() {
    let t0 = Instant::now();
    let hearth = support::monitor_bin().with_file_name("hearth");
    assert!(hearth.is_file(), "{} is not built", hearth.display());
    let name = unique("compose");
    let image = format!("hearth-engine:{}", unique("imgc"));
    let _image_guard = ImageGuard(image.clone());
    let tmp = tempfile::tempdir().unwrap();
    let logs = tmp.path().join("logs");
    let text = std::fs::read_to_string(support::repo().join("specs/default.yaml")).unwrap();
    let spec = tmp.path().join("spec.yaml");
    std::fs::write(
        &spec,
        text.replace("name: smollm2-135m\n", &format!("name: {name}\n"))
            .replace("image: hearth-engine:cpu\n", &format!("image: {image}\n")),
    )
    .unwrap();
    let file = tmp.path().join("compose.yaml");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    for args in [
        vec!["build", spec.to_str().unwrap()],
        vec![
            "compose",
            spec.to_str().unwrap(),
            "-o",
            file.to_str().unwrap(),
        ],
    ] {
        let out = std::process::Command::new(&hearth)
            .args(&args)
            .current_dir(support::repo())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "hearth {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let project = unique("compose");
    let _compose_guard = ComposeGuard {
        file: file.clone(),
        project: project.clone(),
    };
    let up = compose()
        .arg("-f")
        .arg(&file)
        .args(["-p", &project, "up", "-d", "engine", "monitor"])
        .current_dir(tmp.path())
        .env("PORT", &port)
        .env("HEARTH_LOGS", &logs)
        .output()
        .unwrap();
    assert!(
        up.status.success(),
        "compose up: {}",
        String::from_utf8_lossy(&up.stderr)
    );
    let monitor = format!("hearth-{name}-monitor");
    let context = || {
        let out = std::process::Command::new("docker")
            .args(["logs", "--tail", "30", &monitor])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
            .unwrap_or_default();
        let tail: Vec<String> = serve_log(&logs).into_iter().rev().take(15).collect();
        format!(
            "monitor container log:\n{out}\nserve.log (newest first):\n{}",
            tail.join("\n")
        )
    };
    // The engine's own startup lines reach serve.log, and peak.json knows the deployment.
    wait_or(
        Duration::from_secs(120),
        "engine lines in serve.log",
        context,
        || {
            let lines = serve_log(&logs);
            let following = lines
                .iter()
                .any(|l| l.contains("[hearth-monitor] following"));
            let engine = lines
                .iter()
                .any(|l| l.contains("phase: ready, serving HTTP"));
            (following && engine).then_some(())
        },
    );
    wait_or(Duration::from_secs(30), "peak.json", context, || {
        (peak_json(&logs)["spec"] == name.as_str()).then_some(())
    });
    let stop = compose()
        .arg("-f")
        .arg(&file)
        .args(["-p", &project, "stop", "-t", "5", "monitor"])
        .output()
        .unwrap();
    assert!(stop.status.success());
    let exit = docker(&["inspect", "-f", "{{.State.ExitCode}}", &monitor]);
    assert_eq!(exit, "0", "the monitor's exit on SIGTERM\n{}", context());
    eprintln!("compose: {:.1} s", t0.elapsed().as_secs_f64());
}
