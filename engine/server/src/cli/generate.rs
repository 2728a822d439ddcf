//! `hearth-engine generate`: one prompt through the chat template and the model, the answer
//! streamed to stdout as it is generated, timings on stderr.

use std::io::Write;

use anyhow::Context;
use clap::Args;
use hearth_runtime::{FinishReason, Generator, SamplingParams};
use hearth_text::{ChatRequest, Detokenizer, StopChecker};
use serde_json::json;

use super::source::ModelArgs;

#[derive(Debug, Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The user message (or, with --raw, the exact prompt text).
    #[arg(long, short = 'p')]
    prompt: String,
    /// A system message, placed before the prompt.
    #[arg(long)]
    system: Option<String>,
    /// Send the prompt as is, without the chat template.
    #[arg(long)]
    raw: bool,
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    /// 0 = greedy.
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// 0 = off.
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    #[arg(long)]
    seed: Option<u64>,
}

pub fn run(a: GenerateArgs) -> anyhow::Result<()> {
    if !(0.0..=2.0).contains(&a.temperature) {
        anyhow::bail!(
            "--temperature {} is out of range (allowed: 0 to 2)",
            a.temperature
        );
    }
    if !(a.top_p > 0.0 && a.top_p <= 1.0) {
        anyhow::bail!(
            "--top-p {} is out of range (allowed: greater than 0, at most 1)",
            a.top_p
        );
    }
    let req = a.model.request()?;
    let loaded = hearth_runtime::load(&req)?;
    let tok = &loaded.tokenizer;
    let text = match (&loaded.chat_template, a.raw) {
        (Some(template), false) => {
            let mut messages = Vec::new();
            if let Some(system) = &a.system {
                messages.push(json!({"role": "system", "content": system}));
            }
            messages.push(json!({"role": "user", "content": a.prompt}));
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
            a.prompt.clone()
        }
        (_, true) => a.prompt.clone(),
    };
    // The template already wrote any BOS it wants; raw prompts get the tokenizer's default.
    let prompt = tok.encode(&text, a.raw)?;
    let params = SamplingParams {
        temperature: a.temperature,
        top_k: a.top_k,
        top_p: a.top_p,
        min_p: 0.0,
        seed: a.seed,
    };
    let mut gen = Generator::new(&loaded.backend, loaded.model.as_ref(), loaded.max_model_len)?;
    let mut detok = Detokenizer::new(tok, true).after_prompt();
    let mut stop = StopChecker::new(Vec::new(), tok.eos_ids().to_vec(), false)?;
    let mut out = std::io::stdout().lock();
    let mut error = None;
    let (finish, stats) = gen.generate(&prompt, a.max_tokens, &params, tok.eos_ids(), |id| {
        let delta = match detok.step(id) {
            Ok(d) => d,
            Err(e) => {
                error = Some(e);
                return false;
            }
        };
        let o = stop.push_token(id, &delta);
        // A closed stdout (`| head`) just ends the generation.
        let ok = out
            .write_all(o.text.as_bytes())
            .and_then(|_| out.flush())
            .is_ok();
        ok && o.stopped.is_none()
    })?;
    if let Some(e) = error {
        return Err(e.into());
    }
    let tail = detok.finish() + &stop.finish();
    writeln!(out, "{tail}")?;
    let finish = match finish {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
    };
    eprintln!(
        "[prompt {} tokens, {:.2} s, {:.0} tok/s | {} tokens, {:.0} tok/s | finish: {finish}]",
        stats.prompt_tokens,
        stats.prefill.as_secs_f64(),
        stats.prefill_tps(),
        stats.generated_tokens,
        stats.decode_tps(),
    );
    Ok(())
}
