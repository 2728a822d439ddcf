//! The KV cache manager: each sequence's block table, allocation on top of the [`BlockPool`],
//! and the prefix cache (lookup of a sequence's longest cached prefix, registration of newly full
//! blocks).
//!
//! Follows vLLM v1's `KVCacheManager`. Sharing rule: only full, hashed blocks are ever shared
//! (a prefix hit covers whole blocks and always leaves at least one token to compute, which lands
//! in a fresh block), so a sequence only ever writes into blocks it alone holds. The scheduling
//! policy (who gets blocks, preemption) lives in `scheduler.rs`.

use crate::block_pool::{BlockId, BlockPool};
use crate::hash::IntMap;
use crate::request::Sequence;
use crate::SeqId;

/// The cached prefix found for a sequence about to be admitted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PrefixHit {
    /// Cached blocks for the sequence's first `blocks.len()` blocks.
    pub blocks: Vec<BlockId>,
    /// `blocks.len() * block_size`.
    pub num_tokens: usize,
}

#[derive(Debug, Default)]
struct SeqBlocks {
    blocks: Vec<BlockId>,
    /// Leading blocks already registered in the prefix cache.
    num_cached: usize,
}

#[derive(Debug)]
pub struct KvCacheManager {
    pool: BlockPool,
    block_size: usize,
    prefix_caching: bool,
    tables: IntMap<SeqId, SeqBlocks>,
}

impl KvCacheManager {
    pub fn new(num_blocks: usize, block_size: usize, prefix_caching: bool) -> Self {
        assert!(block_size > 0, "block_size must be positive");
        Self {
            pool: BlockPool::new(num_blocks),
            block_size,
            prefix_caching,
            tables: IntMap::default(),
        }
    }

    pub fn block_size(&self) -> usize {
        self.block_size
    }

    pub fn pool(&self) -> &BlockPool {
        &self.pool
    }

    pub fn num_used_blocks(&self) -> usize {
        self.pool.num_blocks() - self.pool.num_free()
    }

    pub fn block_table(&self, seq: SeqId) -> Option<&[BlockId]> {
        self.tables.get(&seq).map(|t| t.blocks.as_slice())
    }

    /// Longest run of cached blocks matching the sequence's leading block hashes, capped so at
    /// least one token is left to compute (the runner needs logits for the last one). With a
    /// block-aligned, fully cached prompt this recomputes the whole last block: recomputing just
    /// the last token would write into a shared block.
    pub fn find_prefix(&self, seq: &Sequence) -> PrefixHit {
        if !self.prefix_caching {
            return PrefixHit::default();
        }
        let max_blocks = seq.num_tokens().saturating_sub(1) / self.block_size;
        let blocks: Vec<BlockId> = seq.block_hashes()[..max_blocks.min(seq.block_hashes().len())]
            .iter()
            .map_while(|&h| self.pool.lookup(h))
            .collect();
        let num_tokens = blocks.len() * self.block_size;
        PrefixHit { blocks, num_tokens }
    }

    /// Makes the sequence's table hold `num_computed + hit + n_new` tokens: takes a reference on the
    /// `hit` blocks (only on admission, when the sequence has no table) and allocates what is
    /// missing. Returns the table, or `None` (changing nothing) when the pool is short.
    pub fn allocate(
        &mut self,
        seq: &Sequence,
        n_new: usize,
        hit: &[BlockId],
    ) -> Option<&[BlockId]> {
        let bs = self.block_size;
        let held = self.tables.get(&seq.id()).map_or(0, |t| t.blocks.len());
        debug_assert!(hit.is_empty() || held == 0, "prefix hits only on admission");
        let total_tokens = seq.num_computed() + hit.len() * bs + n_new;
        let new = total_tokens.div_ceil(bs).saturating_sub(held + hit.len());
        // Hit blocks that are free count against the free pool just like new ones.
        let free_hits = hit.iter().filter(|&&b| self.pool.ref_count(b) == 0).count();
        if new + free_hits > self.pool.num_free() {
            return None;
        }
        let table = self.tables.entry(seq.id()).or_default();
        self.pool.touch(hit);
        table.blocks.extend_from_slice(hit);
        table.num_cached += hit.len();
        let ok = self.pool.allocate(new, &mut table.blocks);
        debug_assert!(ok, "free count checked above");
        Some(&table.blocks)
    }

    /// Registers the sequence's blocks that are now full of computed tokens in the prefix cache.
    pub fn cache_full_blocks(&mut self, seq: &Sequence) {
        if !self.prefix_caching {
            return;
        }
        let Some(table) = self.tables.get_mut(&seq.id()) else {
            return;
        };
        let full = (seq.num_computed() / self.block_size)
            .min(seq.block_hashes().len())
            .min(table.blocks.len());
        for i in table.num_cached..full {
            self.pool.cache(table.blocks[i], seq.block_hashes()[i]);
        }
        table.num_cached = table.num_cached.max(full);
    }

    /// Releases all of a sequence's blocks, last block first so that a prompt's tail is evicted
    /// before its (more shareable) head.
    pub fn free(&mut self, seq: SeqId) {
        if let Some(t) = self.tables.remove(&seq) {
            self.pool.free(t.blocks.into_iter().rev());
        }
    }

    /// Ref counts match the tables; the free queue holds exactly the unreferenced blocks.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut refs = vec![0u32; self.pool.num_blocks()];
        for t in self.tables.values() {
            for &b in &t.blocks {
                refs[b as usize] += 1;
            }
            if let Some(&b) = t.blocks[..t.num_cached]
                .iter()
                .find(|&&b| self.pool.hash_of(b).is_none())
            {
                return Err(format!("block {b} counted as cached but has no hash"));
            }
        }
        self.pool.check_invariants(&refs)
    }
}
