//! `GgufVocab`: the tokenizer metadata of a GGUF file as plain data, and the `tokenizers::Tokenizer`
//! that reproduces llama.cpp's tokenization of it.
//!
//! Supported `tokenizer.ggml.model`s:
//! - `gpt2`: byte-level BPE from `tokens` + `merges`, pre-tokenizer from `tokenizer.ggml.pre`
//!   (`gguf_pre.rs`).
//! - `llama`: SentencePiece BPE. llama.cpp merges the adjacent pair whose concatenation is the
//!   highest-scoring token; a BPE whose merge ranks are the tokens' scores in descending order does
//!   the same (Hugging Face's `SentencePieceExtractor` builds Llama's merges exactly this way).
//!   Byte-fallback tokens `<0xXX>`, `▁` for spaces, optional space prefix.
//! - `gemma4`: BPE over raw UTF-8 with `▁` for spaces, explicit merges and `<0xXX>` fallback.
//!
//! Reading the GGUF file is hearth-models'; this file only sees the values.

use std::collections::HashMap;

use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::{Prepend, Replace, Sequence as NormalizerSequence};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence as PreSequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{
    AddedToken, DecoderWrapper, NormalizerWrapper, PreTokenizerWrapper, SplitDelimiterBehavior,
};

use crate::error::TextError;
use crate::gguf_pre::{pre_spec, PreSpec};
use crate::pieces::{decode_token, PieceStyle, Pieces};
use crate::tokenizer::{Tokenizer, TokenizerParts};

/// The `tokenizer.*` metadata of a GGUF file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GgufVocab {
    /// `tokenizer.ggml.model`: `gpt2`, `llama`, `gemma4`, `bert`, `t5`, ...
    pub model: String,
    /// `tokenizer.ggml.pre`: the pre-tokenizer name of a BPE vocabulary.
    pub pre: Option<String>,
    pub tokens: Vec<String>,
    pub scores: Option<Vec<f32>>,
    /// `tokenizer.ggml.token_type`, values of [`GgufTokenType`].
    pub token_types: Option<Vec<i32>>,
    /// `tokenizer.ggml.merges`: `"left right"` strings, highest priority first.
    pub merges: Option<Vec<String>>,
    pub bos_id: Option<u32>,
    pub eos_id: Option<u32>,
    /// `tokenizer.ggml.eot_token_id` (end of turn, e.g. `<|eot_id|>`).
    pub eot_id: Option<u32>,
    /// `tokenizer.ggml.eom_token_id` (end of message, e.g. `<|eom_id|>`).
    pub eom_id: Option<u32>,
    pub unk_id: Option<u32>,
    pub pad_id: Option<u32>,
    /// `tokenizer.ggml.add_bos_token`, or [`GgufVocab::default_add_bos`] when the key is absent.
    pub add_bos: bool,
    /// `tokenizer.ggml.add_eos_token`, false when absent.
    pub add_eos: bool,
    /// `tokenizer.ggml.add_space_prefix`; absent means llama.cpp's default (true for `llama`).
    pub add_space_prefix: Option<bool>,
    /// `tokenizer.chat_template`.
    pub chat_template: Option<String>,
}

/// llama.cpp's `llama_token_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GgufTokenType {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
}

impl GgufTokenType {
    pub fn from_i32(v: i32) -> Self {
        match v {
            1 => Self::Normal,
            2 => Self::Unknown,
            3 => Self::Control,
            4 => Self::UserDefined,
            5 => Self::Unused,
            6 => Self::Byte,
            _ => Self::Undefined,
        }
    }
}

/// Token texts llama.cpp treats as end-of-generation (and as control tokens) whatever their type.
pub(crate) const EOG_TOKENS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

impl GgufVocab {
    /// llama.cpp's default for `add_bos` when `tokenizer.ggml.add_bos_token` is absent.
    pub fn default_add_bos(model: &str, pre: Option<&str>) -> bool {
        match model {
            "llama" | "bert" | "gemma4" => true,
            "gpt2" => pre_spec(model, pre).is_ok_and(|s| s.default_add_bos),
            _ => false,
        }
    }

