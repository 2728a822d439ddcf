//! Golden tokenizations: the vocab-only GGUFs shipped in llama-cpp-python 0.3.36's sdist
//! (vendor/llama.cpp/models/ggml-vocab-*.gguf with .inp/.out pairs, made by Hugging Face
//! tokenizers) must tokenize exactly like llama.cpp's tests/test-tokenizer-0.cpp checks them:
//! `common_tokenize(ctx, text, add_special = false, parse_special = false)`.
//!
//! Fixtures: $HEARTH_LCP_MODELS, else ~/.cache/hearth/dl/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp/models
//! (`pip download --no-deps --no-binary llama-cpp-python llama-cpp-python==0.3.36` and extract).

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hearth_models::gguf::GgufFile;
use hearth_text::{EncodeOptions, Tokenizer};

/// Vocabularies that must match token for token.
const SUPPORTED: &[&str] = &[
    "llama-bpe",
    "qwen2",
    "qwen35",
    "deepseek-llm",
    "deepseek-coder",
    "gpt-2",
    "starcoder",
    "falcon",
    "refact",
    "command-r",
    "mpt",
    "llama-spm",
    "phi-3",
    "gemma-4",
];

/// Vocabularies with golden files that Hearth does not reproduce, and why.
const EXCLUDED: &[(&str, &str)] = &[(
    "bert-bge",
    "WordPiece (bert) embedding vocabulary; Hearth serves generative models only",
)];

fn models_dir() -> PathBuf {
    support::lcp_models_dir()
}

/// test-tokenizer-0.cpp's `read_tests`: inputs split on the marker line, outputs one line each,
/// collected in a map (a repeated input keeps its last expectation).
fn read_tests(gguf: &Path) -> BTreeMap<String, Vec<u32>> {
    let inp = std::fs::read_to_string(format!("{}.inp", gguf.display())).expect("read .inp");
    let out = std::fs::read_to_string(format!("{}.out", gguf.display())).expect("read .out");
    let mut inputs: Vec<&str> = inp.split("\n__ggml_vocab_test__\n").collect();
    // The C++ reader stops at the end of the text: a trailing marker adds no empty test.
    if inputs.last() == Some(&"") {
        inputs.pop();
    }
    let outputs: Vec<Vec<u32>> = out
        .lines()
        .map(|l| {
            l.split_whitespace()
                .map(|t| t.parse().expect("token id"))
                .collect()
        })
        .collect();
    assert_eq!(
        inputs.len(),
        outputs.len(),
        "{}: .inp/.out counts",
        gguf.display()
    );
    inputs.into_iter().map(str::to_owned).zip(outputs).collect()
}

struct Report {
    name: String,
    /// Inputs whose ids match llama.cpp's exactly.
    passed: usize,
    total: usize,
    failures: Vec<String>,
}

fn check_vocab(name: &str, path: &Path) -> Report {
    let file = GgufFile::open(path).expect("open gguf");
    let vocab = support::vocab_from_gguf(&file);
    let tests = read_tests(path);
    let mut report = Report {
        name: name.to_owned(),
        passed: 0,
        total: tests.len(),
        failures: Vec::new(),
    };
    let tok = match Tokenizer::from_gguf(&vocab) {
        Ok(t) => t,
        Err(e) => {
            report.failures.push(format!("cannot build: {e}"));
            return report;
        }
    };
    let opts = EncodeOptions {
        add_special_tokens: false,
        parse_special: false,
    };
    for (text, want) in &tests {
        let got = tok.encode_with(text, opts).expect("encode");
        let back = tok.decode(&got, false).expect("decode");
        if back != *text {
            report
                .failures
                .push(format!("input {text:?} decodes back as {back:?}"));
        }
        if &got == want {
            report.passed += 1;
        } else {
            let show = |ids: &[u32]| {
                ids.iter()
                    .map(|&i| format!("{i}:{:?}", tok.id_to_token(i).unwrap_or_default()))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            report.failures.push(format!(
                "input {text:?}\n      want {}\n      got  {}",
                show(want),
                show(&got)
            ));
        }
    }
    report
}

#[test]
fn golden_vocab_tokenizations() {
    let dir = models_dir();
    if !support::require_fixture(&dir, "llama.cpp vocab fixtures ($HEARTH_LCP_MODELS)") {
        return;
    }
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("list models dir")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let stem = name
                .strip_prefix("ggml-vocab-")?
                .strip_suffix(".gguf.inp")?;
            Some(stem.to_owned())
        })
        .collect();
    names.sort();
    assert!(
        !names.is_empty(),
        "no ggml-vocab-*.gguf.inp files in {}",
        dir.display()
    );

    let unclassified: Vec<&String> = names
        .iter()
        .filter(|n| !SUPPORTED.contains(&n.as_str()) && !EXCLUDED.iter().any(|(e, _)| e == n))
        .collect();
    let missing: Vec<&&str> = SUPPORTED
        .iter()
        .filter(|s| !names.iter().any(|n| n == *s))
        .collect();

    let mut bad = Vec::new();
    println!("golden vocab tokenizations ({}):", dir.display());
    for name in names.iter().filter(|n| SUPPORTED.contains(&n.as_str())) {
        let path = dir.join(format!("ggml-vocab-{name}.gguf"));
        let r = check_vocab(name, &path);
        println!("  {:<16} {:>3}/{:<3} match", r.name, r.passed, r.total);
        if !r.failures.is_empty() {
            bad.push(r);
        }
    }
    for (name, why) in EXCLUDED {
        println!("  {name:<16} excluded: {why}");
    }
    for r in &bad {
        println!("\n{}: {} mismatches, first ones:", r.name, r.failures.len());
        for f in r.failures.iter().take(5) {
            println!("    {f}");
        }
    }
    assert!(
        unclassified.is_empty(),
        "vocabs neither supported nor excluded: {unclassified:?}"
    );
    assert!(
        missing.is_empty(),
        "supported vocabs without fixtures: {missing:?}"
    );
    assert!(
        bad.is_empty(),
        "{} vocabs mismatch: {:?}",
        bad.len(),
        bad.iter().map(|r| &r.name).collect::<Vec<_>>()
    );
}

