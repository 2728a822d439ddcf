//! Sequences: what the runtime submits ([`NewSeq`]) and the scheduler's record of one
//! ([`Sequence`]): its tokens, how many are computed, and the chained hashes of its full blocks.
//!
//! Stop conditions (EOS, stop strings, `max_tokens`, `max_model_len`) are not here: the runtime
//! decides when a sequence is finished and says so in [`crate::Scheduler::update`].

use crate::hash::{block_hash, extra_key, BlockHash};

/// Caller-chosen sequence id, unique among live sequences.
pub type SeqId = u64;

/// A sequence to schedule.
#[derive(Debug, Clone)]
pub struct NewSeq {
    pub id: SeqId,
    pub prompt: Vec<u32>,
    /// Not used by the scheduler (only the prompt is checked against `max_model_len`); the
    /// runtime stops the sequence.
    pub max_tokens: usize,
    /// Extra key mixed into every block hash of this sequence: sequences with different salts never
    /// share cached blocks.
    pub cache_salt: Option<String>,
}

/// Where a sequence is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqStatus {
    Waiting,
    Running,
}

/// The scheduler's record of one sequence.
#[derive(Debug, Clone)]
pub struct Sequence {
    id: SeqId,
    tokens: Vec<u32>,
    prompt_len: usize,
    pub(crate) num_computed: usize,
    pub(crate) status: SeqStatus,
    /// Scheduled last step with `sample = true` and not yet given its token.
    pub(crate) awaiting_sample: bool,
    /// Prefix-cache stats are counted on first admission only.
    pub(crate) admitted_before: bool,
    block_size: usize,
    /// `None` when prefix caching is off: nothing is hashed then.
    hashing: Option<u64>,
    /// Hashes of every full block of `tokens` (computed or not), chained.
    block_hashes: Vec<BlockHash>,
}

impl Sequence {
    pub(crate) fn new(seq: NewSeq, block_size: usize, prefix_caching: bool) -> Self {
        let mut s = Self {
            id: seq.id,
            prompt_len: seq.prompt.len(),
            tokens: Vec::with_capacity(seq.prompt.len() + seq.max_tokens.min(4096)),
            num_computed: 0,
            status: SeqStatus::Waiting,
            awaiting_sample: false,
            admitted_before: false,
            block_size,
            hashing: prefix_caching.then(|| extra_key(seq.cache_salt.as_deref())),
            block_hashes: Vec::new(),
        };
        s.tokens.extend_from_slice(&seq.prompt);
        s.hash_new_full_blocks();
        s
    }

    pub fn id(&self) -> SeqId {
        self.id
    }

    /// Prompt followed by generated tokens.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    pub fn num_tokens(&self) -> usize {
        self.tokens.len()
    }

    pub fn prompt_len(&self) -> usize {
        self.prompt_len
    }

    /// Tokens whose KV is in the cache.
    pub fn num_computed(&self) -> usize {
        self.num_computed
    }

    pub fn status(&self) -> SeqStatus {
        self.status
    }

    /// Chained hashes of the full blocks of `tokens()`; empty when prefix caching is off.
    pub fn block_hashes(&self) -> &[BlockHash] {
        &self.block_hashes
    }

    pub(crate) fn append(&mut self, token: u32) {
        self.tokens.push(token);
        if self.tokens.len() / self.block_size > self.block_hashes.len() {
            self.hash_new_full_blocks();
        }
    }

    /// Back to waiting with nothing computed; tokens are kept and recomputed later.
    /// Replaces the last token: a placeholder appended before the token was known (a step
    /// planned ahead). A block the placeholder completed is hashed again.
    pub(crate) fn set_last(&mut self, token: u32) {
        let n = self.tokens.len();
        self.tokens[n - 1] = token;
        if n.is_multiple_of(self.block_size) && self.block_hashes.len() == n / self.block_size {
            self.block_hashes.pop();
            self.hash_new_full_blocks();
        }
    }

    pub(crate) fn reset_for_recompute(&mut self) {
        self.num_computed = 0;
        self.status = SeqStatus::Waiting;
        self.awaiting_sample = false;
    }

    fn hash_new_full_blocks(&mut self) {
        let Some(extra) = self.hashing else { return };
        let full = self.tokens.len() / self.block_size;
        for i in self.block_hashes.len()..full {
            let parent = i.checked_sub(1).map(|p| self.block_hashes[p]);
            let toks = &self.tokens[i * self.block_size..(i + 1) * self.block_size];
            self.block_hashes.push(block_hash(parent, extra, toks));
        }
    }
}
