//! Any text, split at any point, through every tool and reasoning parser: no panic, and the
//! streamed result equals the one-shot result (what the server relies on).
#![no_main]

use hearth_text::parsers::{parse_complete, reasoning, tool, ParsedDelta};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let Ok(text) = std::str::from_utf8(&data[1..]) else { return };
    let mut split = (data[0] as usize * text.len() / 255).min(text.len());
    while !text.is_char_boundary(split) {
        split -= 1;
    }
    let tools = [serde_json::json!({"type": "function", "function": {"name": "f",
        "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}})];
    for name in tool::TOOL_PARSERS {
        let mut whole = tool::tool_parser(name, &tools).expect("known parser");
        let (content, calls) = parse_complete(whole.as_mut(), text);
        let mut p = tool::tool_parser(name, &tools).expect("known parser");
        let mut acc = ParsedDelta::default();
        acc.append(p.push(&text[..split]));
        acc.append(p.push(&text[split..]));
        acc.append(p.finish());
        assert_eq!(acc.content, content, "{name}: content differs when streamed");
        assert_eq!(p.calls().len(), calls.len(), "{name}: calls differ when streamed");
    }
    for name in reasoning::REASONING_PARSERS {
        for thinking in [true, false] {
            let mut p = reasoning::reasoning_parser(name, thinking).expect("known parser");
            let _ = p.push(&text[..split]);
            let _ = p.push(&text[split..]);
            let _ = p.finish();
        }
    }
});
