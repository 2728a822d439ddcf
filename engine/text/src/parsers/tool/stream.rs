//! The streaming driver shared by every tool-call format.
//!
//! States: `Text` (plain content), `Block` (inside a tool-calls block, between calls; DeepSeek
//! only) and `Call` (inside one call, buffering until its end marker). A call is parsed when its
//! end marker arrives and emitted whole, so a call that arrives in one chunk and one that arrives
//! a byte at a time produce the same delta.
//!
//! Whitespace that only separates content from calls (before a call, between calls, after the
//! last call) is dropped, so the server never sends `content: "\n"` next to tool calls. To keep
//! streaming equal to one-shot parsing, trailing whitespace of content is held until it is known
//! whether a call follows.

use super::schema::ToolSchemas;
use super::ToolParser;
use crate::parsers::scan::{drop_leading, find_first, partial_marker_len, take_front};
use crate::parsers::{new_call_id, ParsedDelta, ToolCall, ToolCallDelta};

/// The markers of one format.
#[derive(Debug, Clone, Copy)]
pub(super) struct Markers {
    /// Opens a call (`<tool_call>`), or a block of calls when `block` is set.
    pub open: &'static str,
    /// For block formats: (call begin, block end). The call end is `call_end` either way.
    pub block: Option<(&'static str, &'static str)>,
    pub call_end: &'static str,
}

/// One call's name and arguments as parsed from its body.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ParsedCall {
    pub name: String,
    /// A serialized JSON object.
    pub arguments: String,
}

/// How one format writes a call.
pub(super) trait CallSyntax: Send {
    fn markers(&self) -> Markers;
    /// Parses the text between a call's begin and end markers; `Err` says what is wrong.
    fn parse_call(&self, body: &str, schemas: &ToolSchemas) -> Result<ParsedCall, String>;
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Text,
    Block,
    Call,
}

pub(super) struct StreamParser<S> {
    syntax: S,
    markers: Markers,
    schemas: ToolSchemas,
    state: State,
    buf: String,
    /// A call just ended: whitespace that follows is separation, not content.
    after_call: bool,
    /// In `Call`: markers cannot start before this offset of `buf` (it was searched already), so
    /// a long call streamed in small pieces is scanned once, not once per piece.
    scanned: usize,
    calls: Vec<ToolCall>,
    /// Why each failed call did not parse, in order.
    failures: Vec<String>,
}

impl<S: CallSyntax> StreamParser<S> {
    pub(super) fn new(syntax: S, schemas: ToolSchemas) -> Self {
        let markers = syntax.markers();
        Self {
            syntax,
            markers,
            schemas,
            state: State::Text,
            buf: String::new(),
            after_call: false,
            scanned: 0,
            calls: Vec::new(),
            failures: Vec::new(),
        }
    }

