//! `hearth-engine bench`: prompt processing and token generation speed of one model, measured the
//! way llama-bench does (ppN: prefill N tokens into an empty cache; tgN: generate N tokens one at
//! a time from an empty cache), so the two can be compared in one run on one machine.

use std::time::Instant;

use hearth_backend::{Backend, KvDtype};
use hearth_models::CausalLm;

use crate::generate::Generator;
use crate::sampler::SamplingParams;
use crate::RuntimeError;

/// One benchmark line.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchResult {
    /// "pp128", "tg64".
    pub test: String,
    pub tokens_per_s_mean: f64,
    pub tokens_per_s_std: f64,
}

/// Deterministic, vocabulary-spread prompt tokens (content does not matter for speed).
fn prompt(n: usize, vocab: usize) -> Vec<u32> {
    (0..n)
        .map(|i| ((i * 7919 + 13) % vocab.max(1)) as u32)
        .collect()
}

fn mean_std(xs: &[f64]) -> (f64, f64) {
    let n = xs.len().max(1) as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (mean, var.sqrt())
}

/// What `run` measures.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchOptions {
    /// Prompt lengths: one ppN test each.
    pub pp: Vec<usize>,
    /// Generation lengths: one tgN test each.
    pub tg: Vec<usize>,
    /// Timed repetitions of each test, after one warm-up.
    pub reps: usize,
    /// Prompt tokens per forward pass (llama-bench's -ub; its default is 512).
    pub ubatch: usize,
    pub kv_dtype: KvDtype,
}

/// Runs ppN for each of `o.pp` and tgN for each of `o.tg`, `o.reps` times each after one
/// warm-up.
pub fn run<B: Backend>(
    backend: &B,
    model: &dyn CausalLm<B>,
    o: &BenchOptions,
) -> Result<Vec<BenchResult>, RuntimeError> {
    let (pp, tg, reps) = (&o.pp, &o.tg, o.reps);
    let new_gen = |max_len| {
        Generator::with_kv_dtype(backend, model, max_len, o.kv_dtype)
            .map(|g| g.with_prefill_chunk(o.ubatch))
    };
    let vocab = model.info().vocab_size;
    let max_len = pp.iter().chain(tg).copied().max().unwrap_or(1) + 4;
    let mut results = Vec::new();
    for &n in pp.iter() {
        let tokens = prompt(n, vocab);
        let mut rates = Vec::with_capacity(reps);
        for rep in 0..=reps {
            let mut gen = new_gen(max_len)?;
            let t = Instant::now();
            gen.prefill(&tokens)?;
            if rep > 0 {
                rates.push(n as f64 / t.elapsed().as_secs_f64());
            }
        }
        let (mean, std) = mean_std(&rates);
        results.push(BenchResult {
            test: format!("pp{n}"),
            tokens_per_s_mean: mean,
            tokens_per_s_std: std,
        });
    }
    for &n in tg.iter() {
        let mut rates = Vec::with_capacity(reps);
        for rep in 0..=reps {
            let mut gen = new_gen(max_len)?;
            // As llama-bench's tg: n decode steps, timed without the one-token prompt before them.
            let (_, stats) = gen.generate(
                &prompt(1, vocab),
                n + 1,
                &SamplingParams::default(),
                &[],
                |_| true,
            )?;
            if rep > 0 {
                rates.push(n as f64 / stats.decode.as_secs_f64().max(1e-9));
            }
        }
        let (mean, std) = mean_std(&rates);
        results.push(BenchResult {
            test: format!("tg{n}"),
            tokens_per_s_mean: mean,
            tokens_per_s_std: std,
        });
    }
    Ok(results)
}

/// One concurrency level of the serving benchmark.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeResult {
    pub concurrency: usize,
    /// All output tokens over the wall time of the level.
    pub output_tokens_per_s: f64,
    /// Mean over requests of generated tokens / (e2e - ttft).
    pub per_request_tokens_per_s: f64,
    pub ttft_mean: std::time::Duration,
    pub ttft_max: std::time::Duration,
}

/// `concurrency` requests of `prompt_len` tokens, each generating exactly `gen_len` (ignore_eos)
/// under `params` (request i seeded with i), submitted at once to the engine; one result per
/// level. Every request of every level has a prompt of its own: a level must not find an earlier
/// level's prompts in the prefix cache.
pub fn run_serving(
    engine: &crate::EngineHandle,
    vocab: usize,
    levels: &[usize],
    (prompt_len, gen_len): (usize, usize),
    params: &SamplingParams,
) -> Result<Vec<ServeResult>, RuntimeError> {
    let mut results = Vec::new();
    let mut first = 0;
    for &c in levels {
        let t = Instant::now();
        let mut streams = Vec::with_capacity(c);
        for i in first..first + c {
            // Distinct prompts so the prefix cache does not turn this into a cache benchmark.
            let prompt: Vec<u32> = prompt(prompt_len + 1, vocab)
                .into_iter()
                .skip(1)
                .map(|x| ((x as usize + i * 17) % vocab) as u32)
                .collect();
            let mut req = crate::ValidRequest::new(prompt, gen_len);
            req.params = SamplingParams {
                seed: Some(i as u64),
                ignore_eos: true,
                ..params.clone()
            };
            streams.push(
                engine
                    .submit(req)
                    .map_err(|e| RuntimeError::Unsupported(e.to_string()))?,
            );
        }
        let mut metrics = Vec::with_capacity(c);
        for s in &mut streams {
            while let Some(o) = s.blocking_next() {
                if let Some(m) = o.metrics {
                    metrics.push(m);
                }
            }
        }
        let wall = t.elapsed().as_secs_f64();
        let total: usize = metrics.iter().map(|m| m.generated_tokens).sum();
        let n = metrics.len().max(1) as f64;
        let per_req = metrics
            .iter()
            .map(|m| m.generated_tokens as f64 / (m.e2e - m.ttft).as_secs_f64().max(1e-9))
            .sum::<f64>()
            / n;
        let ttft_sum: std::time::Duration = metrics.iter().map(|m| m.ttft).sum();
        results.push(ServeResult {
            concurrency: c,
            output_tokens_per_s: total as f64 / wall,
            per_request_tokens_per_s: per_req,
            ttft_mean: ttft_sum / metrics.len().max(1) as u32,
            ttft_max: metrics.iter().map(|m| m.ttft).max().unwrap_or_default(),
        });
        first += c;
    }
    Ok(results)
}
