//! `hearth-engine health --spec FILE`: exit 0 when the engine serving that spec on this host
//! answers `GET /health` with 200, else 1. It is the container images' HEALTHCHECK: the CPU
//! image is `FROM scratch` and the CUDA runtime image has no curl, so the engine probes itself.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;

#[derive(Debug, Args)]
pub struct HealthArgs {
    /// The spec the engine serves; its server.port is probed.
    #[arg(long)]
    spec: Option<PathBuf>,
    /// Probe this port instead.
    #[arg(long)]
    port: Option<u16>,
}

const TIMEOUT: Duration = Duration::from_secs(4);

pub fn run(a: HealthArgs) -> anyhow::Result<()> {
    let port = match (a.port, &a.spec) {
        (Some(p), _) => p,
        (None, Some(spec)) => hearth_spec::load(spec)?.server.port,
        (None, None) => bail!("say which engine to probe: --spec FILE or --port PORT"),
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut conn = TcpStream::connect_timeout(&addr, TIMEOUT)
        .with_context(|| format!("connecting to {addr}"))?;
    conn.set_read_timeout(Some(TIMEOUT))?;
    conn.set_write_timeout(Some(TIMEOUT))?;
    write!(
        conn,
        "GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = String::new();
    conn.read_to_string(&mut answer)
        .with_context(|| format!("reading the answer from {addr}"))?;
    let status = answer.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) == Some("200") {
        println!("healthy: {status}");
        Ok(())
    } else {
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
        bail!("unhealthy: {status} {}", body.trim())
    }
}
