//! `StopChecker`: stop strings and stop token ids for one generated sequence.
//!
//! Text arrives as detokenizer deltas; a stop string may straddle several of them. The checker
//! holds back the longest tail that could still become a stop string, never emits text past a
//! matched stop string (nor the stop string itself unless `include_stop_str`), and says which
//! condition fired. A stop token's own text is dropped unless `include_stop_str`, as vLLM does.
//! EOS handling (`ignore_eos`, `min_tokens`) is the caller's: it decides which ids to pass in.

use crate::error::TextError;

/// Why a sequence stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// A stop token id (EOS, `<|im_end|>`, a request's `stop_token_ids`).
    Token(u32),
    /// `stops[index]` matched.
    String { index: usize, stop: String },
}

/// The result of feeding one token or delta.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StopOutput {
    /// Text that is safe to send now.
    pub text: String,
    /// Set once, when the sequence must end; later input is ignored.
    pub stopped: Option<StopReason>,
}

#[derive(Debug, Clone)]
pub struct StopChecker {
    stops: Vec<String>,
    stop_ids: Vec<u32>,
    include_stop_str: bool,
    /// Emitted-later text: a suffix that is a proper prefix of some stop string.
    held: String,
    stopped: bool,
}

impl StopChecker {
    /// `stops` must not contain an empty string (it would match before any output).
    pub fn new(
        stops: Vec<String>,
        stop_token_ids: Vec<u32>,
        include_stop_str: bool,
    ) -> Result<Self, TextError> {
        if let Some(i) = stops.iter().position(String::is_empty) {
            return Err(TextError::InvalidStop(format!(
                "stop[{i}] is an empty string; stop strings must contain at least one character"
            )));
        }
        Ok(StopChecker {
            stops,
            stop_ids: stop_token_ids,
            include_stop_str,
            held: String::new(),
            stopped: false,
        })
    }

