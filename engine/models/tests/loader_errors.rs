//! Broken checkpoints give errors that name the file and the tensor or field, never a panic.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use hearth_backend::CpuBackend;
use hearth_models::LoadError;

fn tiny_llama() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/tiny/llama")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn load(path: &Path) -> Result<(), LoadError> {
    let backend = CpuBackend::new(1).unwrap();
    let src = hearth_models::open(path)?;
    hearth_models::load_model(&backend, src.as_ref()).map(|_| ())
}

#[test]
fn truncated_safetensors_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&tiny_llama(), dir.path());
    let st = dir.path().join("model.safetensors");
    let len = std::fs::metadata(&st).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&st).unwrap();
    f.set_len(len / 2).unwrap();
    let msg = load(dir.path()).unwrap_err().to_string();
    assert!(
        msg.contains("model.safetensors") && msg.contains("truncated"),
        "{msg}"
    );
}

#[test]
fn missing_config_field_is_named() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&tiny_llama(), dir.path());
    let cfg = dir.path().join("config.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("hidden_size");
    std::fs::write(&cfg, v.to_string()).unwrap();
    let msg = load(dir.path()).unwrap_err().to_string();
    assert!(
        msg.contains("config.json") && msg.contains("hidden_size"),
        "{msg}"
    );
}

#[test]
fn shape_mismatch_names_the_tensor_and_both_shapes() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&tiny_llama(), dir.path());
    let cfg = dir.path().join("config.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg).unwrap()).unwrap();
    v["intermediate_size"] = 128.into();
    std::fs::write(&cfg, v.to_string()).unwrap();
    let msg = load(dir.path()).unwrap_err().to_string();
    assert!(
        msg.contains("mlp.gate_proj.weight")
            && msg.contains("[160, 64]")
            && msg.contains("[128, 64]"),
        "{msg}"
    );
}

#[test]
fn unsupported_architecture_lists_the_supported_ones() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&tiny_llama(), dir.path());
    let cfg = dir.path().join("config.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg).unwrap()).unwrap();
    v["architectures"] = serde_json::json!(["MixtralForCausalLM"]);
    std::fs::write(&cfg, v.to_string()).unwrap();
    let msg = load(dir.path()).unwrap_err().to_string();
    assert!(
        msg.contains("MixtralForCausalLM") && msg.contains("Qwen3ForCausalLM"),
        "{msg}"
    );
}

#[test]
fn quantized_checkpoints_we_cannot_run_say_so() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&tiny_llama(), dir.path());
    let cfg = dir.path().join("config.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg).unwrap()).unwrap();
    v["quantization_config"] = serde_json::json!({"quant_method": "modelopt"});
    std::fs::write(&cfg, v.to_string()).unwrap();
    let msg = load(dir.path()).unwrap_err().to_string();
    assert!(
        msg.contains("modelopt") && msg.contains("supported"),
        "{msg}"
    );
}

/// A minimal GGUF v3: one u32 metadata key and one F32 tensor of `n` values.
fn write_gguf(path: &Path, ggml_type: u32, n: u64, data: &[u8]) {
    let mut b = Vec::new();
    b.extend_from_slice(b"GGUF");
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&1u64.to_le_bytes()); // tensors
    b.extend_from_slice(&1u64.to_le_bytes()); // kv
    let key = b"general.architecture";
    b.extend_from_slice(&(key.len() as u64).to_le_bytes());
    b.extend_from_slice(key);
    b.extend_from_slice(&8u32.to_le_bytes()); // string
    b.extend_from_slice(&5u64.to_le_bytes());
    b.extend_from_slice(b"llama");
    let name = b"token_embd.weight";
    b.extend_from_slice(&(name.len() as u64).to_le_bytes());
    b.extend_from_slice(name);
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&n.to_le_bytes());
    b.extend_from_slice(&ggml_type.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    while b.len() % 32 != 0 {
        b.push(0);
    }
    b.extend_from_slice(data);
    std::fs::write(path, b).unwrap();
}

#[test]
fn gguf_reader_reads_metadata_and_tensors() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ok.gguf");
    write_gguf(&p, 0, 4, &[0u8; 16]);
    let f = hearth_models::gguf::GgufFile::open(&p).unwrap();
    assert_eq!(f.get_str("general.architecture"), Some("llama"));
    assert_eq!(f.tensor("token_embd.weight").unwrap().shape(), vec![4]);
}

#[test]
fn truncated_gguf_names_file_and_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cut.gguf");
    write_gguf(&p, 0, 1000, &[0u8; 16]);
    let msg = hearth_models::gguf::GgufFile::open(&p)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("cut.gguf") && msg.contains("token_embd.weight") && msg.contains("truncated"),
        "{msg}"
    );
}

#[test]
fn unknown_ggml_type_lists_the_supported_ones() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("iq.gguf");
    write_gguf(&p, 23, 256, &[0u8; 256]);
    let msg = hearth_models::gguf::GgufFile::open(&p)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("ggml type 23") && msg.contains("Q4_K"),
        "{msg}"
    );
}

#[test]
fn not_a_gguf_is_said_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.gguf");
    std::fs::write(&p, b"PK\x03\x04 definitely a zip").unwrap();
    let msg = hearth_models::gguf::GgufFile::open(&p)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("not a GGUF file"), "{msg}");
}
