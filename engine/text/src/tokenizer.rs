//! `Tokenizer`: text <-> token ids for one model, plus the special-token facts the server needs
//! (BOS, the ids that end generation, the chat template that came with the vocabulary).
//!
//! Wraps a `tokenizers::Tokenizer`, built either from a Hugging Face tokenizer.json (this file) or
//! from GGUF metadata (`gguf_vocab.rs`). Decoding goes through `pieces.rs` so that one-shot decode
//! and the streaming detokenizer agree byte for byte.

use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

use serde_json::Value;

use crate::error::TextError;
use crate::gguf_vocab::eog_ids;
use crate::hf_config::HfTokenizerConfig;
use crate::pieces::{decode_token, PieceStyle, Pieces};

/// How `Tokenizer::encode_with` treats its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodeOptions {
    /// Add BOS/EOS as the vocabulary asks (`add_bos()`, `add_eos()`).
    pub add_special_tokens: bool,
    /// Match special (control) tokens written in the text, e.g. `<|im_start|>`. With `false` they
    /// are tokenized as plain text (llama.cpp's `parse_special = false`); user-defined added tokens
    /// are matched either way.
    pub parse_special: bool,
}

/// Everything a constructor hands over; see the field docs on `Tokenizer`.
pub(crate) struct TokenizerParts {
    pub inner: tokenizers::Tokenizer,
    pub pieces: Pieces,
    pub bos_token: Option<String>,
    pub eos_token: Option<String>,
    pub bos_id: Option<u32>,
    pub eos_id: Option<u32>,
    /// EOS first, then every other id that ends generation.
    pub eos_ids: Vec<u32>,
    pub add_bos: bool,
    pub add_eos: bool,
    /// BOS/EOS are added here rather than by the tokenizers post-processor.
    pub manual_special: bool,
    pub chat_template: Option<String>,
}

/// A model's tokenizer. Cheap to share behind an `Arc`; every method takes `&self`.
pub struct Tokenizer {
    parts: TokenizerParts,
    /// The same tokenizer with special-token matching off, built on first use.
    literal: OnceLock<tokenizers::Tokenizer>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.vocab_size())
            .field("bos_id", &self.parts.bos_id)
            .field("eos_ids", &self.parts.eos_ids)
            .field("add_bos", &self.parts.add_bos)
            .finish_non_exhaustive()
    }
}

impl Tokenizer {
    pub(crate) fn from_parts(parts: TokenizerParts) -> Self {
        Tokenizer {
            parts,
            literal: OnceLock::new(),
        }
    }

