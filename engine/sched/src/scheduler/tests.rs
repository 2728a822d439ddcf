//! Unit tests of the scheduler's policy: prefix hits, eviction order, salts, preemption,
//! chunking, budgets, errors and aborts.

use super::*;

fn cfg(block_size: usize, num_blocks: usize) -> SchedulerConfig {
    SchedulerConfig {
        block_size,
        num_blocks,
        max_num_seqs: 64,
        max_num_batched_tokens: 1024,
        max_model_len: 4096,
        enable_prefix_caching: true,
        enable_chunked_prefill: true,
    }
}

fn seq(id: SeqId, prompt: impl IntoIterator<Item = u32>) -> NewSeq {
    NewSeq {
        id,
        prompt: prompt.into_iter().collect(),
        max_tokens: 16,
        cache_salt: None,
    }
}

fn salted(id: SeqId, prompt: impl IntoIterator<Item = u32>, salt: &str) -> NewSeq {
    NewSeq {
        cache_salt: Some(salt.into()),
        ..seq(id, prompt)
    }
}

/// One step: every seq that samples gets token 7; `finished` end.
fn step(s: &mut Scheduler, finished: &[SeqId]) -> SchedulerOutput {
    let out = s.schedule();
    let sampled: Vec<_> = out
        .seqs
        .iter()
        .filter(|x| x.sample)
        .map(|x| (x.id, 7))
        .collect();
    s.update(&out, &sampled, finished);
    s.check_invariants().unwrap();
    out
}

fn only(out: &SchedulerOutput, id: SeqId) -> &ScheduledSeq {
    out.seqs.iter().find(|x| x.id == id).unwrap()
}

#[test]
fn prefix_hits_equal_the_shared_full_blocks() {
    let mut s = Scheduler::new(cfg(4, 16));
    s.add(seq(1, 0..10)).unwrap(); // 2 full blocks + 2 tokens
    let a = step(&mut s, &[]);
    assert_eq!(only(&a, 1).tokens.len(), 10);
    // Shares blocks 0 and 1 with seq 1, then diverges inside block 2.
    s.add(seq(2, (0..8).chain([100, 101, 102]))).unwrap();
    let out = step(&mut s, &[]);
    let b = only(&out, 2);
    assert_eq!((b.start, b.tokens.as_slice()), (8, &[100, 101, 102][..]));
    let a_table = s.block_table(1).unwrap();
    assert_eq!(
        b.block_table[..2],
        a_table[..2],
        "the two full blocks are shared"
    );
    assert_ne!(b.block_table[2], a_table[2], "the partial block is private");
    let st = s.stats();
    assert_eq!(st.prefix_hit_tokens, 2 * 4);
    assert_eq!(st.prefix_query_tokens, 10 + 11);
}

#[test]
fn fully_cached_prompt_recomputes_only_its_last_block() {
    // block_size 1: exactly one token.
    let mut s = Scheduler::new(cfg(1, 32));
    s.add(seq(1, 0..5)).unwrap();
    step(&mut s, &[1]);
    s.add(seq(2, 0..5)).unwrap();
    let out = step(&mut s, &[]);
    let b = only(&out, 2);
    assert_eq!(
        (b.start, b.tokens.as_slice(), b.sample),
        (4, &[4][..], true)
    );
    assert_eq!(s.stats().prefix_hit_tokens, 4);

    // block_size 4, aligned prompt: the last block is recomputed into a fresh block, because
    // writing the last token into the cached (shared) block would make two writers.
    let mut s = Scheduler::new(cfg(4, 32));
    s.add(seq(1, 0..8)).unwrap();
    step(&mut s, &[]);
    s.add(seq(2, 0..8)).unwrap();
    let out = step(&mut s, &[]);
    let b = only(&out, 2);
    assert_eq!((b.start, b.tokens.len()), (4, 4));
    let a_table = s.block_table(1).unwrap();
    assert_eq!(b.block_table[0], a_table[0]);
    assert_ne!(b.block_table[1], a_table[1]);
}

#[test]
fn eviction_takes_the_least_recently_freed_blocks() {
    let mut s = Scheduler::new(cfg(4, 6));
    for id in 1..=3 {
        s.add(seq(id, (0..5).map(|t| t + 10 * id as u32))).unwrap(); // 1 full + 1 partial block
    }
    step(&mut s, &[]);
    let tables: Vec<Vec<u32>> = (1..=3)
        .map(|id| s.block_table(id).unwrap().to_vec())
        .collect();
    s.abort(1);
    s.abort(3);
    s.abort(2);
    assert_eq!(
        s.stats().used_blocks,
        0,
        "cached-but-free blocks count as free"
    );
    // A new prompt takes the two blocks freed first: seq 1's (last block first).
    s.add(seq(4, 900..905)).unwrap();
    let out = step(&mut s, &[]);
    assert_eq!(only(&out, 4).block_table, [tables[0][1], tables[0][0]]);
    // Seq 2's cached block survived, seq 1's did not.
    s.add(seq(5, (0..5).map(|t| t + 20))).unwrap();
    s.add(seq(6, (0..5).map(|t| t + 10))).unwrap();
    let out = step(&mut s, &[]);
    assert_eq!(only(&out, 5).start, 4);
    assert_eq!(only(&out, 5).block_table[0], tables[1][0]);
    assert_eq!(only(&out, 6).start, 0);
}

