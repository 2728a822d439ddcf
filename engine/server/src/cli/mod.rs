//! Command-line parsing and dispatch for `hearth-engine`.

mod bench;
mod check_logits;
mod check_spec;
mod generate;
mod health;
mod perplexity;
mod sampling;
mod serve;
mod source;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "hearth-engine", version, about = "Hearth's inference engine")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the fully resolved spec, or every error in it.
    CheckSpec(check_spec::CheckSpecArgs),
    /// Serve the OpenAI and Anthropic HTTP APIs for a spec.
    Serve(serve::ServeArgs),
    /// Generate an answer to one prompt, streamed to the terminal.
    Generate(generate::GenerateArgs),
    /// Prompt-processing and generation speed (llama-bench style ppN / tgN).
    Bench(bench::BenchArgs),
    /// Compare this engine's logits and greedy tokens with a reference (HF transformers' JSON).
    CheckLogits(check_logits::CheckLogitsArgs),
    /// A text's perplexity under the model (llama-perplexity style: chunks of --ctx tokens).
    Perplexity(perplexity::PerplexityArgs),
    /// Exit 0 when the engine serving a spec on this host is healthy (the images' HEALTHCHECK).
    Health(health::HealthArgs),
}

pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HEARTH_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .init();
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::CheckSpec(a) => check_spec::run(a),
        Command::Generate(a) => generate::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Bench(a) => bench::run(a),
        Command::CheckLogits(a) => check_logits::run(a),
        Command::Perplexity(a) => perplexity::run(a),
        Command::Health(a) => health::run(a),
    }
}
