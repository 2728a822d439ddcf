//! The pre-tokenizer of a GGUF byte-level BPE vocabulary, chosen from `tokenizer.ggml.pre`.
//!
//! Mirrors `llm_tokenizer_bpe`'s table in llama.cpp's `llama-vocab.cpp`: each name maps to a list of
//! regexes applied one after another, every match and every gap between matches kept as its own
//! piece (tokenizers' `Split` with `Isolated` behaviour). Where llama.cpp rewrote a Hugging Face
//! regex for its own engine (`(?i:'s|...)` spelled out as `'[sS]|...`), the original from
//! tokenizer.json is used here, since fancy-regex understands it and the golden tokenizations come
//! from Hugging Face. Building the tokenizer from this spec is `gguf_vocab.rs`.

use crate::error::TextError;

/// GPT-2's pattern as llama.cpp lists it, without the trailing `|\s+` of the original (which
/// `ByteLevel { use_regex: true }` applies when a spec sets `byte_level_regex`).
const GPT2_LCPP: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN35: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const JAIS2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}";
/// Kept as escapes: the literal characters include canonically decomposable ones (U+1F7D) that an
/// editor's NFC normalization silently turns into a different, invalid range.
const DEEPSEEK_LLM_LETTERS: &str = r"\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+";
const DEEPSEEK_V3_MAIN: &str = r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"##;
const SPARK2_5_MAIN: &str = r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+"##;
const GPT4O: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const TEKKEN: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const SEED_CODER: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+";
const BAILINGMOE: &str = r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+";
const MINICPM5: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const EXAONE_MOE: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+";
const UFAKZEKA: &str =
    r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const BLOOM: &str = r" ?[^(\s|.,!?…。，、।۔،)]+";

/// How one GGUF BPE vocabulary splits text before merging.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PreSpec {
    /// Regexes applied in order (`Split`, `Isolated`).
    pub splits: Vec<&'static str>,
    /// Whether the final `ByteLevel` step also splits with GPT-2's pattern.
    pub byte_level_regex: bool,
    /// llama.cpp's `ignore_merges`: a pre-token that is itself in the vocabulary is emitted whole.
    pub ignore_merges: bool,
    /// llama.cpp turns BOS on for these pre-tokenizers unless the GGUF says otherwise.
    pub default_add_bos: bool,
}

