//! The physical KV block pool: ref counts, the free-block queue (LRU eviction order) and the
//! hash -> block map of the prefix cache.
//!
//! Follows vLLM v1's `BlockPool`: every block with ref count 0 sits in one doubly linked free
//! queue (intrusive, so a cache hit can pull a block out of the middle in O(1)). Allocation pops
//! from the head; freed blocks are appended at the tail, so a freed block that still carries a
//! hash stays findable until it reaches the head and is reused, at which point its hash is
//! dropped (evicted). This file knows nothing about sequences; see `kv_cache.rs` for that.

use crate::hash::{BlockHash, IntMap};

/// Index of a physical KV block.
pub type BlockId = u32;

const NIL: u32 = u32::MAX;

#[derive(Debug, Clone)]
struct Block {
    ref_cnt: u32,
    /// Set once the block is full of computed tokens; a hashed block is never written again.
    hash: Option<BlockHash>,
    /// Free-queue links, meaningful only while `ref_cnt == 0`.
    prev: u32,
    next: u32,
}

#[derive(Debug)]
pub struct BlockPool {
    blocks: Vec<Block>,
    head: u32,
    tail: u32,
    num_free: usize,
    cached: IntMap<BlockHash, BlockId>,
}

impl BlockPool {
    /// A pool of `num_blocks` free blocks, queued in id order.
    pub fn new(num_blocks: usize) -> Self {
        assert!(
            num_blocks < NIL as usize,
            "num_blocks {num_blocks} does not fit a u32 block id"
        );
        let n = num_blocks as u32;
        let blocks = (0..n)
            .map(|i| Block {
                ref_cnt: 0,
                hash: None,
                prev: if i == 0 { NIL } else { i - 1 },
                next: if i + 1 == n { NIL } else { i + 1 },
            })
            .collect();
        let (head, tail) = if n == 0 { (NIL, NIL) } else { (0, n - 1) };
        Self {
            blocks,
            head,
            tail,
            num_free: num_blocks,
            cached: IntMap::default(),
        }
    }

    pub fn num_blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Blocks with ref count 0, cached ones included (they can be evicted at will).
    pub fn num_free(&self) -> usize {
        self.num_free
    }

    pub fn ref_count(&self, id: BlockId) -> u32 {
        self.blocks[id as usize].ref_cnt
    }

    pub fn hash_of(&self, id: BlockId) -> Option<BlockHash> {
        self.blocks[id as usize].hash
    }

    /// The block registered under `hash`, in use or free.
    pub fn lookup(&self, hash: BlockHash) -> Option<BlockId> {
        self.cached.get(&hash).copied()
    }

    /// Pops `n` blocks from the head of the free queue into `out` with ref count 1, evicting their
    /// hashes. Takes nothing and returns false if fewer than `n` are free.
    pub fn allocate(&mut self, n: usize, out: &mut Vec<BlockId>) -> bool {
        if n > self.num_free {
            return false;
        }
        out.reserve(n);
        for _ in 0..n {
            let id = self.head;
            self.unlink(id);
            let b = &mut self.blocks[id as usize];
            b.ref_cnt = 1;
            if let Some(h) = b.hash.take() {
                // A duplicate of a block cached elsewhere is not the map's entry; keep that one.
                if self.cached.get(&h) == Some(&id) {
                    self.cached.remove(&h);
                }
            }
            out.push(id);
        }
        true
    }

    /// Takes one more reference on each block (prefix-cache hits), pulling free ones out of the
    /// free queue.
    pub fn touch(&mut self, ids: &[BlockId]) {
        for &id in ids {
            if self.blocks[id as usize].ref_cnt == 0 {
                self.unlink(id);
            }
            self.blocks[id as usize].ref_cnt += 1;
        }
    }

    /// Drops one reference on each block in iteration order; blocks reaching 0 join the tail of the
    /// free queue in that order (the first to reach 0 is evicted first).
    pub fn free(&mut self, ids: impl IntoIterator<Item = BlockId>) {
        for id in ids {
            let b = &mut self.blocks[id as usize];
            b.ref_cnt = b
                .ref_cnt
                .checked_sub(1)
                .expect("block freed more often than taken (ref count < 0)");
            if b.ref_cnt == 0 {
                self.push_tail(id);
            }
        }
    }

    /// Marks a full, computed block as immutable and findable under `hash`. If another block
    /// already holds that hash (two sequences computed the same content), the first stays the
    /// map's entry; this one is still hashed so it is never shared-written.
    pub fn cache(&mut self, id: BlockId, hash: BlockHash) {
        let b = &mut self.blocks[id as usize];
        debug_assert!(
            b.hash.is_none() || b.hash == Some(hash),
            "block {id} re-hashed"
        );
        b.hash = Some(hash);
        self.cached.entry(hash).or_insert(id);
    }

