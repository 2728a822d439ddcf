//! `hearth up [SPEC]` (what `./launch` runs): spec and `.env` -> preflight -> image (built or
//! reused) -> container (created, reused or replaced) -> readiness -> smoke test -> READY ->
//! the monitor sidecar started in the background (unless --no-monitor).
//! Exits 0 with the container running; 2 on spec or preflight problems (nothing created);
//! 1 when the deployment itself fails (build error, engine exit, readiness timeout, smoke test).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use clap::Args;

use crate::banner::Banner;
use crate::container::{self, Action, Existing};
use crate::image::{self, ImagePlan, Outcome};
use crate::plan::Plan;
use crate::ready::{self, NotReady};
use crate::{duration, env, load, monitor, mounts, preflight, repo, smoke};

#[derive(Debug, Args)]
pub struct UpArgs {
    /// Deployment spec (default: specs/default.yaml).
    pub spec: Option<PathBuf>,
    /// Print what would be built and created, then stop (the model is still fetched: what
    /// gets mounted depends on it).
    #[arg(long)]
    pub dry_run: bool,
    /// How long to wait for the engine to be ready: 90s, 20m, 1h.
    #[arg(long, default_value = "20m", value_parser = duration::parse)]
    pub timeout: Duration,
    /// Do not start the monitor sidecar (logs/serve.log, logs/peak.json, hang watchdog).
    #[arg(long)]
    pub no_monitor: bool,
    /// Where the monitor writes serve.log and peak.json (default: logs/ in the repository).
    #[arg(long, env = "HEARTH_LOGS")]
    pub logs: Option<PathBuf>,
}

pub async fn run(repo: Option<PathBuf>, a: UpArgs) -> anyhow::Result<ExitCode> {
    let t0 = Instant::now();
    let repo = repo::find(repo.as_deref())?;
    let spec_path = repo::spec_path(&repo, a.spec.as_deref());
    let spec = load::spec(&spec_path)?;
    eprintln!(
        "spec {} ({}), hash {}",
        spec.name,
        spec_path.display(),
        &spec.spec_hash()[..12]
    );
    let recipe = image::recipe(&spec, repo::engine_binary(&repo));
    let checked = preflight::run(&spec, &recipe, preflight::Purpose::Up).await?;
    let spec_text = std::fs::read_to_string(&spec.file)
        .with_context(|| format!("reading {}", spec.file.display()))?;
    let vars = env::values(&spec_text, spec.dotenv.as_deref())?;
    let placement = mounts::place(&spec, &checked.model, checked.tokenizer.as_ref())
        .map_err(anyhow::Error::msg)?;
    let image = ImagePlan::new(&repo, &spec, recipe)?;
    let plan = Plan::new(spec, image, placement, vars.into_iter().collect());
    let docker = &checked.docker;
    let existing = checked.existing.as_ref().map(Existing::from_inspect);
    let action = container::decide(existing.as_ref(), &plan);

    if a.dry_run {
        print!("{}", plan.describe());
        let image_there = docker.inspect_image(&plan.image.tag).await.is_ok();
        println!(
            "would    {} image {}",
            if image_there { "reuse" } else { "build" },
            plan.image.tag
        );
        println!("would    {}", describe_action(&action, &plan.container));
        if !a.no_monitor {
            let root = monitor::logs_root(a.logs.as_deref(), Some(&repo));
            let dir = monitor::dir_for(&root, &plan.spec.name);
            println!("would    start the monitor into {}", dir.display());
        }
        return Ok(ExitCode::SUCCESS);
    }

    match image::ensure(docker, &plan.image).await? {
        Outcome::Reused => eprintln!("image {} reused (inputs unchanged)", plan.image.tag),
        Outcome::Built => eprintln!("image {} built", plan.image.tag),
    }
    eprintln!("{}", describe_action(&action, &plan.container));
    let since = unix_now() - 1;
    match &action {
        Action::Create => {
            container::create(docker, &plan).await?;
            container::start(docker, &plan.container).await?;
        }
        Action::Replace(_) => {
            container::remove(docker, &plan.container).await?;
            container::create(docker, &plan).await?;
            container::start(docker, &plan.container).await?;
        }
        Action::ReuseStopped => container::start(docker, &plan.container).await?,
        Action::ReuseRunning => {}
    }

    let url = plan.endpoint.url();
    let already_ready = action == Action::ReuseRunning && is_ready(&url).await;
    let (startup, engine_time) = if already_ready {
        (ready::startup_of(docker, &plan.container).await, None)
    } else {
        eprintln!(
            "waiting for {url}/ready (timeout {})",
            duration::show(a.timeout)
        );
        match ready::wait(docker, &plan.container, &url, a.timeout, since).await? {
            Ok(r) => (r.startup, Some(r.took)),
            Err(not_ready) => return Ok(failed(&plan, not_ready)),
        }
    };

    let smoke = smoke::run(&url, &plan.spec).await.with_context(|| {
        format!(
            "the engine is up but failed its smoke test; the container {} is left running for \
             `hearth logs`",
            plan.container
        )
    })?;
    let banner = Banner {
        spec: &plan.spec,
        url: &url,
        container: &plan.container,
        image: &plan.image.tag,
        startup: &startup,
        smoke: &smoke,
        total: t0.elapsed(),
        engine: engine_time,
    };
    print!("{}", banner.render());
    if !a.no_monitor {
        start_monitor(&repo, a.logs.as_deref(), &plan.spec.name);
    }
    Ok(ExitCode::SUCCESS)
}