    fn token_type(&self, id: usize) -> GgufTokenType {
        self.token_types
            .as_ref()
            .and_then(|t| t.get(id))
            .map_or(GgufTokenType::Normal, |&t| GgufTokenType::from_i32(t))
    }

    fn unsupported(&self, reason: &str) -> TextError {
        TextError::UnsupportedVocab {
            model: self.model.clone(),
            pre: self.pre.clone(),
            reason: reason.to_owned(),
        }
    }

    fn validate(&self) -> Result<(), TextError> {
        let n = self.tokens.len();
        if n == 0 {
            return Err(TextError::InvalidVocab(
                "tokenizer.ggml.tokens is empty".into(),
            ));
        }
        if let Some(s) = &self.scores {
            if s.len() < n {
                return Err(TextError::InvalidVocab(format!(
                    "tokenizer.ggml.scores has {} entries for {n} tokens",
                    s.len()
                )));
            }
        }
        if let Some(t) = &self.token_types {
            if t.len() < n {
                return Err(TextError::InvalidVocab(format!(
                    "tokenizer.ggml.token_type has {} entries for {n} tokens",
                    t.len()
                )));
            }
        }
        Ok(())
    }
}

/// What differs between the supported GGUF tokenizer models.
struct Flavor {
    style: PieceStyle,
    add_space_prefix: bool,
    default_bos: Option<u32>,
    default_eos: Option<u32>,
}

impl Tokenizer {
    /// Build a tokenizer that reproduces llama.cpp's tokenization of a GGUF vocabulary.
    pub fn from_gguf(vocab: &GgufVocab) -> Result<Self, TextError> {
        vocab.validate()?;
        let tokens = token_texts(vocab);
        let index: HashMap<&str, u32> = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.as_str(), i as u32))
            .collect();
        if index.len() != tokens.len() {
            return Err(TextError::InvalidVocab(
                "tokenizer.ggml.tokens holds the same text twice".into(),
            ));
        }
        let bpe_vocab: Vocab = index.iter().map(|(t, &i)| ((*t).to_owned(), i)).collect();

        let (flavor, mut inner) = match vocab.model.as_str() {
            "gpt2" => build_gpt2(vocab, &index, bpe_vocab)?,
            "llama" => build_spm(vocab, &tokens, &index, bpe_vocab)?,
            "gemma4" => build_gemma4(vocab, &index, bpe_vocab)?,
            "bert" => {
                return Err(vocab.unsupported(
                    "WordPiece (bert) is an embedding-model vocabulary; Hearth serves generative models",
                ))
            }
            "t5" => {
                return Err(vocab.unsupported(
                    "Unigram (t5) needs SentencePiece's precompiled-charsmap normalizer, not implemented",
                ))
            }
            _ => {
                return Err(vocab.unsupported(
                    "unknown tokenizer model; supported: gpt2 (byte-level BPE), llama (SentencePiece), gemma4",
                ))
            }
        };

        let special = special_flags(vocab, &tokens);
        let added: Vec<AddedToken> = tokens
            .iter()
            .enumerate()
            .filter(|&(i, _)| special[i] || vocab.token_type(i) == GgufTokenType::UserDefined)
            .map(|(i, t)| AddedToken::from(t.clone(), special[i]).normalized(false))
            .collect();
        inner
            .add_tokens(added)
            .map_err(tk_err("registering special tokens"))?;

        let pieces = Pieces::new(
            tokens
                .iter()
                .enumerate()
                .map(|(i, t)| piece_bytes(vocab.token_type(i), flavor.style, t).into_boxed_slice())
                .collect(),
            special,
            flavor.add_space_prefix && flavor.style == PieceStyle::Spm,
        );

        let in_range = |id: Option<u32>| id.filter(|&i| (i as usize) < tokens.len());
        let bos_id = in_range(vocab.bos_id.or(flavor.default_bos));
        let eos_id = in_range(vocab.eos_id.or(flavor.default_eos));
        let eos_ids = eog_ids(
            [eos_id, in_range(vocab.eot_id), in_range(vocab.eom_id)],
            &index,
        );
        let token_text = |id: Option<u32>| id.map(|i| tokens[i as usize].clone());
        Ok(Tokenizer::from_parts(TokenizerParts {
            inner,
            pieces,
            bos_token: token_text(bos_id),
            eos_token: token_text(eos_id),
            bos_id,
            eos_id,
            eos_ids,
            // llama.cpp forces BOS on for Gemma 4 whatever the file says.
            add_bos: (vocab.add_bos || vocab.model == "gemma4") && bos_id.is_some(),
            add_eos: vocab.add_eos && eos_id.is_some(),
            manual_special: true,
            chat_template: vocab.chat_template.clone(),
        }))
    }
}

