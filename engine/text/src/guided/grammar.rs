//! `Grammar`: the compiled form of every guided-decoding constraint (a JSON schema, JSON mode, a
//! tool-call format), as a graph of byte-level nodes that refer to each other by id, so recursion
//! (`$ref` cycles, arbitrary JSON) needs no special case.
//!
//! Owns the node set and the builder helpers that schema compilation and the tool-call formats
//! share. Does not own matching: `matcher.rs` runs a grammar over bytes.

/// Index of a node in its `Grammar`.
pub(crate) type NodeId = u32;

/// Open end of a repetition (`max` of `Node::Repeat`).
pub(crate) const UNBOUNDED: u32 = u32::MAX;

/// One grammar node. Terminals (`Lit`, `Ws`, `Str`, `Num`, `Text`) consume bytes; the others
/// only push and pop.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    /// Exactly these bytes (never empty; the empty sequence is `Seq([])`).
    Lit(Box<[u8]>),
    /// Each child in turn.
    Seq(Box<[NodeId]>),
    /// Any one child.
    Alt(Box<[NodeId]>),
    /// `item` between `min` and `max` times, with `sep` between two items.
    Repeat {
        item: NodeId,
        sep: Option<NodeId>,
        min: u32,
        max: u32,
    },
    /// Up to `max` bytes of JSON whitespace (space, tab, CR, LF).
    Ws { max: u32 },
    /// A JSON string literal, quotes included, of `min`..=`max` characters.
    Str { min: u32, max: u32 },
    /// A JSON number; `integer` refuses a fraction and an exponent.
    Num { integer: bool },
    /// Raw UTF-8 text (possibly empty) that contains none of the stop strings; `dfa[state * 256 +
    /// byte]` is the next state of an automaton over the stops' prefixes (`TEXT_DEAD`: a stop
    /// string is complete).
    /// At most `max_chars` characters (`UNBOUNDED`: any number).
    Text { dfa: Box<[u8]>, max_chars: u32 },
}

/// Digits allowed in one part of a number (integer, fraction, exponent): bounded so that a model
/// cannot spend its whole budget on one number; two exponent digits keep every number inside
/// f64 range (serde_json refuses 1e400).
pub(crate) const MAX_INT_DIGITS: u32 = 16;
pub(crate) const MAX_FRAC_DIGITS: u32 = 16;
pub(crate) const MAX_EXP_DIGITS: u32 = 2;

/// A compiled grammar: nodes and the one the text must match.
#[derive(Debug, Clone, PartialEq)]
pub struct Grammar {
    pub(crate) nodes: Vec<Node>,
    pub(crate) root: NodeId,
}

impl Grammar {
    pub(crate) fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    /// Number of nodes (a size figure for logs and tests).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

/// Builds a `Grammar` node by node.
#[derive(Debug, Default)]
pub(crate) struct Builder {
    nodes: Vec<Node>,
}

impl Builder {
    /// Continues building on `g`'s nodes (ids stay valid).
    pub(crate) fn from_grammar(g: &Grammar) -> Self {
        Builder {
            nodes: g.nodes.clone(),
        }
    }

    pub(crate) fn add(&mut self, node: Node) -> NodeId {
        self.nodes.push(node);
        (self.nodes.len() - 1) as NodeId
    }

    /// A node whose definition comes later (`set`): how recursive references are tied.
    pub(crate) fn reserve(&mut self) -> NodeId {
        self.add(Node::Alt(Box::new([])))
    }

    pub(crate) fn set(&mut self, id: NodeId, node: Node) {
        self.nodes[id as usize] = node;
    }

    pub(crate) fn lit(&mut self, text: &str) -> NodeId {
        if text.is_empty() {
            self.seq(&[])
        } else {
            self.add(Node::Lit(text.as_bytes().into()))
        }
    }

    pub(crate) fn seq(&mut self, items: &[NodeId]) -> NodeId {
        if let [one] = items {
            return *one;
        }
        self.add(Node::Seq(items.into()))
    }

    pub(crate) fn alt(&mut self, items: &[NodeId]) -> NodeId {
        if let [one] = items {
            return *one;
        }
        self.add(Node::Alt(items.into()))
    }

    pub(crate) fn ws(&mut self, max: u32) -> NodeId {
        if max == 0 {
            self.seq(&[])
        } else {
            self.add(Node::Ws { max })
        }
    }

    /// Raw text containing none of `stops` (short markers that start with `<`, which the token
    /// masks' fast path for text relies on).
    pub(crate) fn text(&mut self, stops: &[&str], max_chars: u32) -> NodeId {
        debug_assert!(stops.iter().all(|s| s.starts_with('<')));
        self.add(Node::Text {
            dfa: stop_dfa(stops),
            max_chars,
        })
    }

    pub(crate) fn finish(self, root: NodeId) -> Grammar {
        Grammar {
            nodes: self.nodes,
            root,
        }
    }
}

/// `Text` automaton state meaning a stop string has been written.
pub(crate) const TEXT_DEAD: u8 = u8::MAX;

/// Aho-Corasick-style automaton over `stops`: a state is a proper prefix of some stop string
/// (state 0 is the empty prefix); after a byte, the state is the longest suffix of the text that
/// is such a prefix, or `TEXT_DEAD` once the text ends with a whole stop string.
fn stop_dfa(stops: &[&str]) -> Box<[u8]> {
    let mut prefixes: Vec<&[u8]> = vec![&[]];
    for s in stops {
        let s = s.as_bytes();
        for k in 1..s.len() {
            if !prefixes.contains(&&s[..k]) {
                prefixes.push(&s[..k]);
            }
        }
    }
    debug_assert!(prefixes.len() < TEXT_DEAD as usize, "stop strings too long");
    let mut dfa = vec![0u8; prefixes.len() * 256];
    for (state, prefix) in prefixes.iter().enumerate() {
        for b in 0..=255u8 {
            let mut seen = prefix.to_vec();
            seen.push(b);
            let next = if stops
                .iter()
                .any(|s| !s.is_empty() && seen.ends_with(s.as_bytes()))
            {
                TEXT_DEAD
            } else {
                (0..=seen.len())
                    .rev()
                    .find_map(|k| prefixes.iter().position(|p| *p == &seen[seen.len() - k..]))
                    .unwrap_or(0) as u8
            };
            dfa[state * 256 + b as usize] = next;
        }
    }
    dfa.into_boxed_slice()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_dfa_tracks_partial_stops_and_dies_on_a_whole_one() {
        let dfa = stop_dfa(&["abab", "</x>"]);
        let walk = |text: &[u8]| {
            text.iter().try_fold(0u8, |s, &b| {
                let n = dfa[s as usize * 256 + b as usize];
                (n != TEXT_DEAD).then_some(n)
            })
        };
        assert!(walk(b"aba").is_some());
        assert!(walk(b"abaa").is_some());
        assert_eq!(walk(b"xxabab"), None);
        assert_eq!(walk(b"ab</x>"), None);
        assert!(walk(b"</y></").is_some());
        assert_eq!(walk(b"</y></x>"), None);
        assert_eq!(walk(b"aabab"), None);
    }
}
