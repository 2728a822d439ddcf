//! Property tests: random interleavings of add / step (schedule + update with random sampled
//! tokens and finishes) / abort on small pools that force preemption and eviction. After every
//! operation the scheduler's invariants hold; every step respects both budgets, covers its
//! tokens with blocks and never lets two sequences share a block that is being written; and once
//! everything ends every block is free again.

use std::collections::HashMap;

use hearth_sched::{NewSeq, SchedError, Scheduler, SchedulerConfig, SchedulerOutput, SeqId};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Add {
        prefix: usize,
        prefix_len: usize,
        suffix: Vec<u32>,
        salt: Option<u8>,
        max_tokens: usize,
    },
    Step {
        tokens: Vec<u32>,
        finish: Vec<bool>,
    },
    Abort(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3usize, 0..14usize, prop::collection::vec(0..6u32, 0..8), prop::option::of(0..2u8), 1..8usize)
            .prop_map(|(prefix, prefix_len, suffix, salt, max_tokens)| Op::Add { prefix, prefix_len, suffix, salt, max_tokens }),
        5 => (prop::collection::vec(0..4u32, 8), prop::collection::vec(prop::bool::weighted(0.1), 8))
            .prop_map(|(tokens, finish)| Op::Step { tokens, finish }),
        1 => (0..8usize).prop_map(Op::Abort),
    ]
}

fn config() -> impl Strategy<Value = SchedulerConfig> {
    (
        prop::sample::select(vec![1usize, 2, 4]),
        3..16usize,
        1..5usize,
        1..24usize,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(block_size, num_blocks, max_num_seqs, budget, prefix, chunked)| SchedulerConfig {
                block_size,
                num_blocks,
                max_num_seqs,
                max_num_batched_tokens: budget,
                max_model_len: 40,
                enable_prefix_caching: prefix,
                enable_chunked_prefill: chunked,
            },
        )
}

/// The test's model of the runtime: what each live sequence's tokens are and when it stops.
struct Harness {
    s: Scheduler,
    cfg: SchedulerConfig,
    tokens: HashMap<SeqId, Vec<u32>>,
    max_new: HashMap<SeqId, usize>,
    prompt_len: HashMap<SeqId, usize>,
    next_id: SeqId,
}

impl Harness {
    fn live(&self) -> Vec<SeqId> {
        let mut v: Vec<_> = self.tokens.keys().copied().collect();
        v.sort_unstable();
        v
    }

    fn add(&mut self, prompt: Vec<u32>, salt: Option<u8>, max_tokens: usize) {
        let id = self.next_id;
        self.next_id += 1;
        let waiting = self.s.stats().waiting;
        let res = self.s.add(NewSeq {
            id,
            prompt: prompt.clone(),
            max_tokens,
            cache_salt: salt.map(|s| format!("salt{s}")),
        });
        match res {
            Ok(()) => {
                self.prompt_len.insert(id, prompt.len());
                self.tokens.insert(id, prompt);
                self.max_new.insert(id, max_tokens);
            }
            Err(e) => {
                assert_eq!(self.s.stats().waiting, waiting, "nothing queued on error");
                let bs = self.cfg.block_size;
                match e {
                    SchedError::EmptyPrompt => assert!(prompt.is_empty()),
                    SchedError::PromptTooLong { prompt: p, .. } => {
                        assert!(p > self.cfg.max_model_len)
                    }
                    SchedError::PromptTooLargeForCache { needed, available } => {
                        assert!(needed > available && needed == prompt.len().div_ceil(bs));
                    }
                    SchedError::PromptExceedsBatchBudget { .. } => {
                        assert!(!self.cfg.enable_chunked_prefill);
                        assert!(prompt.len() > self.cfg.max_num_batched_tokens);
                    }
                    SchedError::DuplicateId(_) => panic!("ids are unique"),
                }
            }
        }
    }

