//! The text side of one sample, token by token: incremental detokenization, stop strings,
//! then the reasoning parser (thinking vs answer), then the tool parser (calls vs content).
//! Streaming and non-streaming responses both run through it, so they cannot disagree.

use hearth_text::parsers::reasoning::ReasoningParser;
use hearth_text::parsers::tool::ToolParser;
use hearth_text::parsers::{ParsedDelta, ToolCall};
use hearth_text::{Detokenizer, StopChecker, StopReason, TextError, Tokenizer};

/// What ended the text of a sample, if the text side ended it.
#[derive(Debug, Clone, PartialEq)]
pub enum TextStop {
    /// A stop string matched (the engine request must be aborted).
    String(String),
}

pub struct SampleText<'t> {
    detok: Detokenizer<'t>,
    stop: StopChecker,
    reasoning: Option<Box<dyn ReasoningParser>>,
    tools: Option<Box<dyn ToolParser>>,
    pub stopped: Option<TextStop>,
}

impl<'t> SampleText<'t> {
    pub fn new(
        tok: &'t Tokenizer,
        stop: StopChecker,
        reasoning: Option<Box<dyn ReasoningParser>>,
        tools: Option<Box<dyn ToolParser>>,
        skip_special: bool,
    ) -> Self {
        SampleText {
            detok: Detokenizer::new(tok, skip_special).after_prompt(),
            stop,
            reasoning,
            tools,
            stopped: None,
        }
    }

    /// One generated token; returns what can be sent now.
    pub fn push(&mut self, token: u32) -> Result<ParsedDelta, TextError> {
        if self.stopped.is_some() {
            return Ok(ParsedDelta::default());
        }
        let delta = self.detok.step(token)?;
        let o = self.stop.push_token(token, &delta);
        if let Some(StopReason::String { stop, .. }) = o.stopped {
            self.stopped = Some(TextStop::String(stop));
        }
        Ok(self.route(&o.text))
    }

    /// End of the sample: flush everything held back.
    pub fn finish(&mut self) -> ParsedDelta {
        let tail = if self.stopped.is_some() {
            self.stop.finish()
        } else {
            let rest = self.detok.finish();
            let mut t = self.stop.push_text(&rest).text;
            t.push_str(&self.stop.finish());
            t
        };
        let mut d = self.route(&tail);
        if let Some(r) = self.reasoning.as_mut() {
            let (reasoning, content) = r.finish();
            d.reasoning.push_str(&reasoning);
            let more = self.tool_push(&content);
            merge(&mut d, more);
        }
        if let Some(t) = self.tools.as_mut() {
            let more = t.finish();
            merge(&mut d, more);
        }
        d
    }

    pub fn tool_calls(&self) -> &[ToolCall] {
        self.tools.as_ref().map_or(&[], |t| t.calls())
    }

    pub fn tool_failures(&self) -> usize {
        self.tools.as_ref().map_or(0, |t| t.failures())
    }

    fn route(&mut self, text: &str) -> ParsedDelta {
        if text.is_empty() {
            return ParsedDelta::default();
        }
        let (reasoning, content) = match self.reasoning.as_mut() {
            Some(r) => r.push(text),
            None => (String::new(), text.to_owned()),
        };
        let mut d = self.tool_push(&content);
        d.reasoning = reasoning;
        d
    }

    fn tool_push(&mut self, content: &str) -> ParsedDelta {
        match self.tools.as_mut() {
            Some(t) if !content.is_empty() => t.push(content),
            Some(_) => ParsedDelta::default(),
            None => ParsedDelta {
                content: content.to_owned(),
                ..Default::default()
            },
        }
    }
}

fn merge(a: &mut ParsedDelta, b: ParsedDelta) {
    a.content.push_str(&b.content);
    a.reasoning.push_str(&b.reasoning);
    a.tool_calls.extend(b.tool_calls);
}