#[test]
fn cache_salt_separates_identical_prompts() {
    let mut s = Scheduler::new(cfg(4, 32));
    s.add(salted(1, 0..9, "tenant-a")).unwrap();
    step(&mut s, &[]);
    s.add(salted(2, 0..9, "tenant-b")).unwrap();
    s.add(seq(3, 0..9)).unwrap();
    s.add(salted(4, 0..9, "tenant-a")).unwrap();
    let out = step(&mut s, &[]);
    assert_eq!(only(&out, 2).start, 0);
    assert_eq!(only(&out, 3).start, 0);
    assert_eq!(only(&out, 4).start, 8);
}

#[test]
fn preemption_requeues_the_newest_running_seq_at_the_front() {
    let mut c = cfg(2, 4);
    c.enable_prefix_caching = false;
    let mut s = Scheduler::new(c);
    s.add(seq(1, 0..4)).unwrap();
    s.add(seq(2, 10..14)).unwrap();
    step(&mut s, &[]); // both prefill, 2 blocks each: pool full
    s.add(seq(3, 20..22)).unwrap();
    assert_eq!(s.stats().used_blocks, 4);
    // Both now hold 5 tokens and need a third block: seq 2 (newest) is preempted for seq 1.
    let out = step(&mut s, &[]);
    assert_eq!(out.preempted, [2]);
    assert_eq!(out.seqs.len(), 1);
    assert_eq!((out.seqs[0].id, out.seqs[0].start), (1, 4));
    assert_eq!(
        s.waiting().collect::<Vec<_>>(),
        [2, 3],
        "in front of older arrivals"
    );
    let p = s.sequence(2).unwrap();
    assert_eq!(
        (p.num_computed(), p.num_tokens(), p.status()),
        (0, 5, SeqStatus::Waiting)
    );
    assert_eq!(s.stats().preemptions, 1);
    // It comes back by recomputing prompt and generated token.
    step(&mut s, &[1]);
    let out = step(&mut s, &[]);
    let back = only(&out, 2);
    assert_eq!(
        (back.start, back.tokens.as_slice()),
        (0, &[10, 11, 12, 13, 7][..])
    );
}

#[test]
fn a_seq_that_is_itself_the_newest_preempts_itself() {
    let mut c = cfg(2, 3);
    c.enable_prefix_caching = false;
    let mut s = Scheduler::new(c);
    s.add(seq(1, 0..2)).unwrap();
    s.add(seq(2, 10..14)).unwrap();
    step(&mut s, &[]); // 1 + 2 blocks
    let out = step(&mut s, &[]); // seq 1 needs a 2nd block: seq 2 goes; seq 2 is not rescheduled
    assert_eq!((out.seqs.len(), out.preempted.as_slice()), (1, &[2][..]));
    s.abort(1);
    s.add(seq(3, 20..22)).unwrap();
    step(&mut s, &[]); // 2 (3 blocks for 5 tokens) fills the pool; 3 waits
    assert_eq!(s.running(), [2]);
    let out = step(&mut s, &[]); // 2 decodes within its third block
    assert!(out.preempted.is_empty());
}

#[test]
fn chunked_prefill_splits_a_long_prompt_within_the_budget() {
    let mut c = cfg(4, 32);
    c.max_num_batched_tokens = 4;
    let mut s = Scheduler::new(c);
    s.add(seq(1, 0..10)).unwrap();
    let chunks: Vec<(usize, usize, bool)> = (0..3)
        .map(|_| {
            let o = step(&mut s, &[]);
            assert!(o.num_tokens <= 4);
            (o.seqs[0].start, o.seqs[0].tokens.len(), o.seqs[0].sample)
        })
        .collect();
    assert_eq!(chunks, [(0, 4, false), (4, 4, false), (8, 2, true)]);
    assert_eq!(s.num_tokens(1), Some(11));
}