    /// Load a Hugging Face tokenizer.json; tokenizer_config.json, chat_template.jinja and
    /// generation_config.json beside it are read when present.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, TextError> {
        let path = path.as_ref();
        let inner = tokenizers::Tokenizer::from_file(path).map_err(|source| {
            TextError::tokenizer(format!("loading {}", path.display()), source)
        })?;
        let dir = path.parent().unwrap_or_else(|| Path::new("."));
        let config = HfTokenizerConfig::load(dir)?;
        Self::from_hf(inner, config)
    }

    /// Build from an already loaded tokenizers::Tokenizer and the tokenizer_config.json values.
    pub(crate) fn from_hf(
        inner: tokenizers::Tokenizer,
        config: HfTokenizerConfig,
    ) -> Result<Self, TextError> {
        let pieces = hf_pieces(&inner)?;
        let id_of = |t: &Option<String>| t.as_deref().and_then(|t| inner.token_to_id(t));
        let bos_id = id_of(&config.bos_token);
        let eos_id = id_of(&config.eos_token);
        let vocab = inner.get_vocab(true);
        let index: HashMap<&str, u32> = vocab.iter().map(|(k, &v)| (k.as_str(), v)).collect();
        let mut eos_ids = eog_ids([eos_id], &index);
        for id in &config.generation_eos_ids {
            if !eos_ids.contains(id) {
                eos_ids.push(*id);
            }
        }
        // An explicit add_bos_token/add_eos_token wins over the post-processor (transformers
        // rewrites the post-processor from these flags at load time too).
        let explicit = config.add_bos_token.is_some() || config.add_eos_token.is_some();
        let (add_bos, add_eos) = if explicit {
            (
                config.add_bos_token.unwrap_or(false) && bos_id.is_some(),
                config.add_eos_token.unwrap_or(false) && eos_id.is_some(),
            )
        } else {
            let probe = inner
                .encode_fast("", true)
                .map_err(|source| TextError::tokenizer("probing special tokens", source))?;
            let ids = probe.get_ids();
            (
                bos_id.is_some() && ids.first().copied() == bos_id,
                eos_id.is_some() && ids.last().copied() == eos_id,
            )
        };
        Ok(Self::from_parts(TokenizerParts {
            inner,
            pieces,
            bos_token: config.bos_token,
            eos_token: config.eos_token,
            bos_id,
            eos_id,
            eos_ids,
            add_bos,
            add_eos,
            manual_special: explicit,
            chat_template: config.chat_template,
        }))
    }

    /// Tokenize `text`; special tokens written in it (`<|im_start|>`) become their ids.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, TextError> {
        self.encode_with(
            text,
            EncodeOptions {
                add_special_tokens,
                parse_special: true,
            },
        )
    }

    pub fn encode_with(&self, text: &str, opts: EncodeOptions) -> Result<Vec<u32>, TextError> {
        let tk = if opts.parse_special {
            &self.parts.inner
        } else {
            self.literal()
        };
        let hf_special = opts.add_special_tokens && !self.parts.manual_special;
        let enc = tk
            .encode_fast(text, hf_special)
            .map_err(|source| TextError::tokenizer("encoding text", source))?;
        let mut ids = enc.get_ids().to_vec();
        if opts.add_special_tokens && self.parts.manual_special {
            if let (true, Some(bos)) = (self.parts.add_bos, self.parts.bos_id) {
                ids.insert(0, bos);
            }
            if let (true, Some(eos)) = (self.parts.add_eos, self.eos_id()) {
                ids.push(eos);
            }
        }
        Ok(ids)
    }

    fn literal(&self) -> &tokenizers::Tokenizer {
        self.literal.get_or_init(|| {
            let mut tk = self.parts.inner.clone();
            tk.set_encode_special_tokens(true);
            tk
        })
    }

    /// Ids -> text. Invalid UTF-8 (a sequence cut inside a character) becomes U+FFFD.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String, TextError> {
        let bytes = self.parts.pieces.decode_bytes(ids, skip_special)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The text of one token on its own (lossy when the token is part of a character).
    pub fn token_to_piece(&self, id: u32) -> Result<String, TextError> {
        Ok(String::from_utf8_lossy(self.token_bytes(id)?).into_owned())
    }

    /// The exact bytes one token stands for.
    pub fn token_bytes(&self, id: u32) -> Result<&[u8], TextError> {
        self.parts.pieces.bytes(id)
    }

    /// The token's string in the vocabulary (`Ġhello`, `▁hello`, `<|im_end|>`).
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.parts.inner.id_to_token(id)
    }

    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.parts.inner.token_to_id(token)
    }

    /// Control tokens (skipped by `decode(.., skip_special = true)`).
    pub fn is_special(&self, id: u32) -> bool {
        self.parts.pieces.is_special(id)
    }

    /// Number of ids, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.parts.pieces.len()
    }

    pub fn bos_id(&self) -> Option<u32> {
        self.parts.bos_id
    }

    pub fn bos_token(&self) -> Option<&str> {
        self.parts.bos_token.as_deref()
    }

    pub fn eos_token(&self) -> Option<&str> {
        self.parts.eos_token.as_deref()
    }

    /// The vocabulary's EOS id, when it names one.
    pub fn eos_id(&self) -> Option<u32> {
        self.parts.eos_id
    }

    /// Every id that ends generation: EOS, then end-of-turn tokens such as `<|im_end|>`,
    /// `<|eot_id|>`, `<|endoftext|>` and generation_config.json's `eos_token_id`s.
    pub fn eos_ids(&self) -> &[u32] {
        &self.parts.eos_ids
    }

    pub fn chat_template(&self) -> Option<&str> {
        self.parts.chat_template.as_deref()
    }

    /// Whether `encode(.., add_special_tokens = true)` starts with BOS.
    pub fn add_bos(&self) -> bool {
        self.parts.add_bos
    }

    /// Whether `encode(.., add_special_tokens = true)` ends with EOS.
    pub fn add_eos(&self) -> bool {
        self.parts.add_eos
    }

    /// SentencePiece-style decoding drops the leading space of a text (see `Detokenizer`).
    pub(crate) fn strips_leading_space(&self) -> bool {
        self.parts.pieces.strip_leading_space()
    }

    /// The underlying `tokenizers` object.
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.parts.inner
    }
}