    pub fn is_stop_token(&self, id: u32) -> bool {
        self.stop_ids.contains(&id)
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Feed a generated token and the text delta the detokenizer produced for it.
    pub fn push_token(&mut self, id: u32, delta: &str) -> StopOutput {
        if self.stopped {
            return StopOutput::default();
        }
        if self.is_stop_token(id) {
            self.stopped = true;
            let mut text = std::mem::take(&mut self.held);
            if self.include_stop_str {
                text.push_str(delta);
            }
            return StopOutput {
                text,
                stopped: Some(StopReason::Token(id)),
            };
        }
        self.push_text(delta)
    }

    /// Feed text only (no token-id check).
    pub fn push_text(&mut self, delta: &str) -> StopOutput {
        if self.stopped {
            return StopOutput::default();
        }
        let mut text = std::mem::take(&mut self.held);
        text.push_str(delta);
        if let Some((start, index)) = self.earliest_match(&text) {
            self.stopped = true;
            let stop = self.stops[index].clone();
            let end = if self.include_stop_str {
                start + stop.len()
            } else {
                start
            };
            text.truncate(end);
            return StopOutput {
                text,
                stopped: Some(StopReason::String { index, stop }),
            };
        }
        let keep = self.partial_suffix_len(&text);
        self.held = text.split_off(text.len() - keep);
        StopOutput {
            text,
            stopped: None,
        }
    }

    /// The generation ended for another reason (length, abort): release the held text.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }

    /// Earliest start of any stop string; on a tie the one listed first.
    fn earliest_match(&self, text: &str) -> Option<(usize, usize)> {
        self.stops
            .iter()
            .enumerate()
            .filter_map(|(i, s)| text.find(s.as_str()).map(|pos| (pos, i)))
            .min()
    }

    /// Length of the longest suffix of `text` that is a proper prefix of a stop string.
    fn partial_suffix_len(&self, text: &str) -> usize {
        let longest = self.stops.iter().map(String::len).max().unwrap_or(0);
        let lowest = text.len().saturating_sub(longest.saturating_sub(1));
        text.char_indices()
            .map(|(i, _)| i)
            .filter(|&i| i >= lowest)
            .find(|&i| {
                let tail = &text[i..];
                self.stops
                    .iter()
                    .any(|s| s.len() > tail.len() && s.starts_with(tail))
            })
            .map_or(0, |i| text.len() - i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checker(stops: &[&str], include: bool) -> StopChecker {
        StopChecker::new(
            stops.iter().map(|s| (*s).to_owned()).collect(),
            vec![7],
            include,
        )
        .expect("valid")
    }

    /// Feed deltas, return (all emitted text, reason).
    fn run(c: &mut StopChecker, deltas: &[&str]) -> (String, Option<StopReason>) {
        let mut out = String::new();
        for d in deltas {
            let o = c.push_text(d);
            out.push_str(&o.text);
            if o.stopped.is_some() {
                return (out, o.stopped);
            }
        }
        out.push_str(&c.finish());
        (out, None)
    }

    #[test]
    fn stop_string_split_across_deltas() {
        let mut c = checker(&["</answer>"], false);
        assert_eq!(c.push_text("The result</").text, "The result");
        assert_eq!(c.push_text("ans").text, "");
        let o = c.push_text("wer> trailing");
        assert_eq!(o.text, "");
        assert_eq!(
            o.stopped,
            Some(StopReason::String {
                index: 0,
                stop: "</answer>".into()
            })
        );
        assert!(c.push_text("more").text.is_empty());
    }

    #[test]
    fn held_text_is_released_when_the_prefix_breaks() {
        let mut c = checker(&["STOP"], false);
        assert_eq!(c.push_text("a ST").text, "a ");
        assert_eq!(c.push_text("OX").text, "STOX");
        assert_eq!(c.push_text("S").text, "");
        assert_eq!(c.finish(), "S");
    }

    #[test]
    fn include_stop_str_keeps_the_stop_and_nothing_after() {
        let mut c = checker(&["\n\n"], true);
        let (text, why) = run(&mut c, &["line one\n", "\nline two"]);
        assert_eq!(text, "line one\n\n");
        assert!(matches!(why, Some(StopReason::String { index: 0, .. })));
    }

    #[test]
    fn earliest_stop_wins_then_list_order() {
        let mut c = checker(&["world", "lo w", "o"], false);
        let (text, why) = run(&mut c, &["hello world"]);
        assert_eq!(text, "hel");
        assert_eq!(
            why,
            Some(StopReason::String {
                index: 1,
                stop: "lo w".into()
            })
        );
        let mut c = checker(&["ab", "a"], false);
        let (_, why) = run(&mut c, &["xab"]);
        assert_eq!(
            why,
            Some(StopReason::String {
                index: 0,
                stop: "ab".into()
            })
        );
    }

    #[test]
    fn stop_token_flushes_held_text_and_drops_its_own_text() {
        let mut c = checker(&["END"], false);
        assert_eq!(c.push_token(1, "x E").text, "x ");
        let o = c.push_token(7, "<|im_end|>");
        assert_eq!(o.text, "E");
        assert_eq!(o.stopped, Some(StopReason::Token(7)));
        let mut c = checker(&[], true);
        assert_eq!(c.push_token(7, "</s>").text, "</s>");
    }

    #[test]
    fn multibyte_text_is_held_on_char_boundaries() {
        let mut c = checker(&["你好吗"], false);
        assert_eq!(c.push_text("说你").text, "说");
        assert_eq!(c.push_text("好").text, "");
        let (text, why) = run(&mut c, &["呀"]);
        assert_eq!(text, "你好呀");
        assert!(why.is_none());
    }

    #[test]
    fn empty_stop_string_is_rejected() {
        let err =
            StopChecker::new(vec!["ok".into(), String::new()], vec![], false).expect_err("empty");
        assert!(err.to_string().contains("stop[1]"), "{err}");
    }
}
