//! Incremental detokenization: deltas never split a UTF-8 character, and their concatenation is
//! exactly the one-shot decode, for byte-fallback (SentencePiece) and byte-level (Qwen3) vocabs.

mod support;

use hearth_models::gguf::GgufFile;
use hearth_text::{Detokenizer, GgufVocab, Tokenizer};

/// A SentencePiece vocabulary with only a few pieces, so most characters use byte fallback.
fn byte_fallback_vocab() -> Tokenizer {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![2, 3, 3];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
    }
    for piece in ["▁", "a", "b", "▁a", "▁b"] {
        tokens.push(piece.into());
        types.push(1);
    }
    let scores = (0..tokens.len()).map(|i| -(i as f32)).collect();
    let vocab = GgufVocab {
        model: "llama".into(),
        tokens,
        scores: Some(scores),
        token_types: Some(types),
        add_bos: true,
        ..GgufVocab::default()
    };
    Tokenizer::from_gguf(&vocab).expect("builds")
}

fn byte(b: u8) -> u32 {
    3 + u32::from(b)
}

/// Stream `ids`, checking every delta; returns the deltas (finish() appended as the last one).
fn stream(tok: &Tokenizer, ids: &[u32], skip_special: bool) -> Vec<String> {
    let mut d = Detokenizer::new(tok, skip_special);
    let mut deltas: Vec<String> = ids.iter().map(|&id| d.step(id).expect("step")).collect();
    deltas.push(d.finish());
    let joined: String = deltas.concat();
    assert_eq!(
        joined,
        tok.decode(ids, skip_special).expect("decode"),
        "ids {ids:?}"
    );
    deltas
}

#[test]
fn emoji_and_cjk_split_across_byte_tokens() {
    let tok = byte_fallback_vocab();
    let text = "a 😀中 b";
    let ids = tok.encode(text, true).expect("encode");
    // BOS, ▁a, ▁, 4 bytes of 😀, 3 bytes of 中, ▁b
    let emoji: Vec<u32> = "😀".bytes().map(byte).collect();
    assert!(ids.windows(4).any(|w| w == emoji), "{ids:?}");
    let deltas = stream(&tok, &ids, true);
    assert!(deltas.iter().all(|d| !d.contains('\u{FFFD}')), "{deltas:?}");
    assert_eq!(deltas.concat(), text);
    // The emoji appears whole with its fourth byte, nothing before.
    let pos = ids
        .iter()
        .position(|&i| i == emoji[0])
        .expect("emoji start");
    assert_eq!(&deltas[pos..pos + 4], &["", "", "", "😀"]);
}

#[test]
fn leading_space_is_dropped_only_at_the_start_of_a_text() {
    let tok = byte_fallback_vocab();
    let ids = tok.encode("a b", false).expect("encode");
    assert_eq!(stream(&tok, &ids, false).concat(), "a b");
    let mut after_prompt = Detokenizer::new(&tok, false).after_prompt();
    let text: String = ids
        .iter()
        .map(|&id| after_prompt.step(id).expect("step"))
        .collect();
    assert_eq!(text, " a b");
    // A skipped BOS does not count as the start of the text.
    assert_eq!(stream(&tok, &[1, ids[0]], true).concat(), "a");
}

#[test]
fn broken_sequences_become_replacement_characters_like_decode() {
    let tok = byte_fallback_vocab();
    // A lead byte followed by ASCII, a stray continuation byte, and a truncated tail.
    let a = tok.token_to_id("a").expect("a");
    let ids = [byte(0xF0), a, byte(0x80), a, byte(0xE4), byte(0xB8)];
    let deltas = stream(&tok, &ids, false);
    assert_eq!(
        deltas,
        vec!["", "\u{FFFD}a", "\u{FFFD}", "a", "", "", "\u{FFFD}"]
    );
}

#[test]
fn qwen3_stream_matches_decode() {
    let path = support::shared_dir().join("tokenizers/qwen3/tokenizer.json");
    if !support::require_fixture(&path, "shared tokenizer.json ($HEARTH_SHARED)") {
        return;
    }
    let tok = Tokenizer::from_file(&path).expect("loads");
    for text in [
        "Hello, world! 你好，世界 🦙",
        "<|im_start|>assistant\n<think>\n嗯…🤔 👨‍👩‍👧\n</think>\n\nमैं ठीक हूँ<|im_end|>",
    ] {
        let ids = tok.encode(text, false).expect("encode");
        let deltas = stream(&tok, &ids, false);
        assert!(deltas.iter().all(|d| !d.contains('\u{FFFD}')), "{deltas:?}");
        assert_eq!(deltas.concat(), text);
        let skipped = stream(&tok, &ids, true).concat();
        // <|im_start|> is special and skipped; <think> is an added non-special token and stays.
        assert!(!skipped.contains("<|im_start|>"), "{skipped}");
        assert_eq!(
            skipped.contains("<think>"),
            text.contains("<think>"),
            "{skipped}"
        );
    }
    // " 🦙" is ĠðŁ + ¦ + Ļ: the space comes out at once, the llama with its last byte.
    let ids = tok.encode(" 🦙", false).expect("encode");
    assert_eq!(ids, vec![11162, 99, 247]);
    assert_eq!(stream(&tok, &ids, false), vec![" ", "", "🦙", ""]);
}

#[test]
fn llama_spm_stream_matches_decode() {
    let path = support::lcp_models_dir().join("ggml-vocab-llama-spm.gguf");
    if !support::require_fixture(&path, "llama.cpp vocab fixtures ($HEARTH_LCP_MODELS)") {
        return;
    }
    let file = GgufFile::open(&path).expect("open");
    let tok = Tokenizer::from_gguf(&support::vocab_from_gguf(&file)).expect("builds");
    let text = "Hello 🦙 world, 你好 ကာ!";
    let ids = tok.encode(text, true).expect("encode");
    let deltas = stream(&tok, &ids, true);
    assert!(deltas.iter().all(|d| !d.contains('\u{FFFD}')), "{deltas:?}");
    assert_eq!(deltas.concat(), text);
}
