//! Running a `Grammar` over bytes: a pushdown automaton whose state is a small set of parse
//! stacks (one per live alternative, like a GLR parser), advanced one byte at a time.
//!
//! Invariant: every live stack is *closed*: its top frame is a terminal ready to consume a byte,
//! or the stack is empty (the text so far is a complete match). Advancing a byte consumes it on
//! each stack's top, then closes the results again (pushing children, popping finished frames,
//! forking at alternatives). Stacks are sorted and deduplicated after each byte, so equal states
//! compare equal (the token-mask cache keys on them). Buffers are reused between advances: the
//! mask computation advances hundreds of thousands of bytes per step.

use std::sync::Arc;

use super::grammar::{
    Grammar, Node, NodeId, MAX_EXP_DIGITS, MAX_FRAC_DIGITS, MAX_INT_DIGITS, TEXT_DEAD, UNBOUNDED,
};

/// Deepest stack a grammar may build (nesting of JSON values is bounded by it); deeper stacks
/// die, so a model cannot open brackets forever.
const MAX_DEPTH: usize = 256;

/// Most alternatives kept at once; a grammar that forks more than this is cut (never happens
/// for the schemas we compile, whose alternatives part on their first bytes).
const MAX_STACKS: usize = 4096;

/// Where one node stands: `pos` and `aux` mean what the node's kind needs (bytes of a literal
/// matched, the index of a sequence's next child, a string's phase and character count, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Frame {
    node: NodeId,
    pos: u32,
    aux: u32,
}

impl Frame {
    fn new(node: NodeId) -> Self {
        Frame {
            node,
            pos: 0,
            aux: 0,
        }
    }
}

/// The set of live parse stacks; `stacks[live..]` are spare buffers kept for reuse.
#[derive(Debug, Clone, Default)]
pub(crate) struct State {
    stacks: Vec<Vec<Frame>>,
    live: usize,
}

impl State {
    pub(crate) fn stacks(&self) -> &[Vec<Frame>] {
        &self.stacks[..self.live]
    }

    fn clear(&mut self) {
        self.live = 0;
    }

    fn push(&mut self, s: &[Frame]) {
        if self.live >= MAX_STACKS {
            return;
        }
        if self.live == self.stacks.len() {
            self.stacks.push(s.to_vec());
        } else {
            let b = &mut self.stacks[self.live];
            b.clear();
            b.extend_from_slice(s);
        }
        self.live += 1;
    }

    fn normalize(&mut self) {
        let live = &mut self.stacks[..self.live];
        live.sort_unstable();
        let mut w = 0;
        for r in 0..live.len() {
            if w == 0 || live[r] != live[w - 1] {
                live.swap(w, r);
                w += 1;
            }
        }
        self.live = w;
    }

    /// The text so far is a complete match.
    pub(crate) fn is_accepting(&self) -> bool {
        self.stacks().iter().any(Vec::is_empty)
    }

    /// Some byte can still follow.
    pub(crate) fn can_continue(&self) -> bool {
        self.stacks().iter().any(|s| !s.is_empty())
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.live == 0
    }

    /// Copies `other` into `self`, reusing buffers.
    pub(crate) fn copy_from(&mut self, other: &State) {
        self.clear();
        for s in other.stacks() {
            self.push(s);
        }
    }
}

/// What consuming one byte did to a terminal frame.
enum Step {
    Dead,
    /// The frame takes more (or may end; closing decides).
    Stay,
    /// The frame is complete: pop it.
    Done,
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\t' | b'\r')
}

/// UTF-8 decoding phase after a first byte: 0 complete, 1..=3 continuation bytes still needed,
/// 4..=7 the restricted second byte of E0, ED, F0, F4 (no overlongs, surrogates, > U+10FFFF).
fn utf8_start(b: u8) -> Option<u32> {
    match b {
        0x00..=0x7F => Some(0),
        0xC2..=0xDF => Some(1),
        0xE0 => Some(4),
        0xE1..=0xEC | 0xEE..=0xEF => Some(2),
        0xED => Some(5),
        0xF0 => Some(6),
        0xF1..=0xF3 => Some(3),
        0xF4 => Some(7),
        _ => None,
    }
}

fn utf8_cont(phase: u32, b: u8) -> Option<u32> {
    let (lo, hi, next) = match phase {
        1 => (0x80, 0xBF, 0),
        2 => (0x80, 0xBF, 1),
        3 => (0x80, 0xBF, 2),
        4 => (0xA0, 0xBF, 1),
        5 => (0x80, 0x9F, 1),
        6 => (0x90, 0xBF, 2),
        7 => (0x80, 0x8F, 2),
        _ => return None,
    };
    (lo..=hi).contains(&b).then_some(next)
}

