//! Test support shared by the integration tests.
//!
//! `vocab_from_gguf` is written to move as-is into hearth-models (which owns GGUF reading) for
//! production use; hearth-text itself never depends on hearth-models.

#![allow(dead_code)]

use std::path::PathBuf;

use hearth_models::gguf::{GgufFile, GgufValue};
use hearth_text::GgufVocab;

/// The `tokenizer.*` metadata of a GGUF file, with llama.cpp's defaults for absent flags.
pub fn vocab_from_gguf(f: &GgufFile) -> GgufVocab {
    let model = f
        .get_str("tokenizer.ggml.model")
        .unwrap_or_default()
        .to_owned();
    let pre = f.get_str("tokenizer.ggml.pre").map(str::to_owned);
    let id = |key: &str| f.get_u64(key).and_then(|v| u32::try_from(v).ok());
    let flag = |key: &str| f.get(key).and_then(GgufValue::as_bool);
    GgufVocab {
        tokens: f.string_array("tokenizer.ggml.tokens").unwrap_or_default(),
        scores: f.f32_array("tokenizer.ggml.scores"),
        token_types: f
            .i64_array("tokenizer.ggml.token_type")
            .map(|v| v.into_iter().map(|t| t as i32).collect()),
        merges: f.string_array("tokenizer.ggml.merges"),
        bos_id: id("tokenizer.ggml.bos_token_id"),
        eos_id: id("tokenizer.ggml.eos_token_id"),
        eot_id: id("tokenizer.ggml.eot_token_id"),
        eom_id: id("tokenizer.ggml.eom_token_id"),
        unk_id: id("tokenizer.ggml.unknown_token_id"),
        pad_id: id("tokenizer.ggml.padding_token_id"),
        add_bos: flag("tokenizer.ggml.add_bos_token")
            .unwrap_or_else(|| GgufVocab::default_add_bos(&model, pre.as_deref())),
        add_eos: flag("tokenizer.ggml.add_eos_token").unwrap_or(false),
        add_space_prefix: flag("tokenizer.ggml.add_space_prefix"),
        chat_template: f.get_str("tokenizer.chat_template").map(str::to_owned),
        model,
        pre,
    }
}

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
