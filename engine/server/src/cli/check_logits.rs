//! `hearth-engine check-logits`: runs a model on this engine and compares its logits with a
//! reference file written by transformers (tests/fixtures/make_tiny.py's format:
//! `{"cases": [{"prompt": [ids], "logits": [[vocab] per prompt position], "greedy": [ids]}]}`;
//! a long prompt's case may carry only its last positions' logits),
//! printing the largest difference (absolute and relative to the largest reference logit), top-1
//! agreement per position and greedy agreement. Exits non-zero past the tolerance.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use hearth_runtime::sampler::argmax;
use serde::Deserialize;

use super::source::ModelArgs;

#[derive(Debug, Args)]
pub struct CheckLogitsArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Reference JSON (see the module doc).
    #[arg(long)]
    reference: PathBuf,
    /// Largest allowed |ours - reference| / max |reference logit|.
    #[arg(long, default_value_t = 0.02)]
    tolerance: f32,
}

#[derive(Deserialize)]
struct Reference {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    prompt: Vec<u32>,
    logits: Vec<Vec<f32>>,
    #[serde(default)]
    greedy: Vec<u32>,
}

pub fn run(a: CheckLogitsArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&a.reference)
        .with_context(|| format!("--reference {}", a.reference.display()))?;
    let reference: Reference = serde_json::from_str(&text)
        .with_context(|| format!("--reference {}", a.reference.display()))?;
    let loaded = hearth_runtime::load(&a.model.request()?)?;
    let engine = &loaded.engine;
    let vocab = engine.info().vocab_size;
    let mut worst = 0f32;
    for (i, case) in reference.cases.iter().enumerate() {
        let ours = engine.prompt_logits(&case.prompt)?;
        let Some(first) = case.prompt.len().checked_sub(case.logits.len()) else {
            bail!(
                "case {i}: {} rows of logits for a prompt of {} tokens",
                case.logits.len(),
                case.prompt.len()
            );
        };
        let mut max_abs = 0f32;
        let mut scale = 0f32;
        let mut top1 = 0;
        for (p, want) in case.logits.iter().enumerate() {
            if want.len() != vocab {
                bail!(
                    "case {i} position {p}: reference has {} logits, the model {vocab}",
                    want.len()
                );
            }
            let at = first + p;
            let got = &ours[at * vocab..(at + 1) * vocab];
            for (g, w) in got.iter().zip(want) {
                max_abs = max_abs.max((g - w).abs());
                scale = scale.max(w.abs());
            }
            top1 += usize::from(argmax(got) == argmax(want));
        }
        let rel = max_abs / scale.max(1e-6);
        worst = worst.max(rel);
        let greedy = if case.greedy.is_empty() {
            String::new()
        } else {
            let g = engine.greedy(&case.prompt, case.greedy.len())?;
            let same = g
                .iter()
                .zip(&case.greedy)
                .take_while(|(a, b)| a == b)
                .count();
            format!(", greedy {same}/{} identical", case.greedy.len())
        };
        println!(
            "case {i} ({} tokens on {}): max |diff| {max_abs:.3e}, max |ref| {scale:.3}, relative \
             {rel:.3e}, top-1 agrees at {top1}/{} positions{greedy}",
            case.prompt.len(),
            engine.backend_label(),
            case.logits.len()
        );
    }
    if worst > a.tolerance {
        bail!(
            "largest relative difference {worst:.3e} exceeds --tolerance {}",
            a.tolerance
        );
    }
    println!(
        "within tolerance {} (largest relative difference {worst:.3e})",
        a.tolerance
    );
    Ok(())
}
