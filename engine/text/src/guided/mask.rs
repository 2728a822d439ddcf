//! Token masks: which token ids a matcher state allows next.
//!
//! `TokenVocab` is a byte trie of the vocabulary's tokens, flattened in preorder with each node's
//! subtree end, so the walk is one pass over an array: a node whose byte the grammar refuses
//! skips its whole subtree, and tokens sharing a prefix share its matching work (one matcher
//! state per depth, buffers reused). Control tokens (`<|im_end|>`, EOS) are not in the trie: the
//! detokenizer drops their text, so they can never be part of guided text; the engine allows its
//! stop tokens itself once the grammar is complete.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::grammar::Grammar;
use super::matcher::{advance, Frame, State};
use crate::Tokenizer;

#[derive(Debug, Clone, Copy)]
struct TrieNode {
    byte: u8,
    /// 1 for a token's first byte.
    depth: u16,
    /// Index just past this node's subtree.
    end: u32,
    /// Tokens that end at this node: `tokens[tok_start..tok_end]`.
    tok_start: u32,
    tok_end: u32,
}

/// The vocabulary as guided decoding sees it: every token's bytes and the trie of those allowed
/// inside guided text. Built once per tokenizer and shared.
#[derive(Debug)]
pub struct TokenVocab {
    nodes: Vec<TrieNode>,
    tokens: Vec<u32>,
    /// Bytes of token `id`: `bytes[offsets[id]..offsets[id + 1]]`.
    bytes: Vec<u8>,
    offsets: Vec<u32>,
    /// In the trie (not a control token, not empty).
    in_trie: Vec<bool>,
    max_len: usize,
}

impl TokenVocab {
    /// From a tokenizer: each token's exact bytes (byte-level BPE pieces decoded, SentencePiece
    /// `▁` as a space), control tokens left out.
    pub fn new(tok: &Tokenizer) -> Self {
        let n = tok.vocab_size();
        let pieces = (0..n as u32).map(|id| {
            let bytes = tok.token_bytes(id).map(<[u8]>::to_vec).unwrap_or_default();
            (bytes, tok.is_special(id))
        });
        Self::from_pieces(pieces)
    }

    /// From (bytes, is_control) per token id.
    pub fn from_pieces(pieces: impl IntoIterator<Item = (Vec<u8>, bool)>) -> Self {
        let mut bytes = Vec::new();
        let mut offsets = vec![0u32];
        let mut in_trie = Vec::new();
        for (b, control) in pieces {
            in_trie.push(!control && !b.is_empty());
            bytes.extend_from_slice(&b);
            offsets.push(bytes.len() as u32);
        }
        let mut v = TokenVocab {
            nodes: Vec::new(),
            tokens: Vec::new(),
            bytes,
            offsets,
            in_trie,
            max_len: 0,
        };
        v.build_trie();
        v
    }

    fn build_trie(&mut self) {
        let mut ids: Vec<u32> = (0..self.len() as u32)
            .filter(|&id| self.in_trie[id as usize])
            .collect();
        ids.sort_by(|a, b| self.token_bytes(*a).cmp(self.token_bytes(*b)));
        // The open path: node indices of the previous token's bytes.
        let mut path: Vec<usize> = Vec::new();
        let mut prev: &[u8] = &[];
        let mut nodes: Vec<TrieNode> = Vec::new();
        let mut tokens = Vec::with_capacity(ids.len());
        let mut max_len = 0;
        for &id in &ids {
            let b = self.token_bytes(id);
            let common = prev.iter().zip(b).take_while(|(x, y)| x == y).count();
            while path.len() > common {
                if let Some(i) = path.pop() {
                    nodes[i].end = nodes.len() as u32;
                }
            }
            for (d, &byte) in b.iter().enumerate().skip(common) {
                path.push(nodes.len());
                nodes.push(TrieNode {
                    byte,
                    depth: (d + 1).min(u16::MAX as usize) as u16,
                    end: 0,
                    tok_start: tokens.len() as u32,
                    tok_end: tokens.len() as u32,
                });
            }
            if let Some(&last) = path.last() {
                if nodes[last].tok_start == nodes[last].tok_end {
                    nodes[last].tok_start = tokens.len() as u32;
                }
                tokens.push(id);
                nodes[last].tok_end = tokens.len() as u32;
            }
            max_len = max_len.max(b.len());
            prev = b;
        }
        let total = nodes.len() as u32;
        for i in path {
            nodes[i].end = total;
        }
        self.nodes = nodes;
        self.tokens = tokens;
        self.max_len = max_len;
    }

