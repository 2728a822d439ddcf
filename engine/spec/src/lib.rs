//! The Hearth deployment spec: YAML schema, interpolation, validation, model sources.
//!
//! `load` turns a spec file into a `ResolvedSpec` the rest of Hearth trusts:
//! parse YAML -> report unknown keys (raw.rs) -> fill `${VAR:-default}` from the environment,
//! then `.env` (interp.rs, dotenv.rs) -> type every key (validate.rs) -> check combinations
//! (rules.rs). Every problem found on the way is collected into one `SpecError::Invalid`.
//! Loading never touches the model; `fetch::resolve_local` turns a `ModelSource` into a path.

mod choices;
mod coerce;
mod dotenv;
mod error;
pub mod fetch;
mod hf;
mod interp;
mod pip;
mod raw;
mod resolved;
mod rules;
mod source;
mod validate;
mod yaml;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub use choices::{
    Device, Dtype, KvCacheDtype, Quantization, ReasoningParser, RestartPolicy, SpecMethod,
    ToolCallParser,
};
pub use error::{Issue, SpecError};
pub use resolved::{
    ByteSize, DeploySpec, EngineSpec, Gpus, JsonObject, ResolvedSpec, Restart, Secret, ServerSpec,
    SpeculativeConfig,
};
pub use source::{ModelSource, SOURCE_FORMS};

/// Which `.env` file fills `${VAR}`s the environment does not have.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum DotenvFile {
    /// The `.env` next to the spec file, else the one in the current directory, else none.
    #[default]
    Search,
    /// This file (it must exist).
    Path(PathBuf),
    /// No `.env` at all.
    Off,
}

/// How `load_with` fills variables.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Variables that win over `.env`; `None` means the process environment.
    pub env: Option<HashMap<String, String>>,
    pub dotenv: DotenvFile,
}

/// The variables of a `.env` file (docker compose's format). For programs that pass a spec's
/// variables on: the launcher hands them to the engine container, which reads the same spec.
pub fn read_dotenv(path: &Path) -> Result<indexmap::IndexMap<String, String>, SpecError> {
    dotenv::read(path)
}

/// Loads a spec with the process environment and the `.env` found by `DotenvFile::Search`.
pub fn load(path: &Path) -> Result<ResolvedSpec, SpecError> {
    load_with(path, &LoadOptions::default())
}

/// Loads a spec with `env` standing in for the process environment (`.env` is still searched).
pub fn load_with_env(
    path: &Path,
    env: &HashMap<String, String>,
) -> Result<ResolvedSpec, SpecError> {
    let opts = LoadOptions {
        env: Some(env.clone()),
        dotenv: DotenvFile::Search,
    };
    load_with(path, &opts)
}

pub fn load_with(path: &Path, opts: &LoadOptions) -> Result<ResolvedSpec, SpecError> {
    let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    load_str(&text, path, opts)
}

/// Loads spec text (an embedded default, say); `file` names it in messages and anchors the
/// `.env` search.
pub fn load_str(text: &str, file: &Path, opts: &LoadOptions) -> Result<ResolvedSpec, SpecError> {
    let process_env;
    let env = match &opts.env {
        Some(env) => env,
        None => {
            process_env = std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect();
            &process_env
        }
    };
    let dotenv_path = match &opts.dotenv {
        DotenvFile::Search => dotenv::find(file),
        DotenvFile::Path(p) => Some(p.clone()),
        DotenvFile::Off => None,
    };
    let dotenv_vars = match &dotenv_path {
        Some(p) => dotenv::read(p)?,
        None => Default::default(),
    };
    let vars = interp::Vars::new(env, dotenv_vars, dotenv_path.clone());

    let yaml_err = |source| SpecError::Yaml {
        path: file.to_path_buf(),
        source,
    };
    let mut doc: serde_yaml::Value = serde_yaml::from_str(text).map_err(yaml_err)?;
    doc.apply_merge().map_err(yaml_err)?;

    let mut issues = error::Issues::default();
    raw::check_keys(&mut doc, "", &mut issues);
    interp::expand_tree(&mut doc, "", &vars, &mut issues);
    let raw = raw::deserialize(doc, &mut issues);
    let origin = validate::Origin {
        file: file.to_path_buf(),
        dotenv: dotenv_path,
        cache_dir: fetch::cache_dir_with(|k| vars.get(k).map(str::to_owned)),
    };
    let spec = validate::resolve(raw, origin, &mut issues);
    rules::check(&spec, &mut issues);
    if issues.is_empty() {
        Ok(spec)
    } else {
        Err(SpecError::Invalid {
            file: file.to_path_buf(),
            issues: issues.into_vec(),
        })
    }
}

#[cfg(test)]
mod tests;
