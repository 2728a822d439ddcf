//! The dense architectures against HF transformers: tiny random-weight Llama (llama3 rope
//! scaling, untied head), Qwen2 (qkv bias, tied) and Qwen3 (q/k norm, bf16 weights) checkpoints
//! and their reference logits, written by tests/fixtures/make_tiny.py.
//!
//! Tolerance: max |logit diff| <= 1e-4. Both sides compute in f32 on identical weights; only the
//! summation order differs (observed ~1e-5), so anything near 1e-3 would mean a real bug.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use hearth_backend::CpuBackend;
use hearth_runtime::{Generator, SamplingParams};
use serde::Deserialize;

const TOLERANCE: f32 = 1e-4;

#[derive(Deserialize)]
struct Reference {
    architecture: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    prompt: Vec<u32>,
    logits: Vec<Vec<f32>>,
    greedy: Vec<u32>,
}

fn fixture(arch: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/tiny")
        .join(arch)
}

fn max_diff(got: &[f32], want: &[Vec<f32>]) -> f32 {
    let want: Vec<f32> = want.iter().flatten().copied().collect();
    assert_eq!(got.len(), want.len(), "logit count");
    got.iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max)
}

fn check(arch: &str) {
    let dir = fixture(arch);
    let reference: Reference =
        serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap())
            .unwrap();
    let backend = CpuBackend::new(2).unwrap();
    let src = hearth_models::open(&dir).unwrap();
    assert_eq!(src.config().architecture(), reference.architecture);
    let model = hearth_models::load_model(&backend, src.as_ref()).unwrap();
    for case in &reference.cases {
        let mut gen = Generator::new(&backend, model.as_ref(), 128).unwrap();
        let prefill = max_diff(&gen.prefill_logits(&case.prompt), &case.logits);
        let mut gen = Generator::new(&backend, model.as_ref(), 128).unwrap();
        let decode = max_diff(&gen.decode_logits(&case.prompt), &case.logits);
        println!(
            "{arch} prompt len {}: max |diff| prefill {prefill:.2e} decode {decode:.2e}",
            case.prompt.len()
        );
        assert!(
            prefill <= TOLERANCE && decode <= TOLERANCE,
            "{arch}: {prefill} / {decode}"
        );

        // Chunked prefill: later chunks attend to the cached prefix through the block table.
        for chunk in [3, 8] {
            let mut gen = Generator::new(&backend, model.as_ref(), 128)
                .unwrap()
                .with_prefill_chunk(chunk);
            let last = gen.prefill(&case.prompt).unwrap();
            let d = max_diff(&last, &case.logits[case.logits.len() - 1..]);
            assert!(
                d <= TOLERANCE,
                "{arch}: chunked prefill ({chunk}) differs by {d}"
            );
        }

        let mut gen = Generator::new(&backend, model.as_ref(), 128).unwrap();
        let mut out = Vec::new();
        gen.generate(
            &case.prompt,
            case.greedy.len(),
            &SamplingParams::default(),
            &[],
            |t| {
                out.push(t);
                true
            },
        )
        .unwrap();
        assert_eq!(
            out, case.greedy,
            "{arch}: greedy continuation of {:?}",
            case.prompt
        );
    }
}

#[test]
fn llama_matches_transformers() {
    check("llama");
}

#[test]
fn qwen2_matches_transformers() {
    check("qwen2");
}

#[test]
fn qwen3_matches_transformers() {
    check("qwen3");
}
