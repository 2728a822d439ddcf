//! The `tokenizer.*` metadata of a GGUF file as hearth-text's `GgufVocab` (hearth-text reads no
//! files of model formats; hearth-models reads GGUF; the runtime joins the two).

use hearth_models::gguf::{GgufFile, GgufValue};
use hearth_text::GgufVocab;

/// The vocabulary metadata, with llama.cpp's defaults for absent flags.
pub fn vocab_from_gguf(f: &GgufFile) -> GgufVocab {
    let model = f
        .get_str("tokenizer.ggml.model")
        .unwrap_or_default()
        .to_owned();
    let pre = f.get_str("tokenizer.ggml.pre").map(str::to_owned);
    let id = |key: &str| f.get_u64(key).and_then(|v| u32::try_from(v).ok());
    let flag = |key: &str| f.get(key).and_then(GgufValue::as_bool);
    GgufVocab {
        tokens: f.string_array("tokenizer.ggml.tokens").unwrap_or_default(),
        scores: f.f32_array("tokenizer.ggml.scores"),
        token_types: f
            .i64_array("tokenizer.ggml.token_type")
            .map(|v| v.into_iter().map(|t| t as i32).collect()),
        merges: f.string_array("tokenizer.ggml.merges"),
        bos_id: id("tokenizer.ggml.bos_token_id"),
        eos_id: id("tokenizer.ggml.eos_token_id"),
        eot_id: id("tokenizer.ggml.eot_token_id"),
        eom_id: id("tokenizer.ggml.eom_token_id"),
        unk_id: id("tokenizer.ggml.unknown_token_id"),
        pad_id: id("tokenizer.ggml.padding_token_id"),
        add_bos: flag("tokenizer.ggml.add_bos_token")
            .unwrap_or_else(|| GgufVocab::default_add_bos(&model, pre.as_deref())),
        add_eos: flag("tokenizer.ggml.add_eos_token").unwrap_or(false),
        add_space_prefix: flag("tokenizer.ggml.add_space_prefix"),
        chat_template: f.get_str("tokenizer.chat_template").map(str::to_owned),
        model,
        pre,
    }
}