    fn unlink(&mut self, id: BlockId) {
        let (prev, next) = {
            let b = &self.blocks[id as usize];
            (b.prev, b.next)
        };
        if prev == NIL {
            self.head = next;
        } else {
            self.blocks[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.blocks[next as usize].prev = prev;
        }
        let b = &mut self.blocks[id as usize];
        b.prev = NIL;
        b.next = NIL;
        self.num_free -= 1;
    }

    fn push_tail(&mut self, id: BlockId) {
        let b = &mut self.blocks[id as usize];
        b.prev = self.tail;
        b.next = NIL;
        if self.tail == NIL {
            self.head = id;
        } else {
            self.blocks[self.tail as usize].next = id;
        }
        self.tail = id;
        self.num_free += 1;
    }

    /// Free-queue order from head (next evicted) to tail.
    pub fn free_queue(&self) -> Vec<BlockId> {
        let mut v = Vec::with_capacity(self.num_free);
        let mut cur = self.head;
        while cur != NIL && v.len() <= self.blocks.len() {
            v.push(cur);
            cur = self.blocks[cur as usize].next;
        }
        v
    }

    /// Checks the pool's own invariants; `refs[i]` is how many block tables hold block `i`.
    pub fn check_invariants(&self, refs: &[u32]) -> Result<(), String> {
        for (i, b) in self.blocks.iter().enumerate() {
            if b.ref_cnt != refs[i] {
                return Err(format!(
                    "block {i}: ref count {} but held by {} tables",
                    b.ref_cnt, refs[i]
                ));
            }
        }
        let queue = self.free_queue();
        if queue.len() != self.num_free {
            return Err(format!(
                "free queue has {} blocks, num_free says {}",
                queue.len(),
                self.num_free
            ));
        }
        let mut seen = vec![false; self.blocks.len()];
        for &id in &queue {
            if std::mem::replace(&mut seen[id as usize], true) {
                return Err(format!("block {id} twice in the free queue"));
            }
            if self.blocks[id as usize].ref_cnt != 0 {
                return Err(format!("block {id} in the free queue with a ref count"));
            }
        }
        let zero = self.blocks.iter().filter(|b| b.ref_cnt == 0).count();
        if zero != self.num_free {
            return Err(format!(
                "{zero} blocks have ref count 0 but {} are queued",
                self.num_free
            ));
        }
        for (&h, &id) in &self.cached {
            if self.blocks[id as usize].hash != Some(h) {
                return Err(format!(
                    "cache maps a hash to block {id}, which does not carry it"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_from_head_and_frees_to_tail() {
        let mut p = BlockPool::new(4);
        let mut got = Vec::new();
        assert!(p.allocate(3, &mut got));
        assert_eq!(got, [0, 1, 2]);
        assert_eq!(p.num_free(), 1);
        assert!(!p.allocate(2, &mut got), "only one free");
        assert_eq!(got.len(), 3, "a failed allocation takes nothing");
        p.free([2, 0]);
        assert_eq!(p.free_queue(), [3, 2, 0]);
        p.check_invariants(&[0, 1, 0, 0]).unwrap();
    }

    #[test]
    fn lru_eviction_drops_the_oldest_freed_hash_first() {
        let mut p = BlockPool::new(3);
        let mut got = Vec::new();
        assert!(p.allocate(3, &mut got));
        for (i, &b) in got.iter().enumerate() {
            p.cache(b, 100 + i as u64);
        }
        // Freed in order 1, 0, 2: LRU says 1 goes first, then 0, then 2.
        p.free([1, 0, 2]);
        assert_eq!(p.free_queue(), [1, 0, 2]);
        assert_eq!(p.lookup(101), Some(1), "freed but still cached");
        let mut one = Vec::new();
        assert!(p.allocate(1, &mut one));
        assert_eq!(one, [1]);
        assert_eq!(p.lookup(101), None, "evicted on reuse");
        assert_eq!(p.hash_of(1), None);
        assert_eq!(p.lookup(100), Some(0));
        // A hit on a free cached block pulls it out of the middle of the queue.
        p.touch(&[0]);
        assert_eq!(p.free_queue(), [2]);
        assert_eq!(p.ref_count(0), 1);
        p.check_invariants(&[1, 1, 0]).unwrap();
    }

    #[test]
    fn duplicate_hash_keeps_first_entry() {
        let mut p = BlockPool::new(2);
        let mut got = Vec::new();
        assert!(p.allocate(2, &mut got));
        p.cache(0, 7);
        p.cache(1, 7);
        assert_eq!(p.lookup(7), Some(0));
        p.free([1]);
        let mut again = Vec::new();
        assert!(p.allocate(1, &mut again));
        assert_eq!(
            p.lookup(7),
            Some(0),
            "evicting the duplicate keeps the entry"
        );
        p.check_invariants(&[1, 1]).unwrap();
    }
}