/// Which piece style a tokenizer.json decoder implies, and whether it strips a leading space.
fn decoder_style(decoder: &Value) -> Option<(PieceStyle, bool)> {
    let ty = decoder.get("type").and_then(Value::as_str)?;
    match ty {
        "ByteLevel" => Some((PieceStyle::ByteLevel, false)),
        "Metaspace" => {
            let scheme = decoder.get("prepend_scheme").and_then(Value::as_str);
            let legacy = decoder.get("add_prefix_space").and_then(Value::as_bool);
            Some((
                PieceStyle::Spm,
                scheme.map_or(legacy.unwrap_or(true), |s| s != "never"),
            ))
        }
        "Sequence" => {
            let steps = decoder.get("decoders").and_then(Value::as_array)?;
            let has = |t: &str| {
                steps
                    .iter()
                    .any(|d| d.get("type").and_then(Value::as_str) == Some(t))
            };
            if has("ByteLevel") {
                Some((PieceStyle::ByteLevel, false))
            } else if has("ByteFallback") || has("Replace") || has("Metaspace") {
                let strip = has("Strip")
                    || steps
                        .iter()
                        .filter(|d| d.get("type").and_then(Value::as_str) == Some("Metaspace"))
                        .any(|d| decoder_style(d).is_some_and(|(_, s)| s));
                Some((PieceStyle::Spm, strip))
            } else {
                None
            }
        }
        _ => None,
    }
}

/// The piece table of a tokenizer.json tokenizer.
fn hf_pieces(inner: &tokenizers::Tokenizer) -> Result<Pieces, TextError> {
    let added = inner.get_added_tokens_decoder();
    let max_added = added.keys().max().map_or(0, |&m| m as usize + 1);
    let n = inner.get_vocab_size(true).max(max_added);
    let style = match inner.get_decoder() {
        Some(d) => {
            let json = serde_json::to_value(d).map_err(|e| {
                TextError::tokenizer("reading the decoder configuration", Box::new(e))
            })?;
            decoder_style(&json)
        }
        None => None,
    };
    let mut bytes = Vec::with_capacity(n);
    let mut special = Vec::with_capacity(n);
    for id in 0..n as u32 {
        let piece = match (inner.id_to_token(id), style) {
            (Some(tok), Some((style, _))) => decode_token(style, &tok),
            // No decoder we understand: let tokenizers decode the token on its own.
            (Some(_), None) => inner
                .decode(&[id], false)
                .map_err(|source| TextError::tokenizer("decoding a token", source))?
                .into_bytes(),
            (None, _) => Vec::new(),
        };
        bytes.push(piece.into_boxed_slice());
        special.push(added.get(&id).is_some_and(|t| t.special));
    }
    let strip = style.is_some_and(|(_, s)| s);
    Ok(Pieces::new(bytes, special, strip))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decoder_styles() {
        assert_eq!(
            decoder_style(&json!({"type": "ByteLevel"})),
            Some((PieceStyle::ByteLevel, false))
        );
        let llama2 = json!({"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}
        ]});
        assert_eq!(decoder_style(&llama2), Some((PieceStyle::Spm, true)));
        assert_eq!(
            decoder_style(
                &json!({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never"})
            ),
            Some((PieceStyle::Spm, false))
        );
        assert_eq!(decoder_style(&json!({"type": "WordPiece"})), None);
    }
}