fn load(name: &str) -> Option<Tokenizer> {
    let path = models_dir().join(format!("ggml-vocab-{name}.gguf"));
    if !support::require_fixture(&path, "llama.cpp vocab fixtures ($HEARTH_LCP_MODELS)") {
        return None;
    }
    let file = GgufFile::open(&path).expect("open gguf");
    Some(Tokenizer::from_gguf(&support::vocab_from_gguf(&file)).expect("builds"))
}

#[test]
fn gguf_special_tokens_bos_and_eos() {
    let Some(qwen) = load("qwen2") else { return };
    let im_start = qwen.token_to_id("<|im_start|>").expect("im_start");
    let im_end = qwen.token_to_id("<|im_end|>").expect("im_end");
    let eot = qwen.token_to_id("<|endoftext|>").expect("endoftext");
    let ids = qwen
        .encode("<|im_start|>user\nhi<|im_end|>", false)
        .expect("encode");
    assert_eq!(ids.first(), Some(&im_start));
    assert_eq!(ids.last(), Some(&im_end));
    let literal = qwen
        .encode_with(
            "<|im_start|>",
            EncodeOptions {
                add_special_tokens: false,
                parse_special: false,
            },
        )
        .expect("encode");
    assert!(
        literal.len() > 1,
        "control token must not match as text: {literal:?}"
    );
    assert_eq!(qwen.decode(&ids, true).expect("decode"), "user\nhi");
    assert_eq!(
        qwen.decode(&ids, false).expect("decode"),
        "<|im_start|>user\nhi<|im_end|>"
    );
    assert!(
        qwen.eos_ids().contains(&im_end) && qwen.eos_ids().contains(&eot),
        "{:?}",
        qwen.eos_ids()
    );
    assert!(!qwen.add_bos());
    assert!(qwen
        .chat_template()
        .is_some_and(|t| t.contains("<|im_start|>")));

    let Some(llama3) = load("llama-bpe") else {
        return;
    };
    assert!(llama3.add_bos());
    let ids = llama3.encode("Hello", true).expect("encode");
    assert_eq!(ids[0], 128000);
    assert_eq!(llama3.bos_id(), Some(128000));
    let eot_id = llama3.token_to_id("<|eot_id|>").expect("eot");
    assert_eq!(llama3.eos_ids()[0], 128001);
    assert!(llama3.eos_ids().contains(&eot_id));

    let Some(spm) = load("llama-spm") else { return };
    let ids = spm.encode("Hello world", true).expect("encode");
    assert_eq!(ids[0], 1);
    assert_eq!(spm.decode(&ids, true).expect("decode"), "Hello world");
    assert_eq!(spm.decode(&ids, false).expect("decode"), "<s> Hello world");
    assert_eq!(spm.eos_ids(), &[2]);
    assert_eq!(
        spm.token_to_piece(spm.token_to_id("<0x0A>").expect("byte"))
            .expect("piece"),
        "\n"
    );
}

/// The vocab GGUFs that ship without golden files still load (or fail with a reason).
#[test]
fn vocabs_without_golden_files_build() {
    let dir = models_dir();
    if !support::require_fixture(&dir, "llama.cpp vocab fixtures ($HEARTH_LCP_MODELS)") {
        return;
    }
    for (name, must_build) in [
        ("aquila", true),
        ("baichuan", true),
        ("gpt-neox", true),
        ("nomic-bert-moe", false),
    ] {
        let path = dir.join(format!("ggml-vocab-{name}.gguf"));
        if !path.exists() {
            continue;
        }
        let vocab = support::vocab_from_gguf(&GgufFile::open(&path).expect("open gguf"));
        match Tokenizer::from_gguf(&vocab) {
            Ok(tok) => {
                assert!(must_build, "{name} unexpectedly supported");
                let text = "Hello world, 你好 🦙";
                let ids = tok.encode(text, false).expect("encode");
                assert_eq!(tok.decode(&ids, false).expect("decode"), text, "{name}");
            }
            Err(e) => assert!(!must_build, "{name}: {e}"),
        }
    }
}
