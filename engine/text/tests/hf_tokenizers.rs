//! The real Hugging Face tokenizer.json files in /work/shared/tokenizers (Qwen3, DeepSeek-V3):
//! ids equal Python `tokenizers`' output, special tokens are single ids, text round-trips.
//! The shared directory is $HEARTH_SHARED or ../shared beside the workspace root.

mod support;

use hearth_text::{EncodeOptions, Tokenizer};

fn load(name: &str) -> Option<Tokenizer> {
    let path = support::shared_dir()
        .join("tokenizers")
        .join(name)
        .join("tokenizer.json");
    if !support::require_fixture(&path, "shared tokenizer.json ($HEARTH_SHARED)") {
        return None;
    }
    Some(Tokenizer::from_file(&path).expect("loads"))
}

const TEXTS: &[&str] = &[
    "Hello, world! 你好，世界 🦙",
    "  def f(x):\n\treturn x**2  # ✓\n",
    "<think>\nok\n</think>",
    "",
];

fn assert_round_trip(tok: &Tokenizer) {
    for text in TEXTS {
        let ids = tok.encode(text, false).expect("encode");
        assert_eq!(tok.decode(&ids, false).expect("decode"), *text);
    }
}

#[test]
fn qwen3_tokenizer_json() {
    let Some(tok) = load("qwen3") else { return };
    // Ids from Python tokenizers 0.22 on the same file.
    let cases: &[(&str, &[u32])] = &[
        (
            "Hello, world! 你好，世界 🦙",
            &[9707, 11, 1879, 0, 220, 108386, 3837, 99489, 11162, 99, 247],
        ),
        (
            "<|im_start|>user\nhi<|im_end|>\n",
            &[151644, 872, 198, 6023, 151645, 198],
        ),
        (
            "  def f(x):\n\treturn x**2  # ✓\n",
            &[
                220, 707, 282, 2075, 982, 853, 856, 334, 17, 220, 671, 52375, 198,
            ],
        ),
        ("<think>\nok\n</think>", &[151667, 198, 562, 198, 151668]),
    ];
    for (text, want) in cases {
        assert_eq!(tok.encode(text, false).expect("encode"), *want, "{text:?}");
    }
    assert_round_trip(&tok);
    assert_eq!(tok.token_to_id("<|im_start|>"), Some(151644));
    assert!(tok.is_special(151644));
    assert!(
        !tok.is_special(151667),
        "<think> is an added but not special token"
    );
    // Qwen3 has no BOS and does not add one.
    assert_eq!(tok.bos_id(), None);
    assert!(!tok.add_bos());
    assert_eq!(
        tok.encode("hi", true).expect("encode"),
        tok.encode("hi", false).expect("encode")
    );
    // EOS is <|im_end|>; <|endoftext|> also ends generation.
    assert_eq!(tok.eos_ids()[0], 151645);
    assert!(tok.eos_ids().contains(&151643));
    assert_eq!(tok.vocab_size(), 151669);
    assert!(tok
        .chat_template()
        .is_some_and(|t| t.contains("enable_thinking")));
    let ids = tok
        .encode("<|im_start|>user\nhi<|im_end|>", false)
        .expect("encode");
    assert_eq!(tok.decode(&ids, true).expect("decode"), "user\nhi");
    let literal = tok
        .encode_with(
            "<|im_start|>",
            EncodeOptions {
                add_special_tokens: false,
                parse_special: false,
            },
        )
        .expect("encode");
    assert!(
        literal.len() > 1 && !literal.contains(&151644),
        "{literal:?}"
    );
}

#[test]
fn deepseek_v3_tokenizer_json() {
    let Some(tok) = load("deepseek_v3") else {
        return;
    };
    let cases: &[(&str, &[u32])] = &[
        (
            "Hello, world! 你好，世界 🦙",
            &[19923, 14, 2058, 3, 223, 30594, 303, 3427, 7351, 102, 250],
        ),
        (
            "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜>",
            &[0, 128803, 6366, 128804],
        ),
        (
            "  def f(x):\n\treturn x**2  # ✓\n",
            &[
                223, 1351, 285, 4042, 3395, 5562, 1527, 666, 20, 223, 1823, 86224, 201,
            ],
        ),
    ];
    for (text, want) in cases {
        assert_eq!(tok.encode(text, false).expect("encode"), *want, "{text:?}");
    }
    assert_round_trip(&tok);
    // tokenizer_config.json: add_bos_token true, BOS/EOS given as AddedToken objects.
    assert_eq!(tok.bos_id(), Some(0));
    assert!(tok.add_bos());
    assert_eq!(tok.encode("hi", true).expect("encode"), vec![0, 6366]);
    assert_eq!(tok.eos_ids()[0], 1);
    assert_eq!(tok.bos_token(), Some("<｜begin▁of▁sentence｜>"));
    assert_eq!(tok.eos_token(), Some("<｜end▁of▁sentence｜>"));
    assert_eq!(
        tok.decode(&[0, 128803, 6366, 128804], false)
            .expect("decode"),
        "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜>"
    );
    assert_eq!(tok.decode(&[0, 6366, 1], true).expect("decode"), "hi");
    assert!(tok
        .chat_template()
        .is_some_and(|t| t.contains("tool▁calls▁begin")));
}
