//! `hearth bench`: a load generator for any OpenAI-compatible server (Hearth, vLLM,
//! llama.cpp), streaming every answer over SSE and timing each token. Modes:
//! - `sweep` (default): a concurrency sweep, with system and per-request output tok/s,
//!   TTFT and inter-token latency percentiles and errors per level;
//! - `depth`: prefill and decode tok/s at context depths (llama-benchy's pp/tg at depth);
//! - `prefix`: requests sharing a long prefix, with the server's prefix-cache hit rate.
//!
//! Results go to DIR/bench.json, DIR/bench.md (the tables also printed) and DIR/bench.svg
//! (the sweep plotted). Ctrl-C stops at once and still reports and writes what finished.

mod depth;
mod load;
mod plot;
mod prefix;
mod progress;
mod prompt;
mod report;
mod stats;
mod stop;
mod sweep;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use hearth_protocol::openai::Prompt;

use crate::client::{server, target, ServerArgs};
use load::Ctx;
use report::Report;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Throughput and latency at each concurrency level.
    Sweep,
    /// Prefill and decode speed at context depths.
    Depth,
    /// Requests sharing a long prefix: prefix-cache hit rate and warm TTFT.
    Prefix,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// What to measure (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "sweep")]
    pub mode: Vec<Mode>,
    /// Concurrency levels of the sweep.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32,64")]
    pub concurrency: Vec<usize>,
    /// Prompt length in tokens (sweep), the measured prompt after the context (depth), and
    /// each request's own suffix (prefix).
    #[arg(long, default_value_t = 512)]
    pub input_len: u32,
    /// Output tokens per request, generated with ignore_eos.
    #[arg(long, default_value_t = 128)]
    pub output_len: u32,
    /// Requests per concurrency level (default: twice the level, at least 4).
    #[arg(long)]
    pub requests: Option<usize>,
    /// Context depths for depth mode, clipped to the model's max_model_len.
    #[arg(long, value_delimiter = ',', default_value = "0,4096,16384,32768")]
    pub depths: Vec<u32>,
    /// Repetitions per depth (the mean is reported).
    #[arg(long, default_value_t = 2)]
    pub reps: usize,
    /// Length of the shared prefix in prefix mode, clipped to the model's max_model_len.
    #[arg(long, default_value_t = 2048)]
    pub prefix_len: u32,
    /// Requests after the cold one in prefix mode.
    #[arg(long, default_value_t = 16)]
    pub prefix_requests: usize,
    /// Concurrency in prefix mode.
    #[arg(long, default_value_t = 4)]
    pub prefix_concurrency: usize,
    /// Where to write bench.json, bench.md and bench.svg (default: bench-results/MODEL).
    #[arg(long, short)]
    pub out: Option<PathBuf>,
}

pub async fn run(repo: Option<PathBuf>, a: BenchArgs) -> anyhow::Result<ExitCode> {
    if a.concurrency.is_empty() || a.concurrency.contains(&0) {
        bail!("--concurrency: give levels of 1 or more, e.g. 1,2,4,8");
    }
    if a.output_len == 0 || a.input_len == 0 {
        bail!("--input-len and --output-len must be 1 or more");
    }
    let target = target::resolve(repo, &a.server).await?;
    let http = reqwest::Client::new();
    let info = server::model(&http, &target).await?;
    let ctx = Ctx {
        http: http.clone(),
        target: target.clone(),
        model: info.id.clone(),
    };
    let maker = prompt::PromptMaker::new(http, target.clone(), info.id.clone()).await?;
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut report = Report {
        server: target.url.clone(),
        model: info.id.clone(),
        max_model_len: info.max_model_len,
        exact_prompt_lengths: maker.exact,
        started_unix: started.as_secs(),
        input_len: a.input_len,
        output_len: a.output_len,
        ..Default::default()
    };
    if !maker.exact {
        report.notes.push(format!(
            "{} has no vLLM-style /tokenize: prompts are about {} tokens of text (see mean prompt tokens in the JSON)",
            target.url, a.input_len
        ));
    }
    if let Some(max) = info.max_model_len {
        if a.mode.contains(&Mode::Sweep) && a.input_len + a.output_len > max {
            bail!(
                "--input-len {} + --output-len {} exceed the model's max_model_len {max}",
                a.input_len,
                a.output_len
            );
        }
    }
    // Seeds differ run to run, so a second run is not served from the first one's cache.
    let plans = Plans::new(&a, info.max_model_len, started.as_nanos() as u64);
    let total = planned_requests(&a, plans.depths.len());
    let progress = progress::Progress::new(total as u64);
    let mut env = Env {
        ctx: &ctx,
        maker: &maker,
        stop: stop::Stop::on_ctrl_c(),
        progress: &progress,
    };
    warm_up(&ctx).await?;
    let out_dir = a
        .out
        .clone()
        .unwrap_or_else(|| crate::client::results_dir("bench-results", &info.id));
    let result = run_modes(&a, &mut env, &plans, &mut report).await;
    progress.finish();
    report.interrupted |= env.stop.is_set();
    finish(&out_dir, &report, result)
}

