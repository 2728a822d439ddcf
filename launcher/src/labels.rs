//! The Docker labels on Hearth's containers and images. `down`, `status`, `logs`, `chat` and the
//! monitor (issue 7) find deployments by them, so they are a contract: add, never rename.

/// On every container and image Hearth makes: "true".
pub const MANAGED: &str = "hearth.managed";
/// The spec's `name:`; one container per name.
pub const SPEC: &str = "hearth.spec";
/// `ResolvedSpec::spec_hash()`: same hash, same deployment.
pub const SPEC_HASH: &str = "hearth.spec-hash";
/// `Plan::config_hash()`: everything else the container was created with (env, mounts, ports).
pub const CONFIG_HASH: &str = "hearth.config-hash";
/// The absolute path of the spec file the container runs.
pub const SPEC_FILE: &str = "hearth.spec-file";
/// The workspace version of the engine in the image.
pub const ENGINE_VERSION: &str = "hearth.engine-version";
/// The spec's `served_model_name`.
pub const SERVED_MODEL: &str = "hearth.served-model";
/// Where clients reach the API from this host: `http://127.0.0.1:8000`.
pub const ENDPOINT: &str = "hearth.endpoint";
/// The spec's `deploy.image` (the content-tagged image the container runs is also tagged so).
pub const IMAGE_NAME: &str = "hearth.image";
/// On images: the content hash of the build inputs (Dockerfile and context).
pub const INPUTS_HASH: &str = "hearth.inputs-hash";

/// The label filter (`key=value`) for one spec's container.
pub fn spec_filter(name: &str) -> String {
    format!("{SPEC}={name}")
}
