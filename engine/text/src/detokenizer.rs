//! `Detokenizer`: token ids in one at a time, text deltas out, never a broken UTF-8 character.
//!
//! HF's `DecodeStream` and vLLM re-decode a window of ids (prefix offset vs read offset) and emit
//! what grew, holding back while the tail decodes to U+FFFD. Hearth knows every token's exact
//! bytes (`pieces.rs`), so it appends bytes and emits the longest valid UTF-8 prefix, holding back
//! at most three bytes of an unfinished character. The concatenated deltas plus `finish()` equal
//! `Tokenizer::decode` of the same ids. Stop strings are `stop.rs`'s concern.

use crate::error::TextError;
use crate::tokenizer::Tokenizer;

/// Incremental decoder for one sequence.
#[derive(Debug)]
pub struct Detokenizer<'t> {
    tok: &'t Tokenizer,
    skip_special: bool,
    /// Bytes of an unfinished character.
    pending: Vec<u8>,
    /// Nothing produced yet: SentencePiece vocabularies drop a leading space here.
    at_start: bool,
}

impl<'t> Detokenizer<'t> {
    /// A stream that decodes like `tok.decode(ids, skip_special)`.
    pub fn new(tok: &'t Tokenizer, skip_special: bool) -> Self {
        Detokenizer {
            tok,
            skip_special,
            pending: Vec::new(),
            at_start: true,
        }
    }

    /// The ids continue a prompt: keep the leading space of the first token (`▁Hello` after
    /// `[/INST]` is " Hello"), as vLLM does by priming its window with the prompt.
    pub fn after_prompt(mut self) -> Self {
        self.at_start = false;
        self
    }

    /// Add one token; returns the text that became complete (often empty for byte tokens).
    pub fn step(&mut self, id: u32) -> Result<String, TextError> {
        let bytes = self.tok.token_bytes(id)?;
        if self.skip_special && self.tok.is_special(id) {
            return Ok(String::new());
        }
        let mut bytes = bytes;
        if self.at_start && !bytes.is_empty() {
            self.at_start = false;
            if self.tok.strips_leading_space() && bytes[0] == b' ' {
                bytes = &bytes[1..];
            }
        }
        self.pending.extend_from_slice(bytes);
        Ok(self.drain_complete())
    }

    /// Add several tokens (a speculative-decoding step) and return their joint delta.
    pub fn steps(&mut self, ids: &[u32]) -> Result<String, TextError> {
        let mut out = String::new();
        for &id in ids {
            out.push_str(&self.step(id)?);
        }
        Ok(out)
    }

    /// Whether bytes of an unfinished character are held back.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// End of the sequence: whatever is held back, with U+FFFD for an unfinished character.
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }

    /// Emit every complete character; invalid bytes become U+FFFD exactly as
    /// `String::from_utf8_lossy` would replace them in the whole text.
    fn drain_complete(&mut self) -> String {
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match e.error_len() {
                        // An unfinished character at the end: wait for more bytes.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }
}
