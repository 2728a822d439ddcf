//! `hearth eval`: does a server answer correctly, and keep doing so at long context? Three
//! batteries, each case a conversation graded on the answers' content (never the
//! reasoning), with time to first token, prefill and decode tok/s:
//! - `core`: arithmetic, logic, a fact, Python that must pass asserts, multi-turn memory;
//! - `long`: needle in a haystack at context lengths clipped to the model's max_model_len;
//! - `longctx`: several questions in turns over one long report.
//!
//! No max_tokens is sent unless asked, so reasoning models can finish thinking. Results go
//! to DIR/eval.json and DIR/eval.md, and the table is printed. Failing cases do not fail
//! the command (it reports); a server that cannot be reached, or every request failing, does.

mod case;
mod code;
mod core;
mod haystack;
mod long;
mod report;
mod runner;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};

use crate::client::{server, target, ServerArgs};
use report::Report;
use runner::Verdict;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SuiteArg {
    Core,
    Long,
    Longctx,
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// Which batteries to run (comma-separated).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "core,long,longctx"
    )]
    pub suite: Vec<SuiteArg>,
    /// Needle-in-a-haystack context lengths in tokens, clipped to the model's max_model_len.
    #[arg(long, value_delimiter = ',', default_value = "8192,65536")]
    pub needle_lengths: Vec<u32>,
    /// Where the needle sits, as fractions of the haystack.
    #[arg(long, value_delimiter = ',', default_value = "0.1,0.5,0.9")]
    pub needle_depths: Vec<f64>,
    /// Length of the longctx report in tokens, clipped to the model's max_model_len.
    #[arg(long, default_value_t = 16384)]
    pub doc_len: u32,
    /// Only the cases whose name contains this.
    #[arg(long)]
    pub only: Option<String>,
    /// Cap every answer (default: no cap, the server's own limit).
    #[arg(long)]
    pub max_tokens: Option<u32>,
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// Ask the model not to think (chat_template_kwargs {"enable_thinking": false}).
    #[arg(long)]
    pub no_think: bool,
    /// Where to write eval.json and eval.md (default: eval-results/MODEL).
    #[arg(long, short)]
    pub out: Option<PathBuf>,
}

pub async fn run(repo: Option<PathBuf>, a: EvalArgs) -> anyhow::Result<ExitCode> {
    let target = target::resolve(repo, &a.server).await?;
    let http = reqwest::Client::new();
    let info = server::model(&http, &target).await?;
    let mut report = Report {
        server: target.url.clone(),
        model: info.id.clone(),
        max_model_len: info.max_model_len,
        ..Default::default()
    };
    let sizer = haystack::Sizer {
        http: http.clone(),
        target: target.clone(),
        model: info.id.clone(),
    };
    let cases = cases(&a, &sizer, info.max_model_len, &mut report.notes).await?;
    if cases.is_empty() {
        bail!(
            "no case matches --only {:?}",
            a.only.as_deref().unwrap_or("")
        );
    }
    let ctx = runner::Ctx {
        http,
        target,
        model: info.id.clone(),
        max_tokens: a.max_tokens,
        temperature: a.temperature,
        no_think: a.no_think,
    };
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    for (i, case) in cases.iter().enumerate() {
        eprintln!("[{}/{}] {} ...", i + 1, cases.len(), case.name);
        let result = tokio::select! {
            r = runner::run(&ctx, case) => r,
            _ = &mut ctrl_c => {
                report.interrupted = true;
                break;
            }
        };
        eprintln!(
            "      {}{}",
            result.verdict.label(),
            result
                .why
                .as_deref()
                .map(|w| format!(": {w}"))
                .unwrap_or_default()
        );
        report.cases.push(result);
    }
    report.summarize();
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| crate::client::results_dir("eval-results", &info.id));
    finish(&out, &report)
}

/// Prints and writes the report; the exit code.
fn finish(out: &Path, report: &Report) -> anyhow::Result<ExitCode> {
    let written = write(out, report);
    print!("{}", report.markdown());
    match &written {
        Ok(files) => eprintln!("wrote {}", files.join(", ")),
        Err(e) => eprintln!("error: {e:#}"),
    }
    written?;
    if report.interrupted {
        eprintln!("interrupted: the results above are partial");
        return Ok(ExitCode::from(130));
    }
    let errors = report
        .cases
        .iter()
        .filter(|c| c.verdict == Verdict::Error)
        .count();
    if errors == report.cases.len() {
        let first = report
            .cases
            .iter()
            .find_map(|c| c.why.clone())
            .unwrap_or_default();
        bail!("every case failed to get an answer; the first: {first}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The cases to run, long ones fitted to the model's context (each clip noted).
async fn cases(
    a: &EvalArgs,
    sizer: &haystack::Sizer,
    max_model_len: Option<u32>,
    notes: &mut Vec<String>,
) -> anyhow::Result<Vec<case::Case>> {
    let keep = |name: &str| a.only.as_deref().is_none_or(|o| name.contains(o));
    let reserve = a.max_tokens.unwrap_or(256);
    let mut cases = Vec::new();
    for suite in &a.suite {
        match suite {
            SuiteArg::Core => cases.extend(core::battery().into_iter().filter(|c| keep(&c.name))),
            SuiteArg::Long => {
                let (lengths, n) = long::fit_lengths(&a.needle_lengths, max_model_len, reserve);
                notes.extend(n.into_iter().map(|n| format!("long: {n}")));
                let found = long::needles(sizer, &lengths, &a.needle_depths).await?;
                cases.extend(found.into_iter().filter(|c| keep(&c.name)));
            }
            SuiteArg::Longctx => {
                let (lengths, n) = long::fit_lengths(&[a.doc_len], max_model_len, reserve);
                notes.extend(n.into_iter().map(|n| format!("longctx: {n}")));
                for len in lengths {
                    let c = long::document(sizer, len).await?;
                    if keep(&c.name) {
                        cases.push(c);
                    }
                }
            }
        }
    }
    Ok(cases)
}

fn write(dir: &Path, report: &Report) -> anyhow::Result<Vec<String>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = dir.join("eval.json");
    std::fs::write(&json, serde_json::to_string_pretty(report)?)
        .with_context(|| format!("writing {}", json.display()))?;
    let md = dir.join("eval.md");
    std::fs::write(&md, report.markdown()).with_context(|| format!("writing {}", md.display()))?;
    Ok(vec![json.display().to_string(), md.display().to_string()])
}
