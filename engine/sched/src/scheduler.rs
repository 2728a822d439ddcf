//! The continuous-batching scheduler: each step spends a token budget and a sequence budget on
//! running sequences (decode or next prefill chunk) and then on waiting ones (FIFO), preempting
//! the newest running sequence when KV blocks run out.
//!
//! Follows vLLM v1: a step is `{sequence: tokens to compute}`, so prefill, chunked prefill,
//! decode and prefix hits are one concept. It plans and books; it never runs a model. Block
//! accounting is in `kv_cache.rs`.

use std::collections::VecDeque;

use crate::hash::IntMap;
use crate::kv_cache::KvCacheManager;
use crate::output::{SchedStats, ScheduledSeq, SchedulerOutput};
use crate::request::{NewSeq, SeqStatus, Sequence};
use crate::{SchedError, SeqId};

#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// Tokens per KV block.
    pub block_size: usize,
    /// Physical blocks in the pool.
    pub num_blocks: usize,
    /// Sequence budget per step.
    pub max_num_seqs: usize,
    /// Token budget per step.
    pub max_num_batched_tokens: usize,
    pub max_model_len: usize,
    pub enable_prefix_caching: bool,
    /// When false a prompt that does not fit the budget waits.
    pub enable_chunked_prefill: bool,
}

