//! The weight ring (HEARTH_RING_DECODE=1, `engine/kernels/cu/ring.cu`) runs a one-row decode's
//! GEMVs, norms, RoPE + cache write and attention as one persistent launch a token; it must give
//! the same bits as the kernels it replaces, which also serve that sequence inside a batch
//! (batch invariance). On the tiny dense fixtures (Llama, Qwen2 with qkv bias, Qwen3 with q/k
//! norm) and on two layers of Qwen3-8B's shape in random weights (a 4096-wide norm over a block
//! of 1024 threads, the down projection's 24 KB rows cut in pieces of the ring's slots, several
//! rows a slot, 300 positions so attention runs in up to three splits and merges them), every
//! decode position's logits through the batch-1 graph, and a greedy continuation, with the ring
//! and without, in one process. Needs the `cuda` feature and HEARTH_TEST_CUDA=1 on a GPU of compute
//! capability 9.0 or later (the ring needs it; the test fails where it cannot run).

#![cfg(feature = "cuda")]
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use hearth_backend::CudaBackend;
use hearth_runtime::{Generator, SamplingParams};

const PROMPT: [u32; 12] = [1, 17, 42, 5, 99, 3, 64, 7, 11, 128, 31, 2];

/// Two layers of Qwen3-8B (hidden 4096, 32 query and 8 KV heads of 128, intermediate 12288)
/// with a small vocabulary, as a random-weight model directory.
fn qwen3_8b_layers() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hearth-ring-q8b-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = serde_json::json!({
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "num_hidden_layers": 2,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": false,
        "vocab_size": 2048
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    std::fs::write(dir.join(hearth_models::random_weights::MARKER), "").unwrap();
    dir
}

/// The prompt for a model: PROMPT, or 300 tokens of the 2048 of the Qwen3-8B-shaped layers
/// (past 256 keys the attention takes three splits).
fn prompt(arch: &str) -> Vec<u32> {
    if arch != "qwen3-8b-layers" {
        return PROMPT.to_vec();
    }
    (0..300u32).map(|i| (i * 7919 + 13) % 2048).collect()
}

/// Decode logits of every position of the prompt, 12 greedy tokens after it, and the ring's
/// (launches, batch-1 graph captures) (None without the ring).
fn run(arch: &str, ring: bool) -> (Vec<f32>, Vec<u32>, Option<(usize, usize)>) {
    // The ring is chosen when the backend loads its kernels. This file holds one test, so
    // nothing else reads the environment meanwhile. The ring runs the RMS norms the kernels
    // fold into the GEMVs after them as norms (a backend with the ring folds none), so the
    // kernels it is held to here fold none either.
    std::env::set_var("HEARTH_NORM_FOLD", "0");
    if ring {
        std::env::set_var("HEARTH_RING_DECODE", "1");
    } else {
        std::env::remove_var("HEARTH_RING_DECODE");
    }
    let backend = CudaBackend::new(0).unwrap();
    let dir = match arch {
        "qwen3-8b-layers" => qwen3_8b_layers(),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/tiny")
            .join(arch),
    };
    let src = hearth_models::open(&dir).unwrap();
    let model = hearth_models::load_model(&backend, src.as_ref()).unwrap();
    let prompt = prompt(arch);
    let logits = Generator::new(&backend, model.as_ref(), 512)
        .unwrap()
        .decode_logits(&prompt);
    let mut tokens = Vec::new();
    Generator::new(&backend, model.as_ref(), 512)
        .unwrap()
        .generate(&prompt, 12, &SamplingParams::default(), &[], |t| {
            tokens.push(t);
            true
        })
        .unwrap();
    let launches = backend.decode_ring_launches();
    assert_eq!(
        launches.is_some(),
        ring,
        "{arch}: the ring is on when asked (sm_90+)"
    );
    assert!(
        launches.map_or(1, |l| l.0) > 0,
        "{arch}: the ring was never launched"
    );
    (logits, tokens, launches)
}

#[test]
fn ring_decode_matches_the_gemv_kernels_bit_for_bit() {
    if std::env::var("HEARTH_TEST_CUDA").as_deref() != Ok("1") {
        println!("CUDA run skipped (set HEARTH_TEST_CUDA=1 on a GPU machine)");
        return;
    }
    for arch in ["llama", "qwen2", "qwen3", "qwen3-8b-layers"] {
        let (want, want_tokens, _) = run(arch, false);
        let (got, got_tokens, launches) = run(arch, true);
        assert_eq!(got.len(), want.len());
        let differ = got
            .iter()
            .zip(&want)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        let max = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        println!(
            "{arch}: {} decode logits, {differ} differ (max {max:.2e}); greedy {:?}; ring \
             (launches, captures) {launches:?}",
            got.len(),
            got_tokens
        );
        assert_eq!(differ, 0, "{arch}: the ring changed {differ} logits");
        assert_eq!(got_tokens, want_tokens, "{arch}: greedy tokens");
        if arch == "qwen3-8b-layers" {
            // Everything between the embedding and argmax, attention included, in one launch.
            let (l, c) = launches.unwrap();
            assert_eq!(l, c, "{arch}: one ring launch a token");
        }
    }
    std::env::remove_var("HEARTH_RING_DECODE");
}
