//! `hearth chat`, `bench` and `eval` as a user runs them, against the real engine
//! (`target/release/hearth-engine serve` with the default spec: SmolLM2-135M on the CPU, an
//! API key set) and against a port where nothing listens. Settings are short so the three
//! run in well under a minute on two cores. The tiny model fails many eval cases; these
//! tests check the tools' mechanics and reports, not the model.

mod support;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{free_port, hearth, hearth_cmd, repo, Run};

const KEY: &str = "client-tools-key";

/// A running `hearth-engine serve` on its own port; killed on drop.
struct Engine {
    child: Child,
    url: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Engine {
    fn start() -> Self {
        let bin = repo().join("target/release/hearth-engine");
        assert!(
            bin.is_file(),
            "{} is missing: cargo build --release -p hearth-server",
            bin.display()
        );
        let port = free_port();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let log = dir.path().join("engine.log");
        let child = Command::new(&bin)
            .args(["serve", "--spec", "specs/default.yaml"])
            .current_dir(repo())
            .env("PORT", port.to_string())
            .env("API_KEY", KEY)
            .stdout(std::fs::File::create(&log).expect("the engine log"))
            .stderr(std::fs::File::create(dir.path().join("engine.err")).expect("the engine log"))
            .spawn()
            .expect("starting hearth-engine");
        let mut e = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            log,
            _dir: dir,
        };
        e.wait_ready(port);
        e
    }