/// Starts the monitor in the background; a monitor that cannot start is a warning, not a
/// failed deployment (the engine is up and serving).
fn start_monitor(repo: &Path, logs: Option<&Path>, spec: &str) {
    let root = monitor::logs_root(logs, Some(repo));
    match monitor::start(&monitor::binary(repo), &root, spec) {
        Ok(monitor::Started::New { pid, dir }) => println!(
            "monitor    {}/serve.log, peak.json (pid {pid}; `hearth down` stops it)",
            dir.display()
        ),
        Ok(monitor::Started::AlreadyRunning { pid, dir }) => {
            println!(
                "monitor    {}/serve.log, peak.json (pid {pid}, already running)",
                dir.display()
            )
        }
        Err(e) => eprintln!("warning: the monitor was not started: {e:#}"),
    }
}

fn describe_action(action: &Action, name: &str) -> String {
    match action {
        Action::Create => format!("container {name}: creating"),
        Action::ReuseRunning => format!("container {name}: reused (same spec and image, running)"),
        Action::ReuseStopped => {
            format!("container {name}: reused (same spec and image), starting it")
        }
        Action::Replace(why) => format!("container {name}: replacing ({why})"),
    }
}

async fn is_ready(url: &str) -> bool {
    let client = reqwest::Client::new();
    let resp = client
        .get(format!("{url}/ready"))
        .timeout(Duration::from_secs(2))
        .send()
        .await;
    resp.is_ok_and(|r| r.status().is_success())
}

/// Reports why the engine did not come up. A container that exited was stopped for good by the
/// wait; one that timed out is left running, since it may still be making progress.
fn failed(plan: &Plan, why: NotReady) -> ExitCode {
    eprint!("\nFAILED {}: {why}", plan.spec.name);
    let file = plan.spec.file.display();
    if let NotReady::Exited { .. } = why {
        eprintln!(
            "container {} is stopped and kept for `hearth logs {file}`; `hearth down {file}` \
             removes it",
            plan.container
        );
    } else {
        eprintln!(
            "container {} is still running; `hearth logs -f {file}` follows it, `hearth down \
             {file}` stops it",
            plan.container
        );
    }
    ExitCode::FAILURE
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}