#[test]
fn without_chunked_prefill_a_prompt_waits_and_the_queue_stops() {
    let mut c = cfg(4, 32);
    c.max_num_batched_tokens = 8;
    c.enable_chunked_prefill = false;
    let mut s = Scheduler::new(c);
    assert!(matches!(
        s.add(seq(9, 0..9)),
        Err(SchedError::PromptExceedsBatchBudget {
            prompt: 9,
            max_num_batched_tokens: 8
        })
    ));
    s.add(seq(1, 0..5)).unwrap();
    s.add(seq(2, 10..15)).unwrap();
    s.add(seq(3, 20..22)).unwrap();
    let out = step(&mut s, &[]);
    assert_eq!(
        out.seqs.iter().map(|x| x.id).collect::<Vec<_>>(),
        [1],
        "3 does not jump the queue"
    );
    let out = step(&mut s, &[]);
    assert_eq!(out.seqs.iter().map(|x| x.id).collect::<Vec<_>>(), [1, 2, 3]);
}

#[test]
fn max_num_seqs_and_token_budget_are_respected() {
    let mut c = cfg(4, 64);
    c.max_num_seqs = 3;
    c.max_num_batched_tokens = 10;
    let mut s = Scheduler::new(c);
    for id in 0..5 {
        let len = if id == 4 { 8 } else { 3 };
        s.add(seq(id, (0..len).map(|t| t + 10 * id as u32)))
            .unwrap();
    }
    let out = step(&mut s, &[]);
    assert_eq!(out.seqs.len(), 3);
    assert_eq!(out.num_tokens, 9);
    let out = step(&mut s, &[]); // 3 decodes fill the seq budget
    assert_eq!(out.seqs.iter().map(|x| x.id).collect::<Vec<_>>(), [0, 1, 2]);
    let out = step(&mut s, &[0, 1]);
    assert_eq!(out.seqs.len(), 3);
    let out = step(&mut s, &[]);
    assert_eq!(
        out.seqs.iter().map(|x| x.id).collect::<Vec<_>>(),
        [2, 3, 4],
        "running first"
    );
    assert_eq!(
        only(&out, 4).tokens.len(),
        6,
        "seq 4 gets a chunk of what is left"
    );
    assert_eq!(out.num_tokens, 10);
}

#[test]
fn add_errors_carry_their_numbers_and_queue_nothing() {
    let mut c = cfg(4, 2);
    c.max_model_len = 10;
    let mut s = Scheduler::new(c);
    let e = s.add(seq(1, 0..11)).unwrap_err();
    assert!(matches!(
        e,
        SchedError::PromptTooLong {
            prompt: 11,
            max_model_len: 10
        }
    ));
    assert_eq!(
        e.to_string(),
        "the prompt has 11 tokens but max_model_len is 10"
    );
    let e = s.add(seq(1, 0..9)).unwrap_err();
    assert!(matches!(
        e,
        SchedError::PromptTooLargeForCache {
            needed: 3,
            available: 2
        }
    ));
    assert!(matches!(s.add(seq(1, [])), Err(SchedError::EmptyPrompt)));
    s.add(seq(1, 0..3)).unwrap();
    assert!(matches!(
        s.add(seq(1, 0..3)),
        Err(SchedError::DuplicateId(1))
    ));
    assert_eq!(s.stats().waiting, 1);
}

#[test]
fn abort_frees_everything() {
    let mut s = Scheduler::new(cfg(4, 8));
    s.add(seq(1, 0..9)).unwrap();
    s.add(seq(2, 0..9)).unwrap();
    step(&mut s, &[]);
    s.add(seq(3, 0..30)).unwrap(); // waits: needs 8 blocks
    step(&mut s, &[]);
    assert!(s.stats().used_blocks > 0);
    assert_eq!((s.stats().running, s.stats().waiting), (2, 1));
    assert!(s.abort(2));
    assert!(s.abort(3));
    assert!(s.abort(1));
    assert!(!s.abort(1), "unknown now");
    s.check_invariants().unwrap();
    let st = s.stats();
    assert_eq!((st.used_blocks, st.running, st.waiting), (0, 0, 0));
    assert!(!s.has_work());
    assert!(s.schedule().is_empty());
}

#[test]
fn shared_blocks_are_full_and_hashed_and_never_written() {
    let mut s = Scheduler::new(cfg(4, 32));
    s.add(seq(1, 0..9)).unwrap();
    step(&mut s, &[]);
    s.add(seq(2, (0..8).chain([50]))).unwrap();
    for _ in 0..6 {
        let out = step(&mut s, &[]);
        for x in &out.seqs {
            let first = x.start / 4;
            let last = (x.start + x.tokens.len() - 1) / 4;
            for &b in &x.block_table[first..=last] {
                let pool = s.kv_cache().pool();
                assert!(
                    pool.ref_count(b) == 1,
                    "seq {} writes shared block {b}",
                    x.id
                );
            }
        }
    }
    let (a, b) = (s.block_table(1).unwrap(), s.block_table(2).unwrap());
    assert_eq!(a[..2], b[..2]);
    assert!(a[..2]
        .iter()
        .all(|&x| s.kv_cache().pool().ref_count(x) == 2));
}
