//! Any bytes as an OpenAI chat / completions request or an Anthropic messages request: parsing
//! and the helpers the server calls on a parsed request never panic.
#![no_main]

use hearth_protocol::anthropic::messages::MessagesRequest;
use hearth_protocol::openai::chat::ChatCompletionRequest;
use hearth_protocol::openai::completions::CompletionRequest;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = serde_json::from_slice::<ChatCompletionRequest>(data) {
        let _ = (r.max_output_tokens(), r.is_stream(), r.include_usage(), r.unknown_fields());
        for m in &r.messages {
            let _ = m.text_content();
            let _ = serde_json::to_value(m);
        }
    }
    if let Ok(r) = serde_json::from_slice::<CompletionRequest>(data) {
        let _ = (r.prompt.len(), r.unknown_fields());
    }
    if let Ok(r) = serde_json::from_slice::<MessagesRequest>(data) {
        for m in &r.messages {
            let _ = (m.text_content(), m.content.blocks());
        }
        let _ = r.system.as_ref().map(|s| s.text());
    }
});
