//! `hearth-engine bench`: prints a llama-bench style table for one model on the CPU backend.

use clap::Args;

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
    /// Print JSON lines instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    let loaded = hearth_runtime::load(&a.model.request()?)?;
    let backend = &loaded.backend;
    let results =
        hearth_runtime::bench::run(backend, loaded.model.as_ref(), &a.prompt, &a.gen, a.reps)?;
    let name = loaded
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    let name = name.unwrap_or_default();
    if !a.json {
        println!("| model | backend | threads | test | t/s |");
        println!("| --- | --- | ---: | ---: | ---: |");
    }
    for r in results {
        if a.json {
            let line = serde_json::json!({
                "model": name, "backend": "cpu", "threads": backend.threads(), "test": r.test,
                "tokens_per_s": r.tokens_per_s_mean, "std": r.tokens_per_s_std,
            });
            println!("{line}");
        } else {
            println!(
                "| {name} | cpu | {} | {} | {:.2} ± {:.2} |",
                backend.threads(),
                r.test,
                r.tokens_per_s_mean,
                r.tokens_per_s_std
            );
        }
    }
    Ok(())
}