pub struct Scheduler {
    cfg: SchedulerConfig,
    kv: KvCacheManager,
    seqs: IntMap<SeqId, Sequence>,
    /// Admission order; the last is the first preempted.
    running: Vec<SeqId>,
    /// Arrival order, preempted sequences at the front.
    waiting: VecDeque<SeqId>,
    prefix_query_tokens: u64,
    prefix_hit_tokens: u64,
    preemptions: u64,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("cfg", &self.cfg)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Scheduler {
    /// # Panics
    /// If `block_size`, `max_num_seqs` or `max_num_batched_tokens` is 0.
    pub fn new(cfg: SchedulerConfig) -> Self {
        assert!(cfg.max_num_seqs > 0, "max_num_seqs must be positive");
        assert!(
            cfg.max_num_batched_tokens > 0,
            "max_num_batched_tokens must be positive"
        );
        let kv = KvCacheManager::new(cfg.num_blocks, cfg.block_size, cfg.enable_prefix_caching);
        Self {
            cfg,
            kv,
            seqs: IntMap::default(),
            running: Vec::new(),
            waiting: VecDeque::new(),
            prefix_query_tokens: 0,
            prefix_hit_tokens: 0,
            preemptions: 0,
        }
    }

    pub fn config(&self) -> &SchedulerConfig {
        &self.cfg
    }

    /// Queues a sequence (waiting, arrival order). Nothing is queued on error.
    pub fn add(&mut self, seq: NewSeq) -> Result<(), SchedError> {
        let prompt = seq.prompt.len();
        if prompt == 0 {
            return Err(SchedError::EmptyPrompt);
        }
        if self.seqs.contains_key(&seq.id) {
            return Err(SchedError::DuplicateId(seq.id));
        }
        if prompt > self.cfg.max_model_len {
            return Err(SchedError::PromptTooLong {
                prompt,
                max_model_len: self.cfg.max_model_len,
            });
        }
        let needed = prompt.div_ceil(self.cfg.block_size);
        if needed > self.cfg.num_blocks {
            return Err(SchedError::PromptTooLargeForCache {
                needed,
                available: self.cfg.num_blocks,
            });
        }
        if !self.cfg.enable_chunked_prefill && prompt > self.cfg.max_num_batched_tokens {
            return Err(SchedError::PromptExceedsBatchBudget {
                prompt,
                max_num_batched_tokens: self.cfg.max_num_batched_tokens,
            });
        }
        let id = seq.id;
        let s = Sequence::new(seq, self.cfg.block_size, self.cfg.enable_prefix_caching);
        self.seqs.insert(id, s);
        self.waiting.push_back(id);
        Ok(())
    }

    /// Removes a sequence wherever it is and frees its blocks at once. Returns false if unknown.
    pub fn abort(&mut self, id: SeqId) -> bool {
        let Some(seq) = self.seqs.remove(&id) else {
            return false;
        };
        match seq.status {
            SeqStatus::Running => self.running.retain(|&r| r != id),
            SeqStatus::Waiting => self.waiting.retain(|&w| w != id),
        }
        self.kv.free(id);
        true
    }

    /// Plans one step.
    pub fn schedule(&mut self) -> SchedulerOutput {
        let mut out = SchedulerOutput::default();
        let mut budget = self.cfg.max_num_batched_tokens;
        self.schedule_running(&mut out, &mut budget);
        // As in vLLM: a step that had to preempt admits nobody, or it would readmit the victim.
        if out.preempted.is_empty() {
            self.schedule_waiting(&mut out, &mut budget);
        }
        out.num_tokens = self.cfg.max_num_batched_tokens - budget;
        out
    }

    fn schedule_running(&mut self, out: &mut SchedulerOutput, budget: &mut usize) {
        let mut i = 0;
        while i < self.running.len() && *budget > 0 && out.seqs.len() < self.cfg.max_num_seqs {
            let id = self.running[i];
            let seq = &self.seqs[&id];
            // 0 when the runner owes this sequence its sampled token: nothing to do yet.
            let n = (seq.num_tokens() - seq.num_computed()).min(*budget);
            if n == 0 {
                i += 1;
                continue;
            }
            loop {
                let seq = &self.seqs[&id];
                if let Some(table) = self.kv.allocate(seq, n, &[]) {
                    out.seqs.push(plan(seq, seq.num_computed(), n, table));
                    *budget -= n;
                    i += 1;
                    break;
                }
                let victim = self
                    .running
                    .pop()
                    .expect("the sequence being scheduled is running");
                self.preempt(victim);
                out.preempted.push(victim);
                if victim == id {
                    // It was the newest itself; everything before it is already scheduled.
                    return;
                }
            }
        }
    }

    fn schedule_waiting(&mut self, out: &mut SchedulerOutput, budget: &mut usize) {
        while let Some(&id) = self.waiting.front() {
            if *budget == 0 || out.seqs.len() >= self.cfg.max_num_seqs {
                break;
            }
            let seq = &self.seqs[&id];
            debug_assert_eq!(seq.num_computed(), 0, "waiting sequences hold no KV");
            let hit = self.kv.find_prefix(seq);
            let remaining = seq.num_tokens() - hit.num_tokens;
            // Without chunked prefill a sequence must fit whole, unless it could never fit (a
            // preempted one that grew past the budget), which is then chunked anyway.
            let n = if remaining <= *budget {
                remaining
            } else if self.cfg.enable_chunked_prefill || remaining > self.cfg.max_num_batched_tokens
            {
                *budget
            } else {
                break;
            };
            let Some(table) = self.kv.allocate(seq, n, &hit.blocks) else {
                break;
            };
            out.seqs.push(plan(seq, hit.num_tokens, n, table));
            *budget -= n;
            self.waiting.pop_front();
            self.running.push(id);
            let seq = self
                .seqs
                .get_mut(&id)
                .expect("front of the waiting queue is a live sequence");
            seq.num_computed = hit.num_tokens;
            seq.status = SeqStatus::Running;
            if !std::mem::replace(&mut seq.admitted_before, true) && self.cfg.enable_prefix_caching
            {
                self.prefix_query_tokens += seq.num_tokens() as u64;
                self.prefix_hit_tokens += hit.num_tokens as u64;
            }
        }
    }

    fn preempt(&mut self, id: SeqId) {
        self.kv.free(id);
        let seq = self.seqs.get_mut(&id).expect("preempted sequence is live");
        seq.reset_for_recompute();
        self.waiting.push_front(id);
        self.preemptions += 1;
    }

    /// Applies a step's results: for each (id, token) in `sampled`, appends the token to that
    /// sequence (only for seqs that had sample=true); marks every scheduled seq's tokens computed.
    /// `finished` sequences are removed and their blocks freed (hashed full blocks stay cached).
    /// Entries for sequences aborted since `schedule` are ignored.
    pub fn update(&mut self, out: &SchedulerOutput, sampled: &[(SeqId, u32)], finished: &[SeqId]) {
        for s in &out.seqs {
            let Some(seq) = self.seqs.get_mut(&s.id) else {
                continue;
            };
            if seq.status != SeqStatus::Running || seq.num_computed != s.start {
                continue; // stale output
            }
            seq.num_computed = s.start + s.tokens.len();
            seq.awaiting_sample = s.sample;
            self.kv.cache_full_blocks(seq);
        }
        for &(id, token) in sampled {
            if let Some(seq) = self.seqs.get_mut(&id) {
                if std::mem::take(&mut seq.awaiting_sample) {
                    seq.append(token);
                }
            }
        }
        for &id in finished {
            self.abort(id);
        }
    }

    /// Replaces a sequence's last token, appended by `update` as a placeholder so that the
    /// next step could be planned before the token was known. Its KV must not be computed yet
    /// (the step that computes it has not been `update`d), so no cached block holds it.
    pub fn set_last_token(&mut self, id: SeqId, token: u32) {
        if let Some(seq) = self.seqs.get_mut(&id) {
            debug_assert_eq!(seq.num_computed + 1, seq.num_tokens(), "a pending token");
            seq.set_last(token);
        }
    }

    pub fn stats(&self) -> SchedStats {
        SchedStats {
            running: self.running.len(),
            waiting: self.waiting.len(),
            used_blocks: self.kv.num_used_blocks(),
            total_blocks: self.cfg.num_blocks,
            prefix_query_tokens: self.prefix_query_tokens,
            prefix_hit_tokens: self.prefix_hit_tokens,
            preemptions: self.preemptions,
        }
    }

    /// Any running or waiting sequence.
    pub fn has_work(&self) -> bool {
        !self.seqs.is_empty()
    }

    /// Prompt + generated tokens.
    pub fn num_tokens(&self, id: SeqId) -> Option<usize> {
        self.seqs.get(&id).map(Sequence::num_tokens)
    }

    pub fn sequence(&self, id: SeqId) -> Option<&Sequence> {
        self.seqs.get(&id)
    }

    pub fn block_table(&self, id: SeqId) -> Option<&[u32]> {
        self.kv.block_table(id)
    }

    /// Running sequences in admission order.
    pub fn running(&self) -> &[SeqId] {
        &self.running
    }

    /// Waiting sequences, next to admit first.
    pub fn waiting(&self) -> impl Iterator<Item = SeqId> + '_ {
        self.waiting.iter().copied()
    }