// JSON string phases (`pos` of a `Str` frame); `aux` counts characters.
const STR_OPEN: u32 = 0;
const STR_BODY: u32 = 1;
const STR_ESC: u32 = 2;
/// `\u` digits: STR_HEX + 0..=3 is the digit about to be read.
const STR_HEX: u32 = 3;
/// Second digit of `\uD...`: 0-7 only (no surrogates, which JSON parsers refuse unpaired).
const STR_HEX_D: u32 = 7;
/// Inside a multi-byte character: STR_UTF8 + the UTF-8 phase.
const STR_UTF8: u32 = 10;

/// `Text` frames keep their UTF-8 phase in `aux & TEXT_PHASE` and, when bounded, their
/// character count above `TEXT_COUNT_SHIFT`.
const TEXT_PHASE: u32 = 0xF;
const TEXT_COUNT_SHIFT: u32 = 4;

fn step_str(f: &mut Frame, b: u8, min: u32, max: u32) -> Step {
    let room = f.aux < max;
    match f.pos {
        STR_OPEN if b == b'"' => f.pos = STR_BODY,
        STR_BODY => match b {
            b'"' if f.aux >= min => return Step::Done,
            b'\\' if room => f.pos = STR_ESC,
            0x20..=0x7F if b != b'"' && b != b'\\' && room => f.aux += 1,
            0x80..=0xFF if room => match utf8_start(b) {
                Some(p) => f.pos = STR_UTF8 + p,
                None => return Step::Dead,
            },
            _ => return Step::Dead,
        },
        STR_ESC => match b {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                f.aux += 1;
                f.pos = STR_BODY;
            }
            b'u' => f.pos = STR_HEX,
            _ => return Step::Dead,
        },
        p @ STR_HEX..=6 if b.is_ascii_hexdigit() => {
            if p == STR_HEX && (b == b'd' || b == b'D') {
                f.pos = STR_HEX_D;
            } else if p == 6 {
                f.aux += 1;
                f.pos = STR_BODY;
            } else {
                f.pos = p + 1;
            }
        }
        STR_HEX_D if (b'0'..=b'7').contains(&b) => f.pos = STR_HEX + 2,
        p if p > STR_UTF8 => match utf8_cont(p - STR_UTF8, b) {
            Some(0) => {
                f.aux += 1;
                f.pos = STR_BODY;
            }
            Some(next) => f.pos = STR_UTF8 + next,
            None => return Step::Dead,
        },
        _ => return Step::Dead,
    }
    if min == 0 && max == UNBOUNDED {
        // Nothing depends on the count: keep equal states equal (the mask cache keys on them).
        f.aux = 0;
    }
    Step::Stay
}

// JSON number phases (`pos` of a `Num` frame); `aux` counts digits of the current part.
const NUM_START: u32 = 0;
const NUM_MINUS: u32 = 1;
const NUM_ZERO: u32 = 2;
const NUM_INT: u32 = 3;
const NUM_DOT: u32 = 4;
const NUM_FRAC: u32 = 5;
const NUM_E: u32 = 6;
const NUM_ESIGN: u32 = 7;
const NUM_EXP: u32 = 8;

fn step_num(f: &mut Frame, b: u8, integer: bool) -> Step {
    let digit = b.is_ascii_digit();
    let (pos, aux) = match (f.pos, b) {
        (NUM_START, b'-') => (NUM_MINUS, 0),
        (NUM_START | NUM_MINUS, b'0') => (NUM_ZERO, 0),
        (NUM_START | NUM_MINUS, _) if digit => (NUM_INT, 1),
        (NUM_INT, _) if digit && f.aux < MAX_INT_DIGITS => (NUM_INT, f.aux + 1),
        (NUM_ZERO | NUM_INT, b'.') if !integer => (NUM_DOT, 0),
        (NUM_DOT, _) if digit => (NUM_FRAC, 1),
        (NUM_FRAC, _) if digit && f.aux < MAX_FRAC_DIGITS => (NUM_FRAC, f.aux + 1),
        (NUM_ZERO | NUM_INT | NUM_FRAC, b'e' | b'E') if !integer => (NUM_E, 0),
        (NUM_E, b'+' | b'-') => (NUM_ESIGN, 0),
        (NUM_E | NUM_ESIGN, _) if digit => (NUM_EXP, 1),
        (NUM_EXP, _) if digit && f.aux < MAX_EXP_DIGITS => (NUM_EXP, f.aux + 1),
        _ => return Step::Dead,
    };
    f.pos = pos;
    f.aux = aux;
    Step::Stay
}

