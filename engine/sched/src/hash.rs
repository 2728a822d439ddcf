//! Hashing: the chained prefix-cache block hash, and a cheap `BuildHasher` for the crate's maps.
//!
//! The block hash is our own 64-bit function (splitmix64 finalizer chained over the parent hash,
//! the extra keys and every token id), so it is stable across runs, platforms and Rust versions.
//! It is not cryptographic: a client able to choose prompts could in principle craft a collision
//! with another tenant's block; `cache_salt` keeps tenants apart, and a keyed or SHA-256 hash can
//! replace [`block_hash`] without touching the rest of the crate.

use std::hash::{BuildHasherDefault, Hasher};

/// Key of one full block in the prefix cache.
pub type BlockHash = u64;

/// The "parent" of a sequence's first block.
const ROOT: u64 = 0x6a09_e667_f3bc_c908;

/// splitmix64's output function: a bijection on u64 with good avalanche.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Folds a sequence's extra keys (today only `cache_salt`) into one word. `None` and `Some("")`
/// differ.
pub fn extra_key(cache_salt: Option<&str>) -> u64 {
    match cache_salt {
        None => 0,
        // FNV-1a over the UTF-8 bytes.
        Some(s) => s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        }),
    }
}

/// H(parent, extra, tokens): the hash of a full block given the hash of the block before it.
pub fn block_hash(parent: Option<BlockHash>, extra: u64, tokens: &[u32]) -> BlockHash {
    let mut h = mix(parent.unwrap_or(ROOT) ^ mix(extra.wrapping_add(tokens.len() as u64)));
    for &t in tokens {
        h = mix(h ^ u64::from(t).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    }
    h
}

/// Hasher for maps keyed by integers: sequence ids (mixed once) and block hashes (already mixed).
/// SipHash's DoS resistance buys nothing here and costs a measurable share of a step.
#[derive(Default, Clone, Copy)]
pub struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = mix(self.0 ^ u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = mix(self.0 ^ n);
    }
}

pub type IntMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<IntHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_salt_and_tokens_all_matter() {
        let a = block_hash(None, 0, &[1, 2, 3, 4]);
        assert_eq!(a, block_hash(None, 0, &[1, 2, 3, 4]), "deterministic");
        assert_ne!(a, block_hash(None, 0, &[1, 2, 3, 5]));
        assert_ne!(a, block_hash(None, 0, &[2, 1, 3, 4]), "order matters");
        assert_ne!(a, block_hash(Some(a), 0, &[1, 2, 3, 4]), "parent matters");
        assert_ne!(a, block_hash(None, extra_key(Some("t1")), &[1, 2, 3, 4]));
        assert_ne!(extra_key(None), extra_key(Some("")));
        assert_ne!(extra_key(Some("a")), extra_key(Some("b")));
    }
}