    pub fn kv_cache(&self) -> &KvCacheManager {
        &self.kv
    }

    /// Checks every bookkeeping invariant (for tests and debug builds of the runtime): ref counts
    /// equal table membership, the free queue holds exactly the unreferenced blocks, each
    /// sequence is in exactly one queue, running tables cover the computed tokens, waiting
    /// sequences hold nothing, and a block held by two tables is full and hashed in both while a
    /// block a sequence will write next is held by that sequence alone.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.kv.check_invariants()?;
        if self.running.len() + self.waiting.len() != self.seqs.len() {
            return Err("running + waiting != live sequences".into());
        }
        let bs = self.cfg.block_size;
        let pool = self.kv.pool();
        for &id in &self.running {
            let seq = self
                .seqs
                .get(&id)
                .ok_or(format!("running {id} is not live"))?;
            if seq.status != SeqStatus::Running {
                return Err(format!("{id} in running but marked waiting"));
            }
            let table = self.kv.block_table(id).unwrap_or(&[]);
            if table.len() * bs < seq.num_computed() {
                return Err(format!(
                    "{id}: {} blocks for {} computed tokens",
                    table.len(),
                    seq.num_computed()
                ));
            }
            for (i, &b) in table.iter().enumerate() {
                let full = (i + 1) * bs <= seq.num_computed();
                if pool.ref_count(b) > 1 && !(full && pool.hash_of(b).is_some()) {
                    return Err(format!(
                        "{id}: shared block {b} at index {i} is not full and hashed"
                    ));
                }
                if !full && pool.hash_of(b).is_some() {
                    return Err(format!(
                        "{id}: block {b} is hashed but will still be written"
                    ));
                }
            }
        }
        for &id in &self.waiting {
            let seq = self
                .seqs
                .get(&id)
                .ok_or(format!("waiting {id} is not live"))?;
            if seq.status != SeqStatus::Waiting || seq.num_computed() != 0 {
                return Err(format!(
                    "{id}: waiting with state {:?}/{}",
                    seq.status,
                    seq.num_computed()
                ));
            }
            if self.kv.block_table(id).is_some() {
                return Err(format!("waiting {id} holds blocks"));
            }
        }
        Ok(())
    }
}

/// The step entry for `seq`, computing `n` tokens from `start`.
fn plan(seq: &Sequence, start: usize, n: usize, table: &[u32]) -> ScheduledSeq {
    ScheduledSeq {
        id: seq.id(),
        start,
        tokens: seq.tokens()[start..start + n].to_vec(),
        block_table: table.to_vec(),
        sample: start + n == seq.num_tokens(),
    }
}

#[cfg(test)]
mod tests;