/// (the number may end here, another byte may follow)
fn num_status(f: &Frame, integer: bool) -> (bool, bool) {
    match f.pos {
        NUM_ZERO => (true, !integer),
        NUM_INT => (true, !integer || f.aux < MAX_INT_DIGITS),
        NUM_FRAC => (true, true),
        NUM_EXP => (true, f.aux < MAX_EXP_DIGITS),
        _ => (false, true),
    }
}

fn consume(g: &Grammar, f: &mut Frame, b: u8) -> Step {
    match g.node(f.node) {
        Node::Lit(bytes) => {
            if bytes.get(f.pos as usize) != Some(&b) {
                return Step::Dead;
            }
            f.pos += 1;
            if f.pos as usize == bytes.len() {
                Step::Done
            } else {
                Step::Stay
            }
        }
        Node::Ws { max } => {
            if is_ws(b) && f.pos < *max {
                f.pos += 1;
                Step::Stay
            } else {
                Step::Dead
            }
        }
        Node::Str { min, max } => step_str(f, b, *min, *max),
        Node::Num { integer } => step_num(f, b, *integer),
        &Node::Text { ref dfa, max_chars } => {
            // aux: the UTF-8 phase in the low bits, characters so far above (bounded text only).
            let (phase, chars) = (f.aux & TEXT_PHASE, f.aux >> TEXT_COUNT_SHIFT);
            let utf8 = if phase == 0 {
                if max_chars != UNBOUNDED && chars >= max_chars {
                    return Step::Dead;
                }
                utf8_start(b)
            } else {
                utf8_cont(phase, b)
            };
            let Some(utf8) = utf8 else {
                return Step::Dead;
            };
            let next = dfa[f.pos as usize * 256 + b as usize];
            if next == TEXT_DEAD {
                return Step::Dead;
            }
            let chars = if max_chars != UNBOUNDED && utf8 == 0 {
                chars + 1
            } else {
                chars
            };
            f.pos = next as u32;
            f.aux = utf8 | chars << TEXT_COUNT_SHIFT;
            Step::Stay
        }
        Node::Seq(_) | Node::Alt(_) | Node::Repeat { .. } => Step::Dead,
    }
}

/// Expands `stack` until its top is a terminal (or it is empty) and adds every result to `out`.
fn close(g: &Grammar, stack: &mut Vec<Frame>, out: &mut State) {
    loop {
        if stack.len() > MAX_DEPTH {
            return;
        }
        let Some(top) = stack.last_mut() else {
            out.push(stack);
            return;
        };
        match g.node(top.node) {
            Node::Seq(items) => match items.get(top.pos as usize) {
                Some(&child) => {
                    top.pos += 1;
                    stack.push(Frame::new(child));
                }
                None => {
                    stack.pop();
                }
            },
            Node::Alt(items) => {
                stack.pop();
                let Some((&last, rest)) = items.split_last() else {
                    return;
                };
                for &c in rest {
                    let mut fork = stack.clone();
                    fork.push(Frame::new(c));
                    close(g, &mut fork, out);
                }
                stack.push(Frame::new(last));
            }
            &Node::Repeat {
                item,
                sep,
                min,
                max,
            } => {
                let count = top.pos;
                let more = max == UNBOUNDED || count < max;
                if count >= min {
                    if !more {
                        stack.pop();
                        continue;
                    }
                    let mut fork = stack.clone();
                    fork.pop();
                    close(g, &mut fork, out);
                }
                if !more {
                    return;
                }
                if let Some(top) = stack.last_mut() {
                    // Past `min` (and the first item, which has no separator) an unbounded
                    // repetition's count no longer matters: cap it so equal states compare equal.
                    let cap = if max == UNBOUNDED { min.max(1) } else { max };
                    top.pos = count.saturating_add(1).min(cap);
                }
                stack.push(Frame::new(item));
                if let (true, Some(sep)) = (count > 0, sep) {
                    stack.push(Frame::new(sep));
                }
            }
            &Node::Ws { max } => {
                if top.pos < max {
                    out.push(stack);
                }
                stack.pop();
            }
            Node::Lit(_) | Node::Str { .. } => {
                out.push(stack);
                return;
            }
            &Node::Num { integer } => {
                let (can_end, more) = num_status(top, integer);
                if more {
                    out.push(stack);
                }
                if !can_end {
                    return;
                }
                stack.pop();
            }
            Node::Text { .. } => {
                let inside_char = top.aux & TEXT_PHASE != 0;
                out.push(stack);
                if inside_char {
                    return; // inside a character
                }
                stack.pop();
            }
        }
    }
}

