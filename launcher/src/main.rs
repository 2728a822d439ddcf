//! `hearth`: the Hearth CLI. `up` (what `./launch` runs) boots a spec in Docker: spec and
//! `.env`, preflight, image, container, readiness, smoke test, READY. `down`, `status`, `logs`,
//! `chat` (what `./chat` runs), `build` and `compose` manage and use what `up` made; `bench`
//! and `eval` measure and check any OpenAI-compatible server (client/ is what they share).
//!
//! It talks to Docker through its API (bollard) and to the engine over HTTP; it shares the
//! spec and wire types with the engine but never links the engine itself.

mod banner;
mod bench;
mod build;
mod chat;
mod client;
mod compose;
mod compose_sidecars;
mod container;
mod docker;
mod down;
mod duration;
mod env;
mod eval;
mod fit;
mod image;
mod labels;
mod load;
mod logs;
mod monitor;
mod mounts;
mod phase;
mod plan;
mod preflight;
mod problem;
mod ready;
mod repo;
mod smoke;
mod status;
mod up;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::problem::Problems;

#[derive(Debug, Parser)]
#[command(
    name = "hearth",
    version,
    about = "Boot and manage Hearth deployments in Docker"
)]
struct Cli {
    /// The Hearth repository (images/, specs/, target/). Default: the nearest parent of the
    /// current directory holding images/cpu.Dockerfile, else the one this binary was built in.
    #[arg(long, global = true, env = "HEARTH_REPO")]
    repo: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Boot a spec: preflight, image, container, readiness, smoke test, READY (= ./launch).
    Up(up::UpArgs),
    /// Stop and remove a deployment's container (and with --images its images).
    Down(down::DownArgs),
    /// The deployments Hearth runs on this Docker host.
    Status(status::StatusArgs),
    /// A deployment's engine log.
    Logs(logs::LogsArgs),
    /// Chat with a running deployment, streamed (= ./chat).
    Chat(chat::ChatArgs),
    /// Load-test a server: concurrency sweep, depth, prefix cache; JSON, markdown, plot.
    Bench(bench::BenchArgs),
    /// Check a server's answers: core battery, needle in a haystack, long-document turns.
    Eval(eval::EvalArgs),
    /// Fetch a spec's model and build its image without running anything (what compose needs).
    Build(build::BuildArgs),
    /// Print (or write) the compose file that runs a spec with `docker compose up`.
    Compose(compose::ComposeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let repo = cli.repo;
    let result = rt.block_on(async move {
        match cli.command {
            Command::Up(a) => up::run(repo, a).await,
            Command::Down(a) => down::run(repo, a).await,
            Command::Status(a) => status::run(repo, a).await,
            Command::Logs(a) => logs::run(repo, a).await,
            Command::Chat(a) => chat::run(repo, a).await,
            Command::Bench(a) => bench::run(repo, a).await,
            Command::Eval(a) => eval::run(repo, a).await,
            Command::Build(a) => build::run(repo, a).await,
            Command::Compose(a) => compose::run(repo, a),
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => match e.downcast_ref::<Problems>() {
            // Spec and preflight problems: nothing was created; exit 2 like a usage error.
            Some(problems) => {
                eprintln!("{problems}");
                ExitCode::from(2)
            }
            None => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}
