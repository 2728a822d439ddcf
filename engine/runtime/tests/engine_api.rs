//! The EngineHandle contract on the tiny random Llama: seeded sampling, n > 1, logprobs,
//! aborts freeing blocks, refusals carrying their numbers, clean shutdown.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use hearth_backend::CpuBackend;
use hearth_runtime::{
    EngineConfig, EngineHandle, EngineOutput, EngineParts, FinishReason, SubmitError, ValidRequest,
};

fn engine(num_blocks: usize) -> EngineHandle {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/tiny/llama");
    let backend = CpuBackend::new(2).unwrap();
    let src = hearth_models::open(&dir).unwrap();
    let model = hearth_models::load_model(&backend, src.as_ref()).unwrap();
    let parts = EngineParts {
        backend,
        model,
        max_model_len: 64,
        eos_ids: vec![7],
    };
    let cfg = EngineConfig {
        max_num_seqs: 8,
        max_num_batched_tokens: 256,
        block_size: 4,
        num_blocks,
        enable_prefix_caching: true,
        enable_chunked_prefill: true,
        kv_dtype: Default::default(),
        run_ahead: true,
    };
    EngineHandle::start(parts, cfg).unwrap()
}

fn collect(engine: &EngineHandle, req: ValidRequest) -> Vec<EngineOutput> {
    let mut s = engine.submit(req).unwrap();
    std::iter::from_fn(|| s.blocking_next()).collect()
}

fn sampled(seed: u64) -> ValidRequest {
    let mut r = ValidRequest::new(vec![1, 2, 3, 4, 5], 12);
    r.params.temperature = 1.0;
    r.params.seed = Some(seed);
    r.params.ignore_eos = true;
    r
}

#[test]
fn seeded_sampling_is_reproducible_and_seed_dependent() {
    let e = engine(64);
    let toks = |seed| {
        collect(&e, sampled(seed))
            .iter()
            .map(|o| o.token)
            .collect::<Vec<_>>()
    };
    assert_eq!(toks(11), toks(11));
    assert_ne!(toks(11), toks(12));
    e.shutdown();
}

#[test]
fn n_samples_arrive_with_their_index_and_each_finishes() {
    let e = engine(64);
    let mut r = sampled(5);
    r.n = 3;
    let outs = collect(&e, r);
    for i in 0..3 {
        let mine: Vec<_> = outs.iter().filter(|o| o.index == i).collect();
        assert_eq!(mine.len(), 12, "sample {i}");
        assert_eq!(mine.last().unwrap().finish, Some(FinishReason::Length));
        assert_eq!(mine.last().unwrap().metrics.unwrap().generated_tokens, 12);
    }
    e.shutdown();
}

#[test]
fn logprobs_come_with_each_token_and_greedy_takes_the_top_one() {
    let e = engine(64);
    let mut r = ValidRequest::new(vec![9, 8, 7, 6], 5);
    r.params.logprobs = Some(3);
    r.params.ignore_eos = true;
    for o in collect(&e, r) {
        let lp = o.logprobs.unwrap();
        assert_eq!(lp.top.len(), 3);
        assert_eq!(lp.top[0].token, o.token);
        assert_eq!(lp.sampled.logprob, lp.top[0].logprob);
        assert!(lp.top.windows(2).all(|w| w[0].logprob >= w[1].logprob));
        let total: f32 = lp.top.iter().map(|t| t.logprob.exp()).sum();
        assert!(lp.sampled.logprob <= 0.0 && total <= 1.0 + 1e-5);
    }
    e.shutdown();
}

#[test]
fn stop_tokens_min_tokens_and_max_tokens() {
    let e = engine(64);
    // eos id 7 is the model's end token here; min_tokens keeps it away for 6 tokens.
    let mut r = ValidRequest::new(vec![1, 2, 3], 20);
    r.params.min_tokens = 6;
    let outs = collect(&e, r);
    assert!(outs.len() >= 6);
    assert!(outs[..5].iter().all(|o| o.token != 7));
    let last = outs.last().unwrap();
    assert!(last.finish == Some(FinishReason::Length) || last.token == 7);
    e.shutdown();
}

/// Blocks completed by generated tokens are cached under those tokens, also when the engine
/// planned the step ahead with a placeholder in their place: a prompt that continues a greedy
/// output finds them, and its own output is what an engine without the cache gives.
#[test]
fn generated_blocks_are_cached_under_their_real_tokens() {
    let greedy = |e: &EngineHandle, prompt: Vec<u32>, n: usize| {
        let mut r = ValidRequest::new(prompt, n);
        r.params.ignore_eos = true;
        let outs = collect(e, r);
        let cached = outs.last().unwrap().metrics.unwrap().cached_tokens;
        (outs.iter().map(|o| o.token).collect::<Vec<u32>>(), cached)
    };
    let e = engine(64);
    let (first, _) = greedy(&e, vec![3, 1, 4, 1, 5], 20);
    // 5 prompt + 15 generated = 20 tokens, 5 blocks of 4, 4 of them completed by generation.
    let mut next = vec![3, 1, 4, 1, 5];
    next.extend_from_slice(&first[..15]);
    let (with_cache, cached) = greedy(&e, next.clone(), 8);
    assert!(cached >= 16, "{cached} tokens found cached, 16 expected");
    e.shutdown();
    let fresh = engine(64);
    assert_eq!(greedy(&fresh, next, 8).0, with_cache);
    fresh.shutdown();
}

#[test]
fn dropping_the_stream_aborts_and_frees_blocks() {
    let e = engine(64);
    let mut r = ValidRequest::new((0..30).collect(), 30);
    r.params.ignore_eos = true;
    let mut s = e.submit(r).unwrap();
    s.blocking_next().unwrap();
    drop(s);
    let t = Instant::now();
    loop {
        let st = e.stats().unwrap();
        if st.sched.running == 0 && st.sched.used_blocks == 0 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "blocks not freed: {:?}",
            st.sched
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    e.shutdown();
}

#[test]
fn refusals_carry_their_numbers() {
    let e = engine(64);
    let err = e.submit(ValidRequest::new(vec![1; 65], 4)).err().unwrap();
    let msg = err.to_string();
    assert!(msg.contains("65") && msg.contains("64"), "{msg}");
    let mut r = ValidRequest::new(vec![1], 4);
    r.n = 0;
    assert!(matches!(e.submit(r), Err(SubmitError::BadN(0))));
    e.shutdown();
    assert!(matches!(
        e.submit(ValidRequest::new(vec![1], 1)),
        Err(SubmitError::Closed)
    ));
}

#[test]
fn parallel_samples_share_the_prompt_blocks() {
    let e = engine(128);
    // 40 tokens = 10 full blocks of 4; each later sample finds them cached (the last block is
    // recomputed so that a cached block is never written).
    let mut r = ValidRequest::new((10..50).collect(), 6);
    r.n = 4;
    r.params.temperature = 1.0;
    r.params.seed = Some(3);
    r.params.ignore_eos = true;
    let outs = collect(&e, r);
    assert_eq!(outs.len(), 4 * 6);
    for i in 0..4 {
        let last = outs.iter().rfind(|o| o.index == i).unwrap();
        let m = last.metrics.unwrap();
        assert_eq!(m.generated_tokens, 6);
        if i > 0 {
            assert_eq!(m.cached_tokens, 36, "sample {i}");
        }
    }
    let stats = e.stats().unwrap();
    assert!(stats.sched.prefix_hit_tokens >= 3 * 36, "{:?}", stats.sched);
    e.shutdown();
}