/// How a stack reacts to "plain" tokens, which the mask computation can allow without a walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StackKind {
    /// Inside a JSON string without length bounds, between characters: a token of complete
    /// UTF-8 characters other than `"`, `\` and control characters leaves the stack unchanged.
    StrBody,
    /// Inside unbounded raw text between characters, no stop string begun: a token of complete UTF-8
    /// characters without `<` leaves it unchanged (every stop string starts with `<`).
    TextRest,
    Other,
}

pub(crate) fn stack_kind(g: &Grammar, stack: &[Frame]) -> StackKind {
    let Some(top) = stack.last() else {
        return StackKind::Other;
    };
    match g.node(top.node) {
        Node::Str { min: 0, max } if *max == UNBOUNDED && top.pos == STR_BODY => StackKind::StrBody,
        Node::Text { max_chars, .. } if *max_chars == UNBOUNDED && top.pos == 0 && top.aux == 0 => {
            StackKind::TextRest
        }
        _ => StackKind::Other,
    }
}

/// A state of the given stacks of `from` (the mask of a state is the union of its stacks'
/// masks, so they can be computed group by group).
pub(crate) fn select(from: &State, keep: impl Fn(&[Frame]) -> bool, out: &mut State) {
    out.clear();
    for s in from.stacks() {
        if keep(s) {
            out.push(s);
        }
    }
}

/// The state before any byte.
pub(crate) fn initial(g: &Grammar) -> State {
    let mut out = State::default();
    let mut stack = vec![Frame::new(g.root)];
    close(g, &mut stack, &mut out);
    out.normalize();
    out
}

/// `from` advanced by `byte` into `out` (whose buffers are reused); false when no stack survives.
pub(crate) fn advance(
    g: &Grammar,
    from: &State,
    byte: u8,
    out: &mut State,
    scratch: &mut Vec<Frame>,
) -> bool {
    out.clear();
    for stack in from.stacks() {
        if stack.is_empty() {
            continue;
        }
        scratch.clear();
        scratch.extend_from_slice(stack);
        let Some(top) = scratch.last_mut() else {
            continue;
        };
        match consume(g, top, byte) {
            Step::Dead => continue,
            Step::Stay => {}
            Step::Done => {
                scratch.pop();
            }
        }
        close(g, scratch, out);
    }
    out.normalize();
    !out.is_dead()
}

/// A grammar and how far a text has come through it.
#[derive(Debug, Clone)]
pub struct Matcher {
    grammar: Arc<Grammar>,
    state: State,
    spare: State,
    scratch: Vec<Frame>,
}

impl Matcher {
    pub fn new(grammar: Arc<Grammar>) -> Self {
        let state = initial(&grammar);
        Matcher {
            grammar,
            state,
            spare: State::default(),
            scratch: Vec::new(),
        }
    }

    pub fn grammar(&self) -> &Arc<Grammar> {
        &self.grammar
    }

    pub(crate) fn state(&self) -> &State {
        &self.state
    }

    /// Advances over `bytes` if the grammar allows all of them; otherwise leaves the matcher
    /// as it was and returns false.
    pub fn accept_bytes(&mut self, bytes: &[u8]) -> bool {
        let mut cur = self.state.clone();
        for &b in bytes {
            if !advance(&self.grammar, &cur, b, &mut self.spare, &mut self.scratch) {
                return false;
            }
            std::mem::swap(&mut cur, &mut self.spare);
        }
        self.state = cur;
        true
    }

    /// The text so far is a complete match (the sequence may end here).
    pub fn is_accepting(&self) -> bool {
        self.state.is_accepting()
    }

    /// Complete, and nothing may follow: generation should stop.
    pub fn is_finished(&self) -> bool {
        self.state.is_accepting() && !self.state.can_continue()
    }

    /// Whether `text` as a whole is a complete match (for tests and validation).
    pub fn matches(grammar: &Arc<Grammar>, text: &str) -> bool {
        let mut m = Matcher::new(grammar.clone());
        m.accept_bytes(text.as_bytes()) && m.is_accepting()
    }
}