    /// The marker a call starts with.
    fn call_begin(&self) -> &'static str {
        self.markers
            .block
            .map_or(self.markers.open, |(begin, _)| begin)
    }

    fn step(&mut self, eof: bool) -> ParsedDelta {
        let mut out = ParsedDelta::default();
        loop {
            let progressed = match self.state {
                State::Text => self.text(eof, &mut out),
                State::Block => self.block(eof),
                State::Call => self.call(eof, &mut out),
            };
            if !progressed {
                return out;
            }
        }
    }

    /// Returns whether the state changed (the loop goes on).
    fn text(&mut self, eof: bool, out: &mut ParsedDelta) -> bool {
        if self.after_call {
            drop_leading(&mut self.buf, char::is_whitespace);
            if self.buf.is_empty() {
                return false;
            }
            self.after_call = false;
        }
        let open = self.markers.open;
        if let Some(at) = self.buf.find(open) {
            let before = take_front(&mut self.buf, at);
            out.content.push_str(before.trim_end());
            self.buf.drain(..open.len());
            self.state = if self.markers.block.is_some() {
                State::Block
            } else {
                State::Call
            };
            return true;
        }
        let end = if eof {
            self.buf.len()
        } else {
            let end = self.buf.len() - partial_marker_len(&self.buf, &[open]);
            self.buf[..end].trim_end().len()
        };
        out.content.push_str(&take_front(&mut self.buf, end));
        false
    }

    fn block(&mut self, eof: bool) -> bool {
        let Some((begin, block_end)) = self.markers.block else {
            unreachable!("Block state is only entered by block formats")
        };
        drop_leading(&mut self.buf, char::is_whitespace);
        if self.buf.starts_with(begin) {
            self.buf.drain(..begin.len());
            self.state = State::Call;
            return true;
        }
        if self.buf.starts_with(block_end) {
            self.buf.drain(..block_end.len());
            self.state = State::Text;
            self.after_call = true;
            return true;
        }
        let undecided =
            begin.starts_with(self.buf.as_str()) || block_end.starts_with(self.buf.as_str());
        if self.buf.is_empty() || (undecided && !eof) {
            return false;
        }
        // Text inside a block that is not a call: the model moved on without closing the block.
        self.state = State::Text;
        self.after_call = true;
        true
    }

    fn call(&mut self, eof: bool, out: &mut ParsedDelta) -> bool {
        let begin = self.call_begin();
        let end_marker = self.markers.call_end;
        let next_state = if self.markers.block.is_some() {
            State::Block
        } else {
            State::Text
        };
        let found = find_first(&self.buf[self.scanned..], &[end_marker, begin])
            .map(|(at, marker)| (at + self.scanned, marker));
        if found.is_some() || eof {
            self.scanned = 0;
        }
        match found {
            Some((at, marker)) if marker == end_marker => {
                let body = take_front(&mut self.buf, at);
                self.buf.drain(..end_marker.len());
                match self.syntax.parse_call(&body, &self.schemas) {
                    Ok(call) => {
                        let call = ToolCall {
                            id: new_call_id(),
                            name: call.name,
                            arguments: call.arguments,
                        };
                        out.tool_calls.push(ToolCallDelta {
                            index: self.calls.len(),
                            id: Some(call.id.clone()),
                            name: Some(call.name.clone()),
                            arguments: call.arguments.clone(),
                        });
                        self.calls.push(call);
                        self.after_call = true;
                    }
                    Err(why) => {
                        self.failures.push(format!("tool call {body:?}: {why}"));
                        out.content.push_str(&format!("{begin}{body}{end_marker}"));
                    }
                }
                self.state = next_state;
                true
            }
            Some((at, _)) => {
                // A new call began before this one ended: this one is unterminated.
                let body = take_front(&mut self.buf, at);
                self.buf.drain(..begin.len());
                self.failures.push(format!(
                    "tool call {body:?}: no {end_marker} before the next {begin}"
                ));
                out.content.push_str(&format!("{begin}{body}"));
                true
            }
            None if eof => {
                self.failures.push(format!(
                    "tool call {:?}: generation ended before {end_marker}",
                    self.buf
                ));
                out.content.push_str(begin);
                out.content.push_str(&self.buf);
                self.buf.clear();
                self.state = State::Text;
                false
            }
            None => {
                let mut from = self
                    .buf
                    .len()
                    .saturating_sub(end_marker.len().max(begin.len()));
                while !self.buf.is_char_boundary(from) {
                    from -= 1;
                }
                self.scanned = from;
                false
            }
        }
    }
}

impl<S: CallSyntax> ToolParser for StreamParser<S> {
    fn push(&mut self, delta: &str) -> ParsedDelta {
        self.buf.push_str(delta);
        self.step(false)
    }

    fn finish(&mut self) -> ParsedDelta {
        self.step(true)
    }

    fn calls(&self) -> &[ToolCall] {
        &self.calls
    }

    fn failures(&self) -> usize {
        self.failures.len()
    }

    fn failure_reasons(&self) -> &[String] {
        &self.failures
    }
}
