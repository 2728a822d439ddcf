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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use hearth_text::parsers::{reasoning, tool};

    use super::*;

    fn qwen3() -> Option<Tokenizer> {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/tokenizers/qwen3/tokenizer.json");
        if !p.exists() {
            assert!(
                std::env::var("CI").is_err(),
                "{} is required in CI",
                p.display()
            );
            eprintln!("SKIPPING: {} not found", p.display());
            return None;
        }
        Some(Tokenizer::from_file(p).unwrap())
    }

    fn run(
        tok: &Tokenizer,
        text: &str,
        stops: Vec<String>,
    ) -> (ParsedDelta, Vec<ToolCall>, Option<TextStop>) {
        let ids = tok.encode(text, false).unwrap();
        let tools = vec![
            serde_json::json!({"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}),
        ];
        let mut t = SampleText::new(
            tok,
            StopChecker::new(stops, Vec::new(), false).unwrap(),
            Some(reasoning::reasoning_parser("qwen3", true).unwrap()),
            Some(tool::tool_parser("hermes", &tools).unwrap()),
            true,
        );
        let mut acc = ParsedDelta::default();
        for id in ids {
            let d = t.push(id).unwrap();
            // A delta never carries whitespace-only content next to a tool call.
            assert!(d.tool_calls.is_empty() || d.content.trim().is_empty() && d.content.is_empty());
            merge(&mut acc, d);
        }
        merge(&mut acc, t.finish());
        (acc, t.tool_calls().to_vec(), t.stopped.clone())
    }

    #[test]
    fn tokens_flow_through_reasoning_then_tool_parsing() {
        let Some(tok) = qwen3() else { return };
        let text = "<think>\nThe user wants the weather.\n</think>\n\nLet me check.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>";
        let (d, calls, stopped) = run(&tok, text, Vec::new());
        assert_eq!(d.reasoning, "The user wants the weather.");
        assert_eq!(d.content, "Let me check.");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "get_weather");
        let args: serde_json::Value = serde_json::from_str(&calls[0].arguments).unwrap();
        assert_eq!(args, serde_json::json!({"city": "Paris", "days": 3}));
        assert_eq!(d.tool_calls.len(), 1);
        assert!(stopped.is_none());
    }

    /// Recorded model texts in other families' formats, tokenized with the Qwen3 tokenizer (their
    /// markers become ordinary pieces) and fed token by token through the server's pipeline.
    fn run_with(
        tok: &Tokenizer,
        text: &str,
        reasoning_name: &str,
        tool_name: &str,
    ) -> (ParsedDelta, Vec<ToolCall>) {
        let tools = vec![
            serde_json::json!({"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}),
        ];
        let mut t = SampleText::new(
            tok,
            StopChecker::new(Vec::new(), Vec::new(), false).unwrap(),
            Some(reasoning::reasoning_parser(reasoning_name, true).unwrap()),
            Some(tool::tool_parser(tool_name, &tools).unwrap()),
            true,
        );
        let mut acc = ParsedDelta::default();
        for id in tok.encode(text, false).unwrap() {
            merge(&mut acc, t.push(id).unwrap());
        }
        merge(&mut acc, t.finish());
        assert_eq!(t.tool_failures(), 0);
        (acc, t.tool_calls().to_vec())
    }

    #[test]
    fn recorded_glm47_and_deepseek_v31_outputs_become_the_same_calls() {
        let Some(tok) = qwen3() else { return };
        let glm = "Checking the forecast.</think>I'll look it up.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call>";
        let ds = "Checking the forecast.</think>I'll look it up.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\", \"days\": 3}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
        for (text, r, t) in [(glm, "glm45", "glm47"), (ds, "deepseek_v3", "deepseek_v31")] {
            let (d, calls) = run_with(&tok, text, r, t);
            assert_eq!(d.reasoning, "Checking the forecast.", "{t}");
            assert_eq!(d.content, "I'll look it up.", "{t}");
            assert_eq!(calls.len(), 1, "{t}");
            let args: serde_json::Value = serde_json::from_str(&calls[0].arguments).unwrap();
            assert_eq!(args, serde_json::json!({"city": "Paris", "days": 3}), "{t}");
        }
    }

    #[test]
    fn a_stop_string_ends_the_text_before_it() {
        let Some(tok) = qwen3() else { return };
        let (d, calls, stopped) = run(&tok, "One, two, three, four, five.", vec![", four".into()]);
        assert_eq!(d.content, "One, two, three");
        assert!(calls.is_empty());
        assert_eq!(stopped, Some(TextStop::String(", four".into())));
    }
}
