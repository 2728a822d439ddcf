//! `hearth-engine bench`: prints a llama-bench style table for one model on the CPU backend.

use clap::Args;

use super::sampling::SamplingArgs;
use super::source::ModelArgs;

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Prompt lengths to prefill, comma separated.
    #[arg(long, short = 'p', value_delimiter = ',', default_value = "128,512")]
    prompt: Vec<usize>,
    /// Generation lengths, comma separated.
    #[arg(long, short = 'n', value_delimiter = ',', default_value = "64")]
    gen: Vec<usize>,
    /// Repetitions per test (after one warm-up).
    #[arg(long, short = 'r', default_value_t = 3)]
    reps: usize,
    /// Prompt tokens per forward pass in the ppN tests (llama-bench's -ub).
    #[arg(long, short = 'u', default_value_t = 512)]
    ubatch: usize,
    /// Serving benchmark instead: these numbers of concurrent requests through the engine
    /// (continuous batching), each a --serve-prompt-token prompt generating --serve-gen tokens.
    #[arg(long, value_delimiter = ',')]
    concurrency: Vec<usize>,
    #[arg(long, default_value_t = 128)]
    serve_prompt: usize,
    #[arg(long, default_value_t = 64)]
    serve_gen: usize,
    /// How the serving benchmark's requests sample (greedy by default).
    #[command(flatten)]
    sampling: SamplingArgs,
    /// Print JSON lines instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    if !a.concurrency.is_empty() {
        return serving(a);
    }
    let req = a.model.request()?;
    let loaded = hearth_runtime::load(&req)?;
    let backend = loaded.engine.backend_label();
    let results = loaded.engine.bench(&hearth_runtime::BenchOptions {
        pp: a.prompt.clone(),
        tg: a.gen.clone(),
        reps: a.reps,
        ubatch: a.ubatch,
        kv_dtype: req.kv_dtype,
    })?;
    let name = loaded
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    let name = name.unwrap_or_default();
    if !a.json {
        println!("| model | backend | test | t/s |");
        println!("| --- | --- | ---: | ---: |");
    }
    for r in results {
        if a.json {
            let line = serde_json::json!({
                "model": name, "backend": backend, "test": r.test,
                "tokens_per_s": r.tokens_per_s_mean, "std": r.tokens_per_s_std,
            });
            println!("{line}");
        } else {
            println!(
                "| {name} | {backend} | {} | {:.2} ± {:.2} |",
                r.test, r.tokens_per_s_mean, r.tokens_per_s_std
            );
        }
    }
    Ok(())
}

fn serving(a: BenchArgs) -> anyhow::Result<()> {
    let params = a.sampling.params()?;
    let req = a.model.request()?;
    let loaded = hearth_runtime::load(&req)?;
    let mut cfg = loaded.plan(&req)?;
    cfg.max_num_seqs = cfg
        .max_num_seqs
        .max(a.concurrency.iter().copied().max().unwrap_or(1));
    let vocab = loaded.engine.info().vocab_size;
    let backend = loaded.engine.backend_label();
    let engine =
        hearth_runtime::start(loaded.engine, cfg, loaded.max_model_len, &loaded.tokenizer)?;
    let results = hearth_runtime::bench::run_serving(
        &engine,
        vocab,
        &a.concurrency,
        (a.serve_prompt, a.serve_gen),
        &params,
    )?;
    engine.shutdown();
    println!(
        "| concurrency | output tok/s | per-request tok/s | TTFT mean | TTFT max |  ({}, \
         prompt {}, output {}, temperature {}, top-p {}, top-k {})",
        backend, a.serve_prompt, a.serve_gen, params.temperature, params.top_p, params.top_k
    );
    println!("| ---: | ---: | ---: | ---: | ---: |");
    for r in results {
        println!(
            "| {} | {:.1} | {:.1} | {:.3} s | {:.3} s |",
            r.concurrency,
            r.output_tokens_per_s,
            r.per_request_tokens_per_s,
            r.ttft_mean.as_secs_f64(),
            r.ttft_max.as_secs_f64()
        );
    }
    Ok(())
}
