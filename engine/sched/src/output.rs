//! What one scheduling step produces ([`SchedulerOutput`]) and the scheduler's counters
//! ([`SchedStats`]). Plain data: the runtime turns it into a forward batch.

use crate::SeqId;

/// One sequence's work this step.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduledSeq {
    pub id: SeqId,
    /// Position of the first token computed this step (= tokens already in the KV cache).
    pub start: usize,
    /// Token ids to compute this step, at positions start..start+tokens.len().
    pub tokens: Vec<u32>,
    /// Physical block ids of the sequence, covering at least positions 0..start+tokens.len().
    pub block_table: Vec<u32>,
    /// True when, after this step, every known token is computed: the runner samples a token.
    pub sample: bool,
}

/// One step's plan.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SchedulerOutput {
    /// Running seqs first (decode / next chunk), then newly admitted ones.
    pub seqs: Vec<ScheduledSeq>,
    /// Sent back to waiting this step (blocks freed; recomputed later).
    pub preempted: Vec<SeqId>,
    /// Sum of `tokens.len()`.
    pub num_tokens: usize,
}

impl SchedulerOutput {
    pub fn is_empty(&self) -> bool {
        self.seqs.is_empty()
    }
}

/// Scheduler gauges (running .. total_blocks) and cumulative counters.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SchedStats {
    pub running: usize,
    pub waiting: usize,
    /// KV usage = used / total; cached-but-free blocks count as free.
    pub used_blocks: usize,
    pub total_blocks: usize,
    /// Tokens looked up in the prefix cache (whole prompt, first admission of each sequence).
    pub prefix_query_tokens: u64,
    /// Of those, tokens found cached.
    pub prefix_hit_tokens: u64,
    pub preemptions: u64,
}
