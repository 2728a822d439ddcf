//! `hearth-engine perplexity`: a text's perplexity under the model, as llama.cpp's
//! llama-perplexity measures it. The text is tokenized once (no special tokens) and cut into
//! chunks of `--ctx` tokens; each chunk runs as one prompt on an empty cache, and each of its
//! second half's tokens (those with at least ctx/2 tokens of context) is scored by the logits
//! of the position before it. The perplexity is exp of the mean negative log-likelihood over
//! every scored token. Comparing it across settings of one model (e.g. `--quantization fp8`)
//! measures what they cost.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;

use super::source::ModelArgs;

#[derive(Debug, Args)]
pub struct PerplexityArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The text to score (UTF-8).
    #[arg(long)]
    file: PathBuf,
    /// Tokens a chunk.
    #[arg(long, default_value_t = 512)]
    ctx: usize,
    /// Chunks at most (0: as many as the text fills).
    #[arg(long, default_value_t = 0)]
    chunks: usize,
}

pub fn run(a: PerplexityArgs) -> anyhow::Result<()> {
    if a.ctx < 4 {
        bail!("--ctx {}: a chunk needs at least 4 tokens", a.ctx);
    }
    let text =
        std::fs::read_to_string(&a.file).with_context(|| format!("--file {}", a.file.display()))?;
    let loaded = hearth_runtime::load(&a.model.request()?)?;
    if a.ctx > loaded.max_model_len {
        bail!(
            "--ctx {} exceeds the model's max_model_len {}",
            a.ctx,
            loaded.max_model_len
        );
    }
    let tokens = loaded.tokenizer.encode(&text, false)?;
    let fits = tokens.len() / a.ctx;
    let chunks = if a.chunks == 0 {
        fits
    } else {
        a.chunks.min(fits)
    };
    if chunks == 0 {
        bail!(
            "--file {} has {} tokens, fewer than --ctx {}",
            a.file.display(),
            tokens.len(),
            a.ctx
        );
    }
    let engine = &loaded.engine;
    let vocab = engine.info().vocab_size;
    let (mut nll, mut scored) = (0f64, 0usize);
    for (i, chunk) in tokens.chunks_exact(a.ctx).take(chunks).enumerate() {
        let logits = engine.prompt_logits(chunk)?;
        for p in a.ctx / 2..a.ctx - 1 {
            nll += token_nll(&logits[p * vocab..(p + 1) * vocab], chunk[p + 1]);
            scored += 1;
        }
        println!(
            "chunk {}/{chunks}: perplexity so far {:.4}",
            i + 1,
            (nll / scored as f64).exp()
        );
    }
    println!(
        "perplexity {:.4} over {chunks} chunks of {} tokens ({scored} tokens scored) on {}",
        (nll / scored as f64).exp(),
        a.ctx,
        engine.backend_label()
    );
    Ok(())
}

/// -log softmax(logits)[target], in f64.
fn token_nll(logits: &[f32], target: u32) -> f64 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, v| m.max(*v)) as f64;
    let sum: f64 = logits.iter().map(|v| (*v as f64 - max).exp()).sum();
    max + sum.ln() - logits[target as usize] as f64
}

#[cfg(test)]
mod tests {
    use super::token_nll;

    #[test]
    fn nll_is_minus_the_log_softmax() {
        // Uniform logits: every token has probability 1/4.
        assert!((token_nll(&[3.0; 4], 2) - 4f64.ln()).abs() < 1e-12);
        // softmax([0, ln 3]) = [1/4, 3/4], and large offsets change nothing.
        let l = [1000.0, 1000.0 + 3f32.ln()];
        assert!((token_nll(&l, 1) - (4.0f64 / 3.0).ln()).abs() < 1e-4);
        assert!((token_nll(&l, 0) - 4f64.ln()).abs() < 1e-4);
    }
}