/// Prints and writes what was measured (also after an error or Ctrl-C); the exit code.
fn finish(out_dir: &Path, report: &Report, result: anyhow::Result<()>) -> anyhow::Result<ExitCode> {
    let written = write(out_dir, report);
    print!("{}", report.markdown());
    match &written {
        Ok(files) => eprintln!("wrote {}", files.join(", ")),
        Err(e) => eprintln!("error: {e:#}"),
    }
    result?;
    written?;
    if report.interrupted {
        eprintln!("interrupted: the results above are partial");
        return Ok(ExitCode::from(130));
    }
    if let Some(e) = all_failed(report) {
        bail!("every request failed; the first: {e}");
    }
    Ok(ExitCode::SUCCESS)
}

/// What every mode runs with: the server, the prompt maker, Ctrl-C and the progress bar.
pub struct Env<'a> {
    pub ctx: &'a Ctx,
    pub maker: &'a prompt::PromptMaker,
    pub stop: stop::Stop,
    pub progress: &'a progress::Progress,
}

/// The modes' settings after clipping to the model's context.
struct Plans {
    seed: u64,
    depths: Vec<u32>,
    depth_notes: Vec<String>,
    prefix_len: u32,
}

impl Plans {
    fn new(a: &BenchArgs, max_model_len: Option<u32>, seed: u64) -> Self {
        let (depths, depth_notes) =
            depth::plan(&a.depths, max_model_len, a.input_len, a.output_len);
        let prefix_len = match max_model_len {
            Some(max) => a
                .prefix_len
                .min(max.saturating_sub(a.input_len + a.output_len)),
            None => a.prefix_len,
        };
        Self {
            seed,
            depths,
            depth_notes,
            prefix_len,
        }
    }
}

async fn run_modes(
    a: &BenchArgs,
    env: &mut Env<'_>,
    p: &Plans,
    report: &mut Report,
) -> anyhow::Result<()> {
    let seed = p.seed;
    for mode in &a.mode {
        if env.stop.is_set() {
            break;
        }
        match mode {
            Mode::Sweep => {
                let plan = sweep::SweepPlan {
                    levels: a.concurrency.clone(),
                    requests: a.requests,
                    input_len: a.input_len,
                    output_len: a.output_len,
                    seed,
                };
                sweep::run(env, &plan, report).await?;
            }
            Mode::Depth => {
                report.notes.extend(p.depth_notes.iter().cloned());
                let plan = depth::DepthPlan {
                    depths: p.depths.clone(),
                    pp: a.input_len,
                    tg: a.output_len,
                    reps: a.reps.max(1),
                    seed,
                };
                depth::run(env, &plan, report).await?;
            }
            Mode::Prefix => {
                let prefix_len = p.prefix_len;
                if prefix_len < a.prefix_len {
                    report.notes.push(format!(
                        "prefix {} tokens does not fit max_model_len with the suffix and output: used {prefix_len}",
                        a.prefix_len
                    ));
                }
                let plan = prefix::PrefixPlan {
                    prefix_len,
                    suffix_len: a.input_len,
                    output_len: a.output_len,
                    requests: a.prefix_requests.max(1),
                    concurrency: a.prefix_concurrency.max(1),
                    seed,
                };
                prefix::run(env, &plan, report).await?;
            }
        }
    }
    Ok(())
}

fn planned_requests(a: &BenchArgs, depths: usize) -> usize {
    a.mode
        .iter()
        .map(|m| match m {
            Mode::Sweep => a
                .concurrency
                .iter()
                .map(|&c| sweep::requests_for(c, a.requests))
                .sum(),
            Mode::Depth => depths * a.reps.max(1),
            Mode::Prefix => a.prefix_requests.max(1) + 1,
        })
        .sum()
}

/// One short request first, so the first level does not pay for anything lazy on the
/// server (and a server that cannot generate fails here, clearly).
async fn warm_up(ctx: &Ctx) -> anyhow::Result<()> {
    let r = load::request(ctx, Prompt::Text("Hello".into()), 4).await;
    match r.error {
        Some(e) => bail!("the warm-up request failed: {e}"),
        None => Ok(()),
    }
}

/// Writes the JSON, the markdown and (with a sweep) the plot; returns the paths.
fn write(dir: &Path, report: &Report) -> anyhow::Result<Vec<String>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut files = Vec::new();
    let mut put = |name: &str, text: &str| -> anyhow::Result<()> {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
        files.push(p.display().to_string());
        Ok(())
    };
    put("bench.json", &serde_json::to_string_pretty(report)?)?;
    put("bench.md", &report.markdown())?;
    if !report.sweep.is_empty() {
        put("bench.svg", &plot::svg(report)?)?;
    }
    Ok(files)
}

/// The first error, when not a single request succeeded.
fn all_failed(r: &Report) -> Option<String> {
    let ok = r.sweep.iter().map(|l| l.completed).sum::<usize>()
        + r.depth.iter().map(|d| d.reps - d.errors).sum::<usize>()
        + r.prefix_cache
            .as_ref()
            .map_or(0, |p| p.requests.saturating_sub(p.errors));
    let ran = !r.sweep.is_empty() || !r.depth.is_empty() || r.prefix_cache.is_some();
    if ok > 0 || !ran {
        return None;
    }
    r.sweep
        .iter()
        .find_map(|l| l.first_error.clone())
        .or_else(|| r.depth.iter().find_map(|d| d.first_error.clone()))
        .or_else(|| Some("(no message)".into()))
}
