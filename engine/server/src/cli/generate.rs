//! `hearth-engine generate`: prompts through the chat template and the engine. One prompt is
//! streamed to stdout as it is generated; several (repeated --prompt, or --prompts-file with one
//! per line) run together as one continuous batch and are printed as each finishes. Timings go
//! to stderr.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use hearth_runtime::{Loaded, SamplingParams, ValidRequest};
use hearth_text::{ChatRequest, Detokenizer, StopChecker, Tokenizer};
use serde_json::json;

use super::sampling::SamplingArgs;
use super::source::ModelArgs;

#[derive(Debug, Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// A user message (or, with --raw, the exact prompt text); repeat for a batch.
    #[arg(long, short = 'p')]
    prompt: Vec<String>,
    /// A file with one prompt per line, added to the batch.
    #[arg(long)]
    prompts_file: Option<PathBuf>,
    /// A system message, placed before each prompt.
    #[arg(long)]
    system: Option<String>,
    /// Send the prompts as they are, without the chat template.
    #[arg(long)]
    raw: bool,
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    #[command(flatten)]
    sampling: SamplingArgs,
    #[arg(long)]
    seed: Option<u64>,
}

pub fn run(a: GenerateArgs) -> anyhow::Result<()> {
    let params = SamplingParams {
        seed: a.seed,
        ..a.sampling.params()?
    };
    let mut prompts = a.prompt.clone();
    if let Some(f) = &a.prompts_file {
        let text = std::fs::read_to_string(f)
            .with_context(|| format!("--prompts-file {}", f.display()))?;
        prompts.extend(
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_owned),
        );
    }
    if prompts.is_empty() {
        bail!("give at least one --prompt TEXT or --prompts-file FILE");
    }
    let req = a.model.request()?;
    let loaded = hearth_runtime::load(&req)?;
    let cfg = loaded.plan(&req)?;
    let inputs = prompts
        .iter()
        .map(|p| render(&loaded, &a, p))
        .collect::<anyhow::Result<Vec<Vec<u32>>>>()?;
    let Loaded {
        engine,
        tokenizer,
        max_model_len,
        ..
    } = loaded;
    let engine = hearth_runtime::start(engine, cfg, max_model_len, &tokenizer)?;
    let mut streams = Vec::new();
    for prompt in inputs {
        let mut r = ValidRequest::new(prompt, a.max_tokens);
        r.params = params.clone();
        streams.push(engine.submit(r)?);
    }
    let single = streams.len() == 1;
    let mut out = std::io::stdout().lock();
    for (i, mut stream) in streams.into_iter().enumerate() {
        let mut detok = Detokenizer::new(&tokenizer, true).after_prompt();
        let mut stop = StopChecker::new(Vec::new(), tokenizer.eos_ids().to_vec(), false)?;
        let mut text = String::new();
        if !single {
            write!(out, "[{i}] ")?;
        }
        while let Some(o) = stream.blocking_next() {
            let delta = stop.push_token(o.token, &detok.step(o.token)?).text;
            if single {
                // A closed stdout (`| head`) just ends the generation.
                if out
                    .write_all(delta.as_bytes())
                    .and_then(|_| out.flush())
                    .is_err()
                {
                    return Ok(());
                }
            } else {
                text.push_str(&delta);
            }
            if let (Some(finish), Some(m)) = (o.finish, o.metrics) {
                text.push_str(&(detok.finish() + &stop.finish()));
                if single {
                    writeln!(out, "{text}")?;
                } else {
                    writeln!(out, "{}", text.trim_end())?;
                }
                eprintln!(
                    "[prompt {} tokens ({} cached), ttft {:.2} s | {} tokens, {:.0} tok/s | \
                     finish: {}]",
                    m.prompt_tokens,
                    m.cached_tokens,
                    m.ttft.as_secs_f64(),
                    m.generated_tokens,
                    1.0 / m.mean_itl.as_secs_f64().max(1e-9),
                    finish.as_str()
                );
            }
        }
    }
    engine.shutdown();
    Ok(())
}

fn render(loaded: &Loaded, a: &GenerateArgs, prompt: &str) -> anyhow::Result<Vec<u32>> {
    let tok: &Tokenizer = &loaded.tokenizer;
    let text = match (&loaded.chat_template, a.raw) {
        (Some(template), false) => {
            let mut messages = Vec::new();
            if let Some(system) = &a.system {
                messages.push(json!({"role": "system", "content": system}));
            }
            messages.push(json!({"role": "user", "content": prompt}));
            template
                .render(&ChatRequest {
                    messages: &messages,
                    tools: None,
                    add_generation_prompt: true,
                    kwargs: &serde_json::Map::new(),
                })
                .context("rendering the chat template")?
        }
        (None, false) => {
            tracing::warn!("the model has no chat template; sending the prompt as is");
            prompt.to_owned()
        }
        (_, true) => prompt.to_owned(),
    };
    // The template already wrote any BOS it wants; raw prompts get the tokenizer's default.
    Ok(tok.encode(&text, a.raw)?)
}
