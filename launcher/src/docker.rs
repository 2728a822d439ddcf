//! Connecting to the Docker daemon: `DOCKER_HOST` or the local socket, API version negotiated
//! down to what the daemon speaks (Docker 20.10 speaks 1.41), and a ping, so an unreachable
//! daemon is one clear problem instead of an error on the first real call.

use bollard::Docker;

use crate::problem::Problem;

/// A connected, version-negotiated client.
pub async fn connect() -> Result<Docker, Problem> {
    let host =
        std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into());
    let unreachable = |e: bollard::errors::Error| {
        Problem::new(
            format!("Docker is not reachable at {host}: {e}"),
            "start the Docker daemon (`sudo systemctl start docker`), make sure your user may use \
             it (`sudo usermod -aG docker $USER`, then log in again), or set DOCKER_HOST",
        )
    };
    let docker = Docker::connect_with_local_defaults().map_err(unreachable)?;
    let docker = docker.negotiate_version().await.map_err(unreachable)?;
    docker.ping().await.map_err(unreachable)?;
    Ok(docker)
}

/// Whether a bollard error is Docker's 404 (no such container / image).
pub fn is_not_found(e: &bollard::errors::Error) -> bool {
    matches!(
        e,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}
