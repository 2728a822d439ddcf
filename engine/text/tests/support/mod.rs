//! Test support shared by the integration tests.
//!
//! hearth-text itself never depends on hearth-models or hearth-runtime; its tests use them to
//! read GGUF vocabularies the way the engine does.

#![allow(dead_code)]

use std::path::PathBuf;

/// The production mapping of GGUF metadata to a vocabulary (hearth-runtime owns it, since it
/// joins hearth-models' GGUF reader and this crate).
#[allow(unused_imports)] // not every test binary that includes this module reads GGUF files
pub use hearth_runtime::vocab_from_gguf;

/// /work/shared (real tokenizer files): $HEARTH_SHARED, else ../shared beside the workspace root.
pub fn shared_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HEARTH_SHARED") {
        return PathBuf::from(dir);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared")
}

/// llama.cpp's vocab-only GGUFs with golden tokenizations: $HEARTH_LCP_MODELS, else the
/// extracted llama-cpp-python 0.3.36 sdist under ~/.cache/hearth/dl.
pub fn lcp_models_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HEARTH_LCP_MODELS") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    home.join(".cache/hearth/dl/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp/models")
}

/// Fixture data that is not in the repository: fail under CI, skip loudly elsewhere.
/// Returns false when the caller should return early.
pub fn require_fixture(path: &std::path::Path, what: &str) -> bool {
    if path.exists() {
        return true;
    }
    let msg = format!("{what} not found at {}", path.display());
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        panic!("{msg} (required when CI=true)");
    }
    eprintln!("\n!!!!!!!! SKIPPING: {msg} !!!!!!!!\n");
    false
}
