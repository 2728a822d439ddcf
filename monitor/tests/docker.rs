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
    docker, dump, monitor_stderr, wait_or, scratch_image, serve_log, unique, wait_for, ContainerGuard,
    ImageGuard, Monitor,
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
fn wait_restarted(container: &str, before: &str) -> String {
    wait_for(Duration::from_secs(30), "the container to start again", || {
        let now = docker(&[
            "inspect",
            "-f",
            "{{.State.Running}} {{.State.StartedAt}}",
            container,
        ]);
        let (running, at) = now.split_once(' ')?;
        (running == "true" && at != before).then(|| at.to_owned())
    })
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
        "run", "-d", "--name", &container, "--label", "hearth.managed=true",
        "--label", &spec_label, "--restart", "on-failure:10", "-v", &ctl_mount,
        "-e", &format!("{CHILD_ENV}=1"), "-e", "COUNT_MS=10", &image,
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
    at = wait_restarted(&container, &at);
    pause();
    // 2. The process killed with SIGKILL from the host: Docker's policy restarts it (137).
    let pid = docker(&["inspect", "-f", "{{.State.Pid}}", &container]);
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .unwrap();
    assert!(killed.success(), "kill -KILL {pid}");
    at = wait_restarted(&container, &at);
    pause();
    // 3. The monitor restarts while the engine keeps printing.
    let status = monitor.stop();
    assert!(status.success(), "the monitor's exit on SIGTERM: {status}");
    std::thread::sleep(Duration::from_millis(700));
    let monitor = Monitor::start(&spec, &logs, &args);
    pause();
    // 4. A crash with exit code 3; the policy restarts it.
    std::fs::write(ctl.join("crash"), b"").unwrap();
    at = wait_restarted(&container, &at);
    pause();
    // 5. Stopped for good.
    docker(&["stop", "-t", "1", &container]);
    wait_or(Duration::from_secs(20), "the stop marker", || dump(&logs), || {
        serve_log(&logs)
            .iter()
            .any(|l| l.contains(&format!("{container} stopped: exit code 137")))
            .then_some(())
    });
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
    assert!(restarts[0].contains("exit code 137 (SIGKILL)"), "{markers:#?}");
    assert!(restarts[1].contains("exit code 137 (SIGKILL)"), "{markers:#?}");
    assert!(restarts[2].contains("exit code 3,"), "{markers:#?}");
    assert!(markers
        .iter()
        .all(|m| !m.contains("OOMKilled true")));
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
