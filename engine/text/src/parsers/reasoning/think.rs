//! The `<think>...</think>` state machine behind every reasoning format.
//!
//! Newlines right after `<think>` and `</think>` and right before `</think>` are dropped, as the
//! chat templates strip them when they render a past turn (`reasoning_content.strip('\n')`,
//! `content.lstrip('\n')`). Trailing newlines of reasoning are therefore held until more
//! reasoning arrives.

use super::ReasoningParser;
use crate::parsers::scan::{drop_leading, find_first, partial_marker_len, take_front};

const THINK_START: &str = "<think>";
const THINK_END: &str = "</think>";

/// What distinguishes one reasoning format from another.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ThinkSpec {
    /// Output that does not open with `<think>` is reasoning anyway (the prompt opened it).
    pub implicit_start: bool,
    /// Markers that end reasoning and belong to the content (tool-call openers).
    pub content_markers: &'static [&'static str],
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Nothing but whitespace seen; a `<think>` may still come.
    Start,
    Reasoning,
    Content,
}

pub(crate) struct ThinkParser {
    spec: ThinkSpec,
    phase: Phase,
    /// Text not yet assigned to reasoning or content.
    buf: String,
    /// Drop newlines at the start of the current phase.
    skip_newlines: bool,
}

impl ThinkParser {
    pub(crate) fn new(spec: ThinkSpec) -> Self {
        Self {
            spec,
            phase: Phase::Start,
            buf: String::new(),
            skip_newlines: false,
        }
    }

    fn step(&mut self, eof: bool) -> (String, String) {
        let (mut reasoning, mut content) = (String::new(), String::new());
        loop {
            if self.skip_newlines {
                drop_leading(&mut self.buf, |c| c == '\n');
                if self.buf.is_empty() {
                    break;
                }
                self.skip_newlines = false;
            }
            match self.phase {
                Phase::Start => {
                    let trimmed = self.buf.trim_start();
                    if trimmed.starts_with(THINK_START) {
                        let n = self.buf.len() - trimmed.len() + THINK_START.len();
                        self.buf.drain(..n);
                        self.enter(Phase::Reasoning);
                    } else if !eof && THINK_START.starts_with(trimmed) {
                        break; // empty, or a partial `<think>`
                    } else {
                        drop_leading(&mut self.buf, char::is_whitespace);
                        let next = if self.spec.implicit_start {
                            Phase::Reasoning
                        } else {
                            Phase::Content
                        };
                        self.enter(next);
                        if self.buf.is_empty() {
                            break;
                        }
                    }
                }
                Phase::Reasoning => {
                    let mut markers = vec![THINK_END];
                    markers.extend_from_slice(self.spec.content_markers);
                    if let Some((at, marker)) = find_first(&self.buf, &markers) {
                        let text = take_front(&mut self.buf, at);
                        reasoning.push_str(text.trim_end_matches('\n'));
                        if marker == THINK_END {
                            self.buf.drain(..THINK_END.len());
                        }
                        self.enter(Phase::Content);
                        self.skip_newlines = marker == THINK_END;
                        continue;
                    }
                    let keep = if eof {
                        0
                    } else {
                        partial_marker_len(&self.buf, &markers)
                    };
                    let end = self.buf.len() - keep;
                    let end = if eof {
                        end
                    } else {
                        self.buf[..end].trim_end_matches('\n').len()
                    };
                    reasoning.push_str(&take_front(&mut self.buf, end));
                    if eof {
                        self.buf.clear();
                    }
                    break;
                }
                Phase::Content => {
                    content.push_str(&self.buf);
                    self.buf.clear();
                    break;
                }
            }
        }
        if eof && self.phase == Phase::Start {
            self.buf.clear(); // only whitespace was generated
        }
        (reasoning, content)
    }

    fn enter(&mut self, phase: Phase) {
        self.phase = phase;
        self.skip_newlines = true;
    }
}

impl ReasoningParser for ThinkParser {
    fn push(&mut self, delta: &str) -> (String, String) {
        self.buf.push_str(delta);
        self.step(false)
    }

    fn finish(&mut self) -> (String, String) {
        self.step(true)
    }
}