    /// Number of token ids.
    pub fn len(&self) -> usize {
        self.in_trie.len()
    }

    pub fn is_empty(&self) -> bool {
        self.in_trie.is_empty()
    }

    /// Trie nodes (a size figure).
    pub fn trie_nodes(&self) -> usize {
        self.nodes.len()
    }

    pub fn token_bytes(&self, id: u32) -> &[u8] {
        let i = id as usize;
        match (self.offsets.get(i), self.offsets.get(i + 1)) {
            (Some(&a), Some(&b)) => &self.bytes[a as usize..b as usize],
            _ => &[],
        }
    }

    /// Whether the token may appear in guided text at all.
    pub fn is_guidable(&self, id: u32) -> bool {
        self.in_trie.get(id as usize).copied().unwrap_or(false)
    }
}

/// A set of allowed token ids.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenMask {
    bits: Vec<u64>,
    len: usize,
}

impl TokenMask {
    fn none(len: usize) -> Self {
        TokenMask {
            bits: vec![0; len.div_ceil(64)],
            len,
        }
    }

    fn allow(&mut self, id: u32) {
        self.bits[id as usize / 64] |= 1 << (id % 64);
    }

    pub fn is_allowed(&self, id: u32) -> bool {
        let i = id as usize;
        i < self.len && self.bits[i / 64] & (1 << (i % 64)) != 0
    }

    /// Allowed ids.
    pub fn count(&self) -> usize {
        self.bits.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn allowed(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.len as u32).filter(|&i| self.is_allowed(i))
    }

    /// Sets every disallowed logit to -inf (logits past the vocabulary included).
    pub fn apply(&self, logits: &mut [f32]) {
        for (w, chunk) in logits.chunks_mut(64).enumerate() {
            let word = self.bits.get(w).copied().unwrap_or(0);
            if word == u64::MAX {
                continue;
            }
            for (j, l) in chunk.iter_mut().enumerate() {
                if word & (1 << j) == 0 {
                    *l = f32::NEG_INFINITY;
                }
            }
        }
    }
}

/// Reusable buffers of the trie walk: one matcher state per depth.
#[derive(Debug, Default)]
pub(crate) struct WalkScratch {
    states: Vec<State>,
    frames: Vec<Frame>,
}

/// The tokens whose every byte `state` accepts.
pub(crate) fn compute_mask(
    vocab: &TokenVocab,
    g: &Grammar,
    state: &State,
    scratch: &mut WalkScratch,
) -> TokenMask {
    let mut mask = TokenMask::none(vocab.len());
    let need = vocab.max_len + 1;
    if scratch.states.len() < need {
        scratch.states.resize_with(need, State::default);
    }
    scratch.states[0].copy_from(state);
    let mut i = 0;
    while i < vocab.nodes.len() {
        let n = vocab.nodes[i];
        let d = n.depth as usize;
        let (before, after) = scratch.states.split_at_mut(d);
        if advance(g, &before[d - 1], n.byte, &mut after[0], &mut scratch.frames) {
            for &t in &vocab.tokens[n.tok_start as usize..n.tok_end as usize] {
                mask.allow(t);
            }
            i += 1;
        } else {
            i = n.end as usize;
        }
    }
    mask
}

/// Masks already computed for a grammar's states, shared by the samples of one request.
#[derive(Debug, Default)]
pub struct MaskCache {
    masks: HashMap<Vec<Vec<Frame>>, Arc<TokenMask>>,
    scratch: WalkScratch,
    /// Masks computed (cache misses), for tests and logs.
    pub computed: usize,
}

/// Entries kept before the cache starts over (a 152k-token mask is 19 KB).
const MAX_CACHED: usize = 256;

impl MaskCache {
    pub(crate) fn get(&mut self, vocab: &TokenVocab, g: &Grammar, state: &State) -> Arc<TokenMask> {
        if let Some(m) = self.masks.get(state.stacks()) {
            return m.clone();
        }
        let m = Arc::new(compute_mask(vocab, g, state, &mut self.scratch));
        self.computed += 1;
        if self.masks.len() >= MAX_CACHED {
            self.masks.clear();
        }
        self.masks.insert(state.stacks().to_vec(), m.clone());
        m
    }
}

/// A `MaskCache` shared by the samples of one request. The engine thread is the only user; the
/// mutex is there because its state must be `Send`, and it is never contended.
pub type SharedMaskCache = Arc<Mutex<MaskCache>>;
