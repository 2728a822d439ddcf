//! Token id -> the exact bytes it stands for, shared by `Tokenizer::decode` and the incremental
//! detokenizer so that streamed deltas always add up to the one-shot decode.
//!
//! Two families cover the models we serve: byte-level BPE (GPT-2's printable stand-ins for bytes)
//! and SentencePiece style (`▁` for a space, `<0xXX>` byte-fallback tokens, one leading space
//! stripped from the whole text). Anything else falls back to the `tokenizers` decoder one token
//! at a time. Building the vocabulary is not this file's business.

use std::sync::OnceLock;

use crate::error::TextError;

/// How a vocabulary's token strings map to bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PieceStyle {
    /// GPT-2 byte-level: every char of a token is one byte.
    ByteLevel,
    /// SentencePiece: `▁` is a space, `<0xXX>` is a raw byte.
    Spm,
}

/// Per-token output bytes plus which tokens are special (skippable).
#[derive(Debug)]
pub(crate) struct Pieces {
    bytes: Vec<Box<[u8]>>,
    special: Vec<bool>,
    /// SentencePiece decoders drop the space that encoding prepended to the text.
    strip_leading_space: bool,
}

impl Pieces {
    pub(crate) fn new(
        bytes: Vec<Box<[u8]>>,
        special: Vec<bool>,
        strip_leading_space: bool,
    ) -> Self {
        debug_assert_eq!(bytes.len(), special.len());
        Pieces {
            bytes,
            special,
            strip_leading_space,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }

    /// The bytes of token `id`. Ids past the vocabulary are a model's padding rows (Qwen3's
    /// embedding has 151,936 rows for 151,669 tokens) that a sampler can still pick, most of
    /// all on random weights: they stand for no text, as in HF tokenizers' decode, rather than
    /// failing the request. (/detokenize refuses them itself: there they are the user's input.)
    pub(crate) fn bytes(&self, id: u32) -> Result<&[u8], TextError> {
        Ok(self.bytes.get(id as usize).map_or(&[][..], |b| &b[..]))
    }

    pub(crate) fn is_special(&self, id: u32) -> bool {
        self.special.get(id as usize).copied().unwrap_or(false)
    }

    pub(crate) fn strip_leading_space(&self) -> bool {
        self.strip_leading_space
    }

    /// The bytes of a whole sequence, as a one-shot decode produces them.
    pub(crate) fn decode_bytes(
        &self,
        ids: &[u32],
        skip_special: bool,
    ) -> Result<Vec<u8>, TextError> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            let piece = self.bytes(id)?;
            if skip_special && self.is_special(id) {
                continue;
            }
            out.extend_from_slice(piece);
        }
        if self.strip_leading_space && out.first() == Some(&b' ') {
            out.remove(0);
        }
        Ok(out)
    }
}

/// Decode one token string in the given style, the way the Hugging Face decoders do.
pub(crate) fn decode_token(style: PieceStyle, token: &str) -> Vec<u8> {
    match style {
        PieceStyle::ByteLevel => byte_level_bytes(token),
        PieceStyle::Spm => spm_bytes(token),
    }
}

/// GPT-2 byte-level: map every char back to its byte; a token with a char outside the table (an
/// added token such as `<｜begin▁of▁sentence｜>`) is taken verbatim, as tokenizers' decoder does.
pub(crate) fn byte_level_bytes(token: &str) -> Vec<u8> {
    let table = char_to_byte_table();
    let mapped: Option<Vec<u8>> = token
        .chars()
        .map(|c| table.get(c as usize).copied().flatten())
        .collect();
    mapped.unwrap_or_else(|| token.as_bytes().to_vec())
}

/// SentencePiece: `<0xXX>` is one byte, otherwise `▁` becomes a space.
pub(crate) fn spm_bytes(token: &str) -> Vec<u8> {
    if let Some(b) = parse_byte_token(token) {
        return vec![b];
    }
    token.replace('\u{2581}', " ").into_bytes()
}

/// `<0xAB>` -> 0xAB.
pub(crate) fn parse_byte_token(token: &str) -> Option<u8> {
    let hex = token.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// GPT-2's `bytes_to_unicode`, inverted: index by char code (all stand-ins are below U+0144).
fn char_to_byte_table() -> &'static [Option<u8>] {
    static TABLE: OnceLock<Vec<Option<u8>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = vec![None; 0x144];
        let mut n = 0usize;
        for b in 0u8..=255 {
            let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
            let code = if printable {
                usize::from(b)
            } else {
                n += 1;
                255 + n
            };
            table[code] = Some(b);
        }
        table
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GPT-2's `bytes_to_unicode` forward: the char standing for one byte.
    fn byte_to_char(b: u8) -> char {
        static FORWARD: OnceLock<[char; 256]> = OnceLock::new();
        FORWARD.get_or_init(|| {
            let mut fwd = ['\0'; 256];
            for (code, slot) in char_to_byte_table().iter().enumerate() {
                if let (Some(byte), Some(c)) = (slot, char::from_u32(code as u32)) {
                    fwd[usize::from(*byte)] = c;
                }
            }
            fwd
        })[usize::from(b)]
    }

    #[test]
    fn byte_level_round_trips_every_byte() {
        for b in 0u8..=255 {
            let c = byte_to_char(b);
            assert_eq!(
                byte_level_bytes(&c.to_string()),
                vec![b],
                "byte {b:#x} char {c:?}"
            );
        }
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_level_bytes("Ġhello"), b" hello");
    }

    #[test]
    fn byte_level_keeps_unmappable_tokens_verbatim() {
        let t = "<｜begin▁of▁sentence｜>";
        assert_eq!(byte_level_bytes(t), t.as_bytes());
    }

    #[test]
    fn spm_bytes_handles_byte_tokens_and_spaces() {
        assert_eq!(spm_bytes("<0x0A>"), b"\n");
        assert_eq!(spm_bytes("<0xE6>"), vec![0xE6]);
        assert_eq!(spm_bytes("▁Hello▁world"), b" Hello world");
        assert_eq!(spm_bytes("<0x0>"), b"<0x0>");
    }

    #[test]
    fn decode_strips_one_leading_space_for_spm() {
        let pieces = Pieces::new(
            vec![b" Hi".to_vec().into(), b"<s>".to_vec().into()],
            vec![false, true],
            true,
        );
        assert_eq!(pieces.decode_bytes(&[0, 0], false).expect("ok"), b"Hi Hi");
        assert_eq!(pieces.decode_bytes(&[1, 0], true).expect("ok"), b"Hi");
        assert_eq!(pieces.decode_bytes(&[1, 0], false).expect("ok"), b"<s> Hi");
        // A padding id past the vocabulary stands for no text.
        assert_eq!(
            pieces.decode_bytes(&[0, 7, 0], false).expect("ok"),
            b"Hi Hi"
        );
    }
}
