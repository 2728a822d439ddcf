//! Command-line parsing and dispatch for `hearth-engine`.

mod bench;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "hearth-engine", version, about = "Hearth's inference engine")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Prompt-processing and generation speed (llama-bench style ppN / tgN).
    Bench(bench::BenchArgs),
}

pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HEARTH_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Bench(a) => bench::run(a),
    }
}
