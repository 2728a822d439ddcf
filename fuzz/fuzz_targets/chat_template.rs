//! Any JSON as the messages / tools / kwargs of a render of the real Qwen3 and GLM-4.7-Flash
//! chat templates: a render either succeeds or returns an error, never panics or hangs.
#![no_main]

use std::sync::OnceLock;

use hearth_text::{ChatRequest, ChatTemplate};
use libfuzzer_sys::fuzz_target;

fn templates() -> &'static [ChatTemplate] {
    static T: OnceLock<Vec<ChatTemplate>> = OnceLock::new();
    T.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../engine/text/tests/fixtures/templates/");
        ["Qwen-Qwen3-0.6B.jinja", "GLM-4.7-Flash.jinja"]
            .iter()
            .map(|f| {
                let src = std::fs::read_to_string(format!("{dir}{f}")).expect("template fixture");
                ChatTemplate::new(&src, Some("<s>".into()), Some("</s>".into())).expect("compiles")
            })
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let messages: Vec<serde_json::Value> = match v.get("messages").and_then(|m| m.as_array()) {
        Some(m) => m.clone(),
        None => return,
    };
    let tools: Option<Vec<serde_json::Value>> = v.get("tools").and_then(|t| t.as_array()).cloned();
    let kwargs = v.get("kwargs").and_then(|k| k.as_object()).cloned().unwrap_or_default();
    for t in templates() {
        let _ = t.render(&ChatRequest {
            messages: &messages,
            tools: tools.as_deref(),
            add_generation_prompt: true,
            kwargs: &kwargs,
        });
    }
});
