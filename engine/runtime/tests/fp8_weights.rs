//! `quantization: fp8`: the dense tiny checkpoints (tests/fixtures/tiny) loaded with their linear
//! layers quantized to fp8 e4m3 with a scale a row. On the CPU (which computes on the
//! dequantized values in f32) their logits stay within FP8_TOLERANCE of transformers' unquantized
//! ones (relative to the largest logit), and move (the weights really are quantized); on CUDA (fp8 GEMVs, and past their rows the
//! fp8 matmuls) they match the CPU's fp8 logits within bf16's
//! tolerance, for prefill and decode. MoE and MLA architectures are refused with an error that
//! names what is supported.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use hearth_backend::{Backend, CpuBackend};
use hearth_models::{CausalLm, LoadOptions};
use hearth_runtime::Generator;
use serde::Deserialize;

/// Max |logit diff| against transformers' unquantized logits, as a fraction of the largest
/// |logit|: 3 mantissa bits move each weight by up to 1/16 (~3.6% rms), and these tiny models'
/// narrow rows (64-128 wide) average little of it out (observed 9.4-10.8%; a wrong scale or
/// rounding would be off by far more).
const FP8_TOLERANCE: f32 = 0.15;

#[derive(Deserialize)]
struct Reference {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    prompt: Vec<u32>,
    logits: Vec<Vec<f32>>,
}

fn fixture(arch: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/tiny")
        .join(arch)
}

fn reference(arch: &str) -> Reference {
    serde_json::from_str(&std::fs::read_to_string(fixture(arch).join("reference.json")).unwrap())
        .unwrap()
}

fn load_fp8<B: Backend + 'static>(backend: &B, arch: &str) -> Box<dyn CausalLm<B>> {
    let src = hearth_models::open(&fixture(arch)).unwrap();
    hearth_models::load_model_with(backend, src.as_ref(), LoadOptions { fp8: true }).unwrap()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "logit count");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Prefill logits of every position, then decode logits of every position, of each case.
fn logits<B: Backend + 'static>(backend: &B, model: &dyn CausalLm<B>, arch: &str) -> Vec<f32> {
    let mut out = Vec::new();
    for case in reference(arch).cases {
        let mut gen = Generator::new(backend, model, 128).unwrap();
        out.extend(gen.prefill_logits(&case.prompt));
        let mut gen = Generator::new(backend, model, 128).unwrap();
        out.extend(gen.decode_logits(&case.prompt));
    }
    out
}

fn transformers_logits(arch: &str) -> Vec<f32> {
    reference(arch)
        .cases
        .iter()
        .flat_map(|c| {
            let row: Vec<f32> = c.logits.iter().flatten().copied().collect();
            [row.clone(), row].concat()
        })
        .collect()
}

#[test]
fn fp8_dense_models_stay_near_transformers_on_cpu() {
    let cpu = CpuBackend::new(2).unwrap();
    for arch in ["llama", "qwen2", "qwen3"] {
        let got = logits(&cpu, load_fp8(&cpu, arch).as_ref(), arch);
        let want = transformers_logits(arch);
        let top = want.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = max_diff(&got, &want) / top;
        println!(
            "{arch} fp8 on cpu: max |logit diff| vs transformers (unquantized) {:.1}% of the \
             largest logit",
            100.0 * d
        );
        assert!(
            d <= FP8_TOLERANCE,
            "{arch}: fp8 logits off by {d} of the largest"
        );
        assert!(
            d > 1e-3,
            "{arch}: fp8 logits equal the unquantized ones ({d})"
        );
    }
}

#[test]
fn fp8_is_refused_for_moe_and_mla() {
    let cpu = CpuBackend::new(2).unwrap();
    for arch in ["qwen3_moe", "glm4_moe_lite"] {
        let src = hearth_models::open(&fixture(arch)).unwrap();
        let err = hearth_models::load_model_with(&cpu, src.as_ref(), LoadOptions { fp8: true })
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("fp8") && err.contains("Qwen3ForCausalLM"),
            "{arch}: {err}"
        );
    }
}

#[cfg(feature = "cuda")]
#[test]
fn fp8_on_cuda_matches_fp8_on_cpu() {
    if std::env::var("HEARTH_TEST_CUDA").as_deref() != Ok("1") {
        println!("fp8 CUDA run skipped (set HEARTH_TEST_CUDA=1 on a GPU machine)");
        return;
    }
    let cpu = CpuBackend::new(2).unwrap();
    let gpu = hearth_backend::CudaBackend::new(0).unwrap();
    for arch in ["llama", "qwen2", "qwen3"] {
        let want = logits(&cpu, load_fp8(&cpu, arch).as_ref(), arch);
        let got = logits(&gpu, load_fp8(&gpu, arch).as_ref(), arch);
        let d = max_diff(&got, &want);
        println!("{arch} fp8: cuda vs cpu max |logit diff| {d:.3e}");
        assert!(d <= 5e-2, "{arch}: fp8 on cuda off the cpu by {d}");
    }
}
