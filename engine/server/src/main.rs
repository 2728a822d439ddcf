//! `hearth-engine`: the engine binary. Subcommands: `check-spec`, `generate`, `bench` (and
//! `serve` once the HTTP API lands).

mod cli;

use clap::Parser;

fn main() -> std::process::ExitCode {
    cli::init_tracing();
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
