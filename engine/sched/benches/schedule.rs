//! Scheduler overhead per step (schedule + update), no model: 256 running sequences decoding,
//! 512-token prompts, block_size 16, prefix caching on. A sequence that reaches 1024 tokens
//! finishes and is replaced by a new one (a prefix-cache hit plus a short prefill), so the batch
//! stays at 256 and block tables stay realistic.

use criterion::{criterion_group, criterion_main, Criterion};
use hearth_sched::{NewSeq, Scheduler, SchedulerConfig, SeqId};

const SEQS: u64 = 256;
const PROMPT: usize = 512;
const MAX_LEN: usize = 1024;

fn new_seq(id: SeqId) -> NewSeq {
    // 8 distinct prompts: some sharing, like a system prompt per tenant.
    let base = (id % 8) as u32 * 1000;
    NewSeq {
        id,
        prompt: (0..PROMPT as u32).map(|t| base + t).collect(),
        max_tokens: MAX_LEN,
        cache_salt: None,
    }
}

fn bench(c: &mut Criterion) {
    let mut s = Scheduler::new(SchedulerConfig {
        block_size: 16,
        num_blocks: SEQS as usize * MAX_LEN / 16 + 64,
        max_num_seqs: SEQS as usize,
        max_num_batched_tokens: 8192,
        max_model_len: 4096,
        enable_prefix_caching: true,
        enable_chunked_prefill: true,
    });
    let mut next_id = 0;
    for _ in 0..SEQS {
        s.add(new_seq(next_id)).expect("valid prompt");
        next_id += 1;
    }
    // Warm up into steady decode, staggering lengths so finishes spread out.
    let mut sampled = Vec::with_capacity(SEQS as usize);
    let mut finished = Vec::new();
    let mut step = |s: &mut Scheduler, next_id: &mut SeqId| {
        let out = s.schedule();
        sampled.clear();
        finished.clear();
        for x in &out.seqs {
            if x.sample {
                sampled.push((x.id, (x.start as u32) % 50_000));
                if x.start + x.tokens.len() + 1 >= MAX_LEN + (x.id as usize % 256) {
                    finished.push(x.id);
                }
            }
        }
        s.update(&out, &sampled, &finished);
        for _ in 0..finished.len() {
            s.add(new_seq(*next_id)).expect("valid prompt");
            *next_id += 1;
        }
        out.num_tokens
    };
    for _ in 0..2000 {
        step(&mut s, &mut next_id);
    }
    assert_eq!(
        s.stats().running,
        SEQS as usize,
        "steady state keeps the batch full"
    );
    c.bench_function("schedule+update, 256 decoding seqs", |b| {
        b.iter(|| std::hint::black_box(step(&mut s, &mut next_id)));
    });
    let st = s.stats();
    println!("after bench: {st:?}");
}

criterion_group!(benches, bench);
criterion_main!(benches);