    fn wait_ready(&mut self, port: u16) {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(120) {
            if let Some(status) = self.child.try_wait().expect("polling the engine") {
                panic!("the engine exited ({status}): {}", self.logs());
            }
            if http_status(port, "/ready") == Some(200) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("the engine was not ready in 120 s: {}", self.logs());
    }

    fn logs(&self) -> String {
        let err = self.log.with_file_name("engine.err");
        format!(
            "{}{}",
            std::fs::read_to_string(&self.log).unwrap_or_default(),
            std::fs::read_to_string(err).unwrap_or_default()
        )
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The status code of `GET path` on localhost, without an HTTP client library.
fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

fn run_with_stdin(args: &[&str], stdin: &str) -> Run {
    let t = Instant::now();
    let mut child = hearth_cmd(args, &[("NO_COLOR", "1")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting hearth");
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(stdin.as_bytes())
        .expect("writing to hearth");
    support::finish(child.wait_with_output().expect("waiting for hearth"), t)
}

fn json_file(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).expect("valid JSON")
}

#[test]
fn chat_streams_answers_and_explains_a_missing_key() {
    let e = Engine::start();
    let u = e.url.as_str();
    let q = "What is the capital of France?";
    let run = hearth(
        &[
            "chat",
            "--url",
            u,
            "--api-key",
            KEY,
            "--max-tokens",
            "32",
            q,
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{run}");
    assert!(run.stdout.contains("Paris"), "{run}");
    assert!(
        !run.stdout.contains('\x1b'),
        "no ANSI when stdout is a pipe: {run}"
    );
    for part in ["[prompt ", " tokens in ", "TTFT", "tok/s", "finish "] {
        assert!(run.stderr.contains(part), "missing {part:?}: {run}");
    }

    let run = hearth(
        &[
            "chat",
            "--url",
            u,
            "--api-key",
            KEY,
            "--max-tokens",
            "4",
            "--json",
            q,
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{run}");
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(!v["content"].as_str().unwrap().is_empty(), "{run}");
    assert_eq!(v["usage"]["completion_tokens"], 4, "{run}");
    assert_eq!(v["finish_reason"], "length", "{run}");
    assert!(v["ttft_s"].as_f64().unwrap() > 0.0, "{run}");

    // Interactive: two turns, the second sees the first (history), then "exit".
    let run = run_with_stdin(
        &["chat", "--url", u, "--api-key", KEY, "--max-tokens", "16"],
        "My name is Ada.\nWhat is my name?\nexit\n",
    );
    assert_eq!(run.code, 0, "{run}");
    assert!(
        run.stderr.contains("chatting with smollm2-135m-instruct"),
        "{run}"
    );
    assert_eq!(run.stderr.matches("[prompt ").count(), 2, "{run}");

    // No key: a 401 that says what to do, and a non-zero exit.
    let run = hearth(&["chat", "--url", u, q], &[("API_KEY", "")]);
    assert_eq!(run.code, 1, "{run}");
    assert!(run.stderr.contains("401"), "{run}");
    assert!(run.stderr.contains("--api-key"), "{run}");
}

#[test]
fn bench_writes_json_markdown_and_plot_that_agree() {
    let e = Engine::start();
    let out = tempfile::tempdir().unwrap();
    let o = out.path().to_str().unwrap();
    let run = hearth(
        &[
            "bench",
            "--url",
            &e.url,
            "--api-key",
            KEY,
            "--mode",
            "sweep,depth,prefix",
            "--concurrency",
            "1,2",
            "--requests",
            "2",
            "--input-len",
            "64",
            "--output-len",
            "16",
            "--depths",
            "0,4096",
            "--reps",
            "1",
            "--prefix-len",
            "256",
            "--prefix-requests",
            "2",
            "--prefix-concurrency",
            "2",
            "--out",
            o,
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{run}\n{}", e.logs());
    let json = json_file(&out.path().join("bench.json"));
    assert_eq!(json["exact_prompt_lengths"], true, "{json}");
    assert_eq!(json["interrupted"], false);
    let sweep = json["sweep"].as_array().unwrap();
    assert_eq!(sweep.len(), 2, "{json}");
    for (row, c) in sweep.iter().zip([1, 2]) {
        assert_eq!(row["concurrency"], c);
        assert_eq!(row["errors"], 0, "{row}");
        assert_eq!(row["completed"], 2, "{row}");
        assert_eq!(
            row["mean_prompt_tokens"], 64.0,
            "exact prompt length: {row}"
        );
        assert_eq!(row["output_tokens"], 32, "ignore_eos, fixed length: {row}");
        assert!(row["system_tok_s"].as_f64().unwrap() > 0.0);
        assert!(row["itl_p99_ms"].as_f64().unwrap() > 0.0);
    }
    // The markdown table, printed and written, says what the JSON says.
    let md = std::fs::read_to_string(out.path().join("bench.md")).unwrap();
    assert!(run.stdout.contains(&md), "{run}");
    let rows: Vec<Vec<String>> = md
        .lines()
        .skip_while(|l| !l.starts_with("| Concurrency | System tok/s | Per-req tok/s | TTFT"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), sweep.len(), "{md}");
    for (cells, row) in rows.iter().zip(sweep) {
        let f = |k: &str| row[k].as_f64().unwrap();
        let want = [
            row["concurrency"].to_string(),
            format!("{:.1}", f("system_tok_s")),
            format!("{:.1}", f("per_request_tok_s")),
            format!("{:.3} s", f("ttft_p50_s")),
            format!("{:.3} s", f("ttft_p99_s")),
            format!("{:.1} ms", f("itl_p50_ms")),
            format!("{:.1} ms", f("itl_p99_ms")),
            row["errors"].to_string(),
        ];
        assert_eq!(cells, &want, "{md}");
    }
    // Depth 4096 does not fit max_model_len 2048: measured at the deepest that does.
    let depth = json["depth"].as_array().unwrap();
    let depths: Vec<u64> = depth.iter().map(|d| d["depth"].as_u64().unwrap()).collect();
    assert_eq!(depths, [0, 2048 - 64 - 16], "{json}");
    assert!(
        depth
            .iter()
            .all(|d| d["prefill_tok_s"].as_f64().unwrap() > 0.0),
        "{json}"
    );
    assert!(
        md.contains("| Depth | Prompt tokens | Prefill tok/s | Decode tok/s |"),
        "{md}"
    );
    // Prefix cache: the shared 256 tokens are hits for the warm requests.
    let prefix = &json["prefix_cache"];
    let hit = prefix["hit_rate"].as_f64().unwrap_or(-1.0);
    assert!(hit > 0.5, "hit rate {hit}: {prefix}");
    // The plot.
    let svg = std::fs::read_to_string(out.path().join("bench.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.len() > 2000, "{svg}");
    assert!(svg.contains("Output throughput") && svg.contains("Time to first token"));
}

#[test]
fn eval_grades_every_case_with_timings() {
    let e = Engine::start();
    let out = tempfile::tempdir().unwrap();
    let o = out.path().to_str().unwrap();
    let run = hearth(
        &[
            "eval",
            "--url",
            &e.url,
            "--api-key",
            KEY,
            "--needle-lengths",
            "512,65536",
            "--needle-depths",
            "0.5",
            "--doc-len",
            "768",
            "--max-tokens",
            "48",
            "--out",
            o,
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{run}\n{}", e.logs());
    let json = json_file(&out.path().join("eval.json"));
    let cases = json["cases"].as_array().unwrap();
    let names: Vec<&str> = cases.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert!(
        names.contains(&"arith-add") && names.contains(&"multiturn-memory"),
        "{names:?}"
    );
    // 65536 does not fit 2048 - 48: measured at 2000 instead, and said so.
    assert!(names.contains(&"needle-512-at-50%"), "{names:?}");
    assert!(names.contains(&"needle-2000-at-50%"), "{names:?}");
    assert!(names.contains(&"report-768"), "{names:?}");
    let notes = json["notes"].to_string();
    assert!(
        notes.contains("65536 tokens do not fit max_model_len 2048"),
        "{notes}"
    );
    for c in cases {
        let v = c["verdict"].as_str().unwrap();
        assert!(["pass", "fail", "skip"].contains(&v), "{c}");
        let last = c["turns"].as_array().unwrap().last().unwrap();
        assert!(last["ttft_s"].as_f64().unwrap() > 0.0, "{c}");
        assert!(last["prefill_tok_s"].as_f64().unwrap() > 0.0, "{c}");
    }
    let turns = |name: &str| {
        cases.iter().find(|c| c["name"] == name).unwrap()["turns"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(turns("multiturn-memory"), 3);
    assert_eq!(turns("report-768"), 3);
    // A real answer graded on its content: this model knows Paris.
    let capital = cases.iter().find(|c| c["name"] == "fact-capital").unwrap();
    assert_eq!(capital["verdict"], "pass", "{capital}");
    // One table row per case, and a summary per suite.
    let md = std::fs::read_to_string(out.path().join("eval.md")).unwrap();
    assert!(run.stdout.contains(&md));
    assert!(md.contains("| Case | Suite | Result | TTFT | Prefill tok/s | Decode tok/s | Note |"));
    for c in cases {
        let row = format!(
            "| {} | {} | ",
            c["name"].as_str().unwrap(),
            c["suite"].as_str().unwrap()
        );
        assert!(md.contains(&row), "no row {row}: {md}");
    }
    assert!(md.contains("- core: "), "{md}");
    assert!(md.contains("- long recall at 512 tokens: "), "{md}");
}

#[test]
fn a_stopped_server_is_a_clear_error_for_every_tool() {
    let url = format!("http://127.0.0.1:{}", free_port());
    let out = tempfile::tempdir().unwrap();
    let o = out.path().to_str().unwrap();
    for args in [
        vec!["chat", "--url", &url, "hello"],
        vec!["bench", "--url", &url, "--out", o],
        vec!["eval", "--url", &url, "--out", o],
    ] {
        let run = hearth(&args, &[]);
        assert_eq!(run.code, 1, "{run}");
        assert!(
            run.stderr
                .contains(&format!("cannot reach the server at {url}")),
            "{run}"
        );
        assert!(run.stderr.contains("Is it running?"), "{run}");
        assert!(!run.stderr.contains("panicked"), "{run}");
    }
}
