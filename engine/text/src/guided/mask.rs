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
use super::matcher::{advance, select, stack_kind, Frame, StackKind, State};
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

/// A byte trie of some tokens, flattened in preorder.
#[derive(Debug, Default)]
struct Trie {
    nodes: Vec<TrieNode>,
    tokens: Vec<u32>,
    max_len: usize,
}

impl Trie {
    fn new<'a>(mut ids: Vec<u32>, bytes: impl Fn(u32) -> &'a [u8]) -> Trie {
        ids.sort_by(|a, b| bytes(*a).cmp(bytes(*b)));
        // The open path: node indices of the previous token's bytes.
        let mut path: Vec<usize> = Vec::new();
        let mut prev: &[u8] = &[];
        let mut nodes: Vec<TrieNode> = Vec::new();
        let mut tokens = Vec::with_capacity(ids.len());
        let mut max_len = 0;
        for &id in &ids {
            let b = bytes(id);
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
        Trie {
            nodes,
            tokens,
            max_len,
        }
    }
}

/// The vocabulary as guided decoding sees it: every token's bytes, the trie of those allowed
/// inside guided text, and for the two states that dominate long outputs (inside a JSON string,
/// inside raw text) the tokens that leave such a state unchanged plus a trie of the others.
/// Built once per tokenizer and shared.
#[derive(Debug)]
pub struct TokenVocab {
    all: Trie,
    /// Tokens of complete UTF-8 characters without `"`, `\` or control characters.
    plain_str: TokenMask,
    not_plain_str: Trie,
    /// Tokens of complete UTF-8 characters without `<`.
    plain_text: TokenMask,
    not_plain_text: Trie,
    /// Bytes of token `id`: `bytes[offsets[id]..offsets[id + 1]]`.
    bytes: Vec<u8>,
    offsets: Vec<u32>,
    /// In the trie (not a control token, not empty).
    in_trie: Vec<bool>,
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
        let n = in_trie.len();
        let piece =
            |id: u32| &bytes[offsets[id as usize] as usize..offsets[id as usize + 1] as usize];
        let ids: Vec<u32> = (0..n as u32).filter(|&id| in_trie[id as usize]).collect();
        let (mut plain_str, mut plain_text) = (TokenMask::none(n), TokenMask::none(n));
        let (mut rest_str, mut rest_text) = (Vec::new(), Vec::new());
        for &id in &ids {
            let b = piece(id);
            let utf8 = std::str::from_utf8(b).is_ok();
            if utf8 && !b.iter().any(|&c| c < 0x20 || c == b'"' || c == b'\\') {
                plain_str.allow(id);
            } else {
                rest_str.push(id);
            }
            if utf8 && !b.contains(&b'<') {
                plain_text.allow(id);
            } else {
                rest_text.push(id);
            }
        }
        let all = Trie::new(ids, piece);
        let not_plain_str = Trie::new(rest_str, piece);
        let not_plain_text = Trie::new(rest_text, piece);
        TokenVocab {
            all,
            plain_str,
            not_plain_str,
            plain_text,
            not_plain_text,
            bytes,
            offsets,
            in_trie,
        }
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
        self.all.nodes.len()
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

    fn union(&mut self, other: &TokenMask) {
        for (a, b) in self.bits.iter_mut().zip(&other.bits) {
            *a |= b;
        }
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

/// Reusable buffers of the trie walk: one matcher state per depth, one per stack group.
#[derive(Debug, Default)]
pub(crate) struct WalkScratch {
    states: Vec<State>,
    frames: Vec<Frame>,
    group: State,
}

/// The tokens whose every byte `state` accepts. A state's mask is the union of its stacks'
/// masks: stacks inside a string or raw text allow their plain tokens outright and walk only
/// the trie of the other tokens; the remaining stacks walk the whole trie.
pub(crate) fn compute_mask(
    vocab: &TokenVocab,
    g: &Grammar,
    state: &State,
    scratch: &mut WalkScratch,
) -> TokenMask {
    let mut mask = TokenMask::none(vocab.len());
    let kinds = [StackKind::StrBody, StackKind::TextRest, StackKind::Other];
    for kind in kinds {
        let mut group = std::mem::take(&mut scratch.group);
        select(state, |s| stack_kind(g, s) == kind, &mut group);
        if !group.is_dead() {
            let trie = match kind {
                StackKind::StrBody => {
                    mask.union(&vocab.plain_str);
                    &vocab.not_plain_str
                }
                StackKind::TextRest => {
                    mask.union(&vocab.plain_text);
                    &vocab.not_plain_text
                }
                StackKind::Other => &vocab.all,
            };
            walk(trie, g, &group, scratch, &mut mask);
        }
        scratch.group = group;
    }
    mask
}

/// Allows in `mask` every token of `trie` that `state` accepts.
fn walk(trie: &Trie, g: &Grammar, state: &State, scratch: &mut WalkScratch, mask: &mut TokenMask) {
    let need = trie.max_len + 1;
    if scratch.states.len() < need {
        scratch.states.resize_with(need, State::default);
    }
    scratch.states[0].copy_from(state);
    let mut i = 0;
    while i < trie.nodes.len() {
        let n = trie.nodes[i];
        let d = n.depth as usize;
        let (before, after) = scratch.states.split_at_mut(d);
        if advance(
            g,
            &before[d - 1],
            n.byte,
            &mut after[0],
            &mut scratch.frames,
        ) {
            for &t in &trie.tokens[n.tok_start as usize..n.tok_end as usize] {
                mask.allow(t);
            }
            i += 1;
        } else {
            i = n.end as usize;
        }
    }
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