    fn check_step(&self, out: &SchedulerOutput) {
        let cfg = &self.cfg;
        assert!(out.num_tokens <= cfg.max_num_batched_tokens, "token budget");
        assert!(out.seqs.len() <= cfg.max_num_seqs, "sequence budget");
        assert_eq!(
            out.num_tokens,
            out.seqs.iter().map(|x| x.tokens.len()).sum::<usize>()
        );
        let pool = self.s.kv_cache().pool();
        let mut written: HashMap<u32, SeqId> = HashMap::new();
        for x in &out.seqs {
            assert!(!x.tokens.is_empty());
            let end = x.start + x.tokens.len();
            assert!(
                x.block_table.len() * cfg.block_size >= end,
                "table covers start+len"
            );
            let known = &self.tokens[&x.id];
            assert_eq!(
                x.tokens,
                known[x.start..end],
                "scheduled the sequence's own tokens"
            );
            assert_eq!(x.sample, end == known.len());
            assert_eq!(Some(x.block_table.as_slice()), self.s.block_table(x.id));
            for &b in &x.block_table[x.start / cfg.block_size..=(end - 1) / cfg.block_size] {
                assert_eq!(
                    pool.ref_count(b),
                    1,
                    "block {b} written by {} is shared",
                    x.id
                );
                assert_eq!(
                    pool.hash_of(b),
                    None,
                    "block {b} written by {} is hashed",
                    x.id
                );
                assert!(
                    written.insert(b, x.id).is_none(),
                    "two writers of block {b}"
                );
            }
        }
        for id in self.live() {
            for &b in self.s.block_table(id).unwrap_or(&[]) {
                if let Some(&w) = written.get(&b) {
                    assert_eq!(w, id, "block {b} written by {w} is in {id}'s table");
                }
            }
        }
        for p in &out.preempted {
            assert!(
                out.seqs.iter().all(|x| x.id != *p),
                "preempted and scheduled"
            );
            assert_eq!(self.s.block_table(*p), None, "preempted seq keeps blocks");
        }
    }

    fn step(&mut self, tokens: &[u32], finish: &[bool]) {
        let out = self.s.schedule();
        self.check_step(&out);
        let cap = self
            .cfg
            .max_model_len
            .min(self.cfg.num_blocks * self.cfg.block_size);
        let mut sampled = Vec::new();
        let mut finished = Vec::new();
        for (i, x) in out.seqs.iter().enumerate() {
            let forced = finish[i % finish.len()];
            if x.sample {
                let t = tokens[i % tokens.len()];
                sampled.push((x.id, t));
                let toks = self.tokens.get_mut(&x.id).expect("scheduled seqs are live");
                toks.push(t);
                let generated = toks.len() - self.prompt_len[&x.id];
                // What the runtime does: stop at max_tokens or when the context is full.
                if forced || generated >= self.max_new[&x.id] || toks.len() >= cap {
                    finished.push(x.id);
                }
            } else if forced {
                finished.push(x.id);
            }
        }
        self.s.update(&out, &sampled, &finished);
        for id in finished {
            self.forget(id);
        }
    }

    fn forget(&mut self, id: SeqId) {
        self.tokens.remove(&id);
        self.max_new.remove(&id);
        self.prompt_len.remove(&id);
    }

    fn check(&self) {
        if let Err(e) = self.s.check_invariants() {
            panic!("invariant broken: {e}");
        }
        for id in self.live() {
            assert_eq!(self.s.num_tokens(id), Some(self.tokens[&id].len()));
        }
        let st = self.s.stats();
        assert_eq!(st.running + st.waiting, self.tokens.len());
        assert!(st.prefix_hit_tokens <= st.prefix_query_tokens);
    }
}

const PREFIXES: [[u32; 14]; 3] = [
    [1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2],
    [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3],
    [5, 4, 3, 2, 1, 0, 5, 4, 3, 2, 1, 0, 5, 4],
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn random_interleavings_keep_every_invariant(cfg in config(), ops in prop::collection::vec(op(), 1..80)) {
        let mut h = Harness {
            s: Scheduler::new(cfg.clone()),
            cfg,
            tokens: HashMap::new(),
            max_new: HashMap::new(),
            prompt_len: HashMap::new(),
            next_id: 0,
        };
        for op in ops {
            match op {
                Op::Add { prefix, prefix_len, suffix, salt, max_tokens } => {
                    let mut p = PREFIXES[prefix][..prefix_len].to_vec();
                    p.extend(suffix);
                    h.add(p, salt, max_tokens);
                }
                Op::Step { tokens, finish } => h.step(&tokens, &finish),
                Op::Abort(i) => {
                    let live = h.live();
                    if live.is_empty() {
                        prop_assert!(!h.s.abort(1_000_000));
                    } else {
                        let id = live[i % live.len()];
                        prop_assert!(h.s.abort(id));
                        h.forget(id);
                    }
                }
            }
            h.check();
        }
        // Drain: with the runtime's stop conditions everything finishes (no livelock).
        let mut steps = 0;
        while h.s.has_work() {
            h.step(&[3, 1, 2], &[false]);
            h.check();
            steps += 1;
            prop_assert!(steps < 2000, "no progress: {:?}", h.s.stats());
        }
        let st = h.s.stats();
        prop_assert_eq!((st.used_blocks, st.running, st.waiting), (0, 0, 0));
        prop_assert_eq!(h.s.kv_cache().pool().free_queue().len(), h.cfg.num_blocks);
    }
}