/// Token texts with llama.cpp's placeholder for empty ones.
fn token_texts(vocab: &GgufVocab) -> Vec<String> {
    vocab
        .tokens
        .iter()
        .enumerate()
        .map(|(i, t)| {
            if t.is_empty() {
                format!("[EMPTY_{i}]")
            } else {
                t.clone()
            }
        })
        .collect()
}

/// Which ids are special: control and unknown tokens, plus the end-of-generation texts llama.cpp
/// promotes to control.
fn special_flags(vocab: &GgufVocab, tokens: &[String]) -> Vec<bool> {
    tokens
        .iter()
        .enumerate()
        .map(|(i, t)| {
            matches!(
                vocab.token_type(i),
                GgufTokenType::Control | GgufTokenType::Unknown
            ) || EOG_TOKENS.contains(&t.as_str())
        })
        .collect()
}

fn piece_bytes(ty: GgufTokenType, style: PieceStyle, text: &str) -> Vec<u8> {
    match ty {
        GgufTokenType::Control | GgufTokenType::Unknown | GgufTokenType::UserDefined => {
            text.as_bytes().to_vec()
        }
        _ => decode_token(style, text),
    }
}

/// EOS first, then eot/eom, then every end-of-generation text present in the vocabulary.
pub(crate) fn eog_ids<const N: usize>(
    first: [Option<u32>; N],
    index: &HashMap<&str, u32>,
) -> Vec<u32> {
    let mut ids: Vec<u32> = Vec::new();
    let named = EOG_TOKENS.iter().filter_map(|t| index.get(t).copied());
    for id in first.into_iter().flatten().chain(named) {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

fn tk_err(context: &str) -> impl FnOnce(tokenizers::Error) -> TextError + '_ {
    move |source| TextError::tokenizer(context, source)
}

/// `"left right"` merges, split the way llama.cpp does (first space after byte 0); merges whose
/// parts or result are not tokens are dropped, as tokenizers' BPE would refuse them.
fn parse_merges(merges: &[String], index: &HashMap<&str, u32>) -> Vec<(String, String)> {
    merges
        .iter()
        .filter_map(|m| {
            let pos = m.bytes().skip(1).position(|b| b == b' ')? + 1;
            let (a, b) = (&m[..pos], &m[pos + 1..]);
            let joined = format!("{a}{b}");
            (index.contains_key(a) && index.contains_key(b) && index.contains_key(joined.as_str()))
                .then(|| (a.to_owned(), b.to_owned()))
        })
        .collect()
}

fn build_gpt2(
    vocab: &GgufVocab,
    index: &HashMap<&str, u32>,
    bpe_vocab: Vocab,
) -> Result<(Flavor, tokenizers::Tokenizer), TextError> {
    let spec: PreSpec = pre_spec(&vocab.model, vocab.pre.as_deref())?;
    let merges = vocab
        .merges
        .as_deref()
        .ok_or_else(|| vocab.unsupported("gpt2 vocabulary without tokenizer.ggml.merges"))?;
    let bpe = BPE::builder()
        .vocab_and_merges(bpe_vocab, parse_merges(merges, index))
        .ignore_merges(spec.ignore_merges)
        .build()
        .map_err(tk_err("building the BPE model"))?;
    let mut inner = tokenizers::Tokenizer::new(bpe);
    let mut steps: Vec<PreTokenizerWrapper> = Vec::new();
    for re in &spec.splits {
        let split = Split::new(
            SplitPattern::Regex((*re).to_owned()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(tk_err("compiling a pre-tokenizer regex"))?;
        steps.push(split.into());
    }
    steps.push(ByteLevel::new(false, false, spec.byte_level_regex).into());
    inner.with_pre_tokenizer(Some(PreSequence::new(steps)));
    inner.with_decoder(Some(ByteLevel::new(false, false, false)));
    let flavor = Flavor {
        style: PieceStyle::ByteLevel,
        add_space_prefix: false,
        default_bos: None,
        default_eos: None,
    };
    Ok((flavor, inner))
}

/// The SentencePiece decoder chain (Replace ▁, ByteFallback, Fuse, Strip one leading space).
fn spm_decoder(strip: bool) -> Result<DecoderWrapper, TextError> {
    let mut chain: Vec<DecoderWrapper> = vec![
        tokenizers::decoders::DecoderWrapper::Replace(
            tokenizers::normalizers::Replace::new("\u{2581}", " ")
                .map_err(tk_err("building the decoder"))?,
        ),
        ByteFallback::new().into(),
        Fuse::new().into(),
    ];
    if strip {
        chain.push(Strip::new(' ', 1, 0).into());
    }
    Ok(DecoderSequence::new(chain).into())
}

/// `▁` for spaces, plus the leading `▁` when the vocabulary asks for a space prefix.
fn spm_normalizer(add_space_prefix: bool) -> Result<NormalizerWrapper, TextError> {
    let mut steps: Vec<NormalizerWrapper> = Vec::new();
    if add_space_prefix {
        steps.push(Prepend::new("\u{2581}".to_owned()).into());
    }
    steps.push(
        Replace::new(" ", "\u{2581}")
            .map_err(tk_err("building the normalizer"))?
            .into(),
    );
    Ok(NormalizerSequence::new(steps).into())
}

fn build_spm(
    vocab: &GgufVocab,
    tokens: &[String],
    index: &HashMap<&str, u32>,
    bpe_vocab: Vocab,
) -> Result<(Flavor, tokenizers::Tokenizer), TextError> {
    let scores = vocab
        .scores
        .as_deref()
        .ok_or_else(|| vocab.unsupported("llama vocabulary without tokenizer.ggml.scores"))?;
    // llama.cpp's default unknown token for SentencePiece vocabularies is id 0.
    let unk = tokens.get(vocab.unk_id.unwrap_or(0) as usize);
    let mut builder = BPE::builder()
        .vocab_and_merges(bpe_vocab, merges_from_scores(tokens, scores, index))
        .byte_fallback(true)
        .fuse_unk(true);
    if let Some(unk) = unk {
        builder = builder.unk_token(unk.clone());
    }
    let bpe = builder
        .build()
        .map_err(tk_err("building the SentencePiece BPE model"))?;
    let add_space_prefix = vocab.add_space_prefix.unwrap_or(true);
    let mut inner = tokenizers::Tokenizer::new(bpe);
    inner
        .with_normalizer(Some(spm_normalizer(add_space_prefix)?))
        .map_err(tk_err("installing the normalizer"))?;
    inner.with_decoder(Some(spm_decoder(add_space_prefix)?));
    let flavor = Flavor {
        style: PieceStyle::Spm,
        add_space_prefix,
        default_bos: Some(1),
        default_eos: Some(2),
    };
    Ok((flavor, inner))
}

/// Every split of every token into two tokens, ranked by the whole token's score (highest first);
/// equal scores keep vocabulary order, then the split's parts' ids, like Hugging Face's
/// `SentencePieceExtractor`.
fn merges_from_scores(
    tokens: &[String],
    scores: &[f32],
    index: &HashMap<&str, u32>,
) -> Vec<(String, String)> {
    let mut merges: Vec<(f32, u32, u32, u32)> = Vec::new();
    for (id, tok) in tokens.iter().enumerate() {
        let mut local: Vec<(u32, u32)> = tok
            .char_indices()
            .skip(1)
            .filter_map(|(pos, _)| {
                let l = index.get(&tok[..pos])?;
                let r = index.get(&tok[pos..])?;
                Some((*l, *r))
            })
            .collect();
        local.sort_unstable();
        merges.extend(
            local
                .into_iter()
                .map(|(l, r)| (scores[id], id as u32, l, r)),
        );
    }
    merges.sort_by(|a, b| b.0.total_cmp(&a.0));
    merges
        .into_iter()
        .map(|(_, _, l, r)| (tokens[l as usize].clone(), tokens[r as usize].clone()))
        .collect()
}

fn build_gemma4(
    vocab: &GgufVocab,
    index: &HashMap<&str, u32>,
    bpe_vocab: Vocab,
) -> Result<(Flavor, tokenizers::Tokenizer), TextError> {
    let merges = vocab
        .merges
        .as_deref()
        .ok_or_else(|| vocab.unsupported("gemma4 vocabulary without tokenizer.ggml.merges"))?;
    let bpe = BPE::builder()
        .vocab_and_merges(bpe_vocab, parse_merges(merges, index))
        .byte_fallback(true)
        .build()
        .map_err(tk_err("building the BPE model"))?;
    let mut inner = tokenizers::Tokenizer::new(bpe);
    inner
        .with_normalizer(Some(spm_normalizer(false)?))
        .map_err(tk_err("installing the normalizer"))?;
    let split = Split::new(
        SplitPattern::Regex("[^\\n]+|[\\n]+".to_owned()),
        SplitDelimiterBehavior::Isolated,
        false,
    )
    .map_err(tk_err("compiling a pre-tokenizer regex"))?;
    inner.with_pre_tokenizer(Some(split));
    inner.with_decoder(Some(spm_decoder(false)?));
    let flavor = Flavor {
        style: PieceStyle::Spm,
        add_space_prefix: false,
        default_bos: None,
        default_eos: None,
    };
    Ok((flavor, inner))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spm_vocab() -> GgufVocab {
        // A toy SentencePiece vocabulary: <unk> <s> </s>, byte tokens, pieces with scores.
        let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
        let mut types = vec![2, 3, 3];
        let mut scores = vec![0.0f32, 0.0, 0.0];
        for b in 0..=255u8 {
            tokens.push(format!("<0x{b:02X}>"));
            types.push(6);
            scores.push(0.0);
        }
        for (i, p) in ["▁", "h", "e", "l", "o", "▁h", "ll", "▁he", "llo", "▁hello"]
            .iter()
            .enumerate()
        {
            tokens.push((*p).to_owned());
            types.push(1);
            scores.push(-(i as f32));
        }
        GgufVocab {
            model: "llama".into(),
            tokens,
            scores: Some(scores),
            token_types: Some(types),
            bos_id: Some(1),
            eos_id: Some(2),
            unk_id: Some(0),
            add_bos: true,
            ..GgufVocab::default()
        }
    }

    #[test]
    fn spm_merges_by_score_and_falls_back_to_bytes() {
        let tok = Tokenizer::from_gguf(&spm_vocab()).expect("builds");
        let hello = tok.token_to_id("▁hello").expect("piece");
        assert_eq!(tok.encode("hello", false).expect("enc"), vec![hello]);
        assert_eq!(tok.encode("hello", true).expect("enc"), vec![1, hello]);
        // 'é' is not a piece: two byte tokens.
        let ids = tok.encode("é", false).expect("enc");
        let space = tok.token_to_id("▁").expect("piece");
        assert_eq!(ids, vec![space, 3 + 0xC3, 3 + 0xA9]);
        assert_eq!(tok.decode(&ids, false).expect("dec"), "é");
        assert_eq!(
            tok.decode(&[1, hello, hello], true).expect("dec"),
            "hello hello"
        );
        assert_eq!(tok.eos_ids(), &[2]);
        assert!(tok.add_bos());
    }

    #[test]
    fn unsupported_models_say_why() {
        let v = GgufVocab {
            model: "bert".into(),
            tokens: vec!["a".into()],
            ..GgufVocab::default()
        };
        let err = Tokenizer::from_gguf(&v).expect_err("bert");
        assert!(err.to_string().contains("bert"), "{err}");
    }

    #[test]
    fn merges_split_like_llama_cpp() {
        let index: HashMap<&str, u32> = [("Ġ", 0), ("a", 1), ("Ġa", 2), (" ", 3), ("  ", 4)]
            .into_iter()
            .collect();
        let merges = parse_merges(&["Ġ a".into(), "  ".into(), "x y".into()], &index);
        assert_eq!(merges, vec![("Ġ".into(), "a".into())]);
    }
}