impl PreSpec {
    fn new(splits: &[&'static str]) -> Self {
        PreSpec {
            splits: splits.to_vec(),
            byte_level_regex: false,
            ignore_merges: false,
            default_add_bos: false,
        }
    }

    fn gpt2() -> Self {
        PreSpec {
            byte_level_regex: true,
            ..PreSpec::new(&[])
        }
    }

    fn ignore_merges(mut self) -> Self {
        self.ignore_merges = true;
        self
    }

    fn add_bos(mut self) -> Self {
        self.default_add_bos = true;
        self
    }
}

/// The spec for a `tokenizer.ggml.pre` value (`None` = key absent, llama.cpp's "default").
pub(crate) fn pre_spec(model: &str, pre: Option<&str>) -> Result<PreSpec, TextError> {
    let name = pre.unwrap_or("default");
    let spec = match name {
        "default" => PreSpec::new(&[
            r"[\p{P}\$\+<=>\^~\|]+",
            GPT2_LCPP,
            r"\p{N}+",
            "[0-9][0-9][0-9]",
        ]),
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0"
        | "lfm2" | "jina-v5-nano" => PreSpec::new(&[LLAMA3]).ignore_merges().add_bos(),
        "dbrx" | "smaug-bpe" => PreSpec::new(&[LLAMA3]),
        "jais-2" => PreSpec::new(&[JAIS2]),
        "deepseek-llm" => PreSpec::new(&[
            "[\r\n]",
            DEEPSEEK_LLM_LETTERS,
            r"\s?[!-/:-~！-／：-～‘-‟　-。]+",
            r"\s+$",
            "[一-龥ࠀ-一가-퟿]+",
            r"\p{N}+",
        ]),
        "deepseek-v3" | "hunyuan-dense" | "joyai-llm" | "hy_v4" => {
            PreSpec::new(&[r"\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", DEEPSEEK_V3_MAIN])
        }
        "spark2_5" => PreSpec::new(&[r"\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", SPARK2_5_MAIN, r"\p{N}"]),
        "deepseek-coder" => PreSpec::new(&[
            "[\r\n]",
            r"\s?\p{L}+",
            r"\s?\p{P}+",
            "[一-龥ࠀ-一가-퟿]+",
            r"\p{N}",
        ]),
        "falcon" => PreSpec::new(&[r"[\p{P}\$\+<=>\^~\|`]+", GPT2_LCPP, "[0-9][0-9][0-9]"]),
        "starcoder" | "refact" | "command-r" | "smollm" | "codeshell" | "exaone" | "minerva-7b"
        | "mellum2" => PreSpec {
            byte_level_regex: true,
            ..PreSpec::new(&[r"\p{N}"])
        },
        "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es" | "jina-v2-de"
        | "a.x-4.0" | "mellum" | "modern-bert" | "mpt" | "olmo" | "jais" | "trillion"
        | "granite-docling" | "exaone4" | "jina-v1-en" | "jina-v2-code" | "roberta-bpe" => {
            PreSpec::gpt2()
        }
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "stablelm2" | "megrez" | "hunyuan"
        | "solar-open" | "grok-2" => PreSpec::new(&[QWEN2]),
        "qwen35" => PreSpec::new(&[QWEN35]),
        "ufakzeka" => PreSpec::new(&[UFAKZEKA]),
        "poro-chat" | "bloom" | "gpt3-finnish" => PreSpec::new(&[BLOOM]),
        "viking" => PreSpec::new(&[BLOOM, r"\p{N}"]),
        "chatglm-bpe" => PreSpec::new(&[LLAMA3]),
        "glm4" | "glm5" => PreSpec::new(&[LLAMA3]).ignore_merges(),
        "tekken" => PreSpec::new(&[TEKKEN]).ignore_merges().add_bos(),
        "gpt-4o" | "llama4" | "kanana2" | "talkie" | "minimax-m2" => PreSpec::new(&[GPT4O]),
        "tiny_aya" | "cohere2moe" => PreSpec::new(&[r"\d{1,3}(?=(?:\d{3})*\b)", GPT4O]),
        "seed-coder" => PreSpec::new(&[SEED_CODER]),
        "bailingmoe" | "bailingmoe2" | "llada-moe" => PreSpec::new(&[BAILINGMOE]),
        "minicpm5" => PreSpec::new(&[r"\p{N}{1,3}", MINICPM5]).ignore_merges(),
        "laguna" => PreSpec::new(&["[^\\n]+|[\\n]+", QWEN2]),
        "exaone-moe" => PreSpec::new(&[EXAONE_MOE]),
        "chameleon" => PreSpec::new(&[
            "<sentinel:[0-9]+>",
            "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
            "([\\t\\n]|    |  )",
            r"\p{N}",
            r"[\p{P}!-/:-@\[-`{-~]",
            GPT2_LCPP,
        ])
        .add_bos(),
        other => {
            return Err(TextError::UnsupportedVocab {
                model: model.to_owned(),
                pre: Some(other.to_owned()),
                reason: "this pre-tokenizer has no known regex here (llama.cpp implements some, \
                         such as kimi-k2 and afmoe, with hand-written code)"
                    .to_owned(),
            })
        }
    };
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
    use tokenizers::SplitDelimiterBehavior::Isolated;

    #[test]
    fn every_regex_compiles() {
        let names = [
            "default",
            "llama-bpe",
            "dbrx",
            "jais-2",
            "deepseek-llm",
            "deepseek-v3",
            "spark2_5",
            "deepseek-coder",
            "falcon",
            "starcoder",
            "gpt-2",
            "qwen2",
            "qwen35",
            "ufakzeka",
            "bloom",
            "viking",
            "chatglm-bpe",
            "glm4",
            "tekken",
            "gpt-4o",
            "tiny_aya",
            "seed-coder",
            "bailingmoe",
            "minicpm5",
            "laguna",
            "exaone-moe",
            "chameleon",
        ];
        for name in names {
            let spec = pre_spec("gpt2", Some(name)).expect("known name");
            for re in spec.splits {
                Split::new(SplitPattern::Regex(re.to_owned()), Isolated, false)
                    .unwrap_or_else(|e| panic!("{name}: {re}: {e}"));
            }
        }
    }

    #[test]
    fn unknown_pre_is_an_error_naming_it() {
        let err = pre_spec("gpt2", Some("kimi-k2")).expect_err("unsupported");
        assert!(err.to_string().contains("kimi-k2"), "{err}");
    }
}
