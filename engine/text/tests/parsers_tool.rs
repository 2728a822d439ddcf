//! Tool-call parsers on real-looking model output. Every case runs one-shot (`parse_complete`),
//! as one chunk, split in two at every char boundary and char by char; all must agree.

use hearth_text::parsers::{parse_complete, tool_parser, ParsedDelta, ToolCall};
use serde_json::{json, Value};

#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    content: String,
    /// (name, arguments as JSON) — ids differ from run to run.
    calls: Vec<(String, Value)>,
    failures: usize,
}

fn weather_tools() -> Vec<Value> {
    vec![
        json!({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                           "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}}),
        json!({"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}),
        json!({"type": "function", "function": {"name": "book", "parameters": {"type": "object", "properties": {
            "zip": {"type": "string"}, "guests": {"type": "integer"}, "budget": {"type": "number"},
            "refundable": {"type": "boolean"}, "prefs": {"type": "object"}, "dates": {"type": "array"},
            "note": {"type": ["string", "null"]}}}}}),
    ]
}

/// Feeds `chunks` to a fresh parser and checks the deltas against `calls()`.
fn run_chunks(parser: &str, tools: &[Value], chunks: &[&str]) -> Outcome {
    let mut p = tool_parser(parser, tools).expect("known parser");
    let mut all = ParsedDelta::default();
    let mut deltas: Vec<ParsedDelta> = chunks.iter().map(|c| p.push(c)).collect();
    deltas.push(p.finish());
    for d in deltas {
        assert!(d.reasoning.is_empty());
        if !d.tool_calls.is_empty() {
            assert!(
                d.content.is_empty() || !d.content.trim().is_empty(),
                "whitespace content next to a call: {d:?}"
            );
        }
        all.append(d);
    }
    let calls = p.calls();
    assert_eq!(all.tool_calls.len(), calls.len());
    for (i, (d, c)) in all.tool_calls.iter().zip(calls).enumerate() {
        assert_eq!(d.index, i);
        assert_eq!(d.id.as_deref(), Some(c.id.as_str()));
        assert_eq!(d.name.as_deref(), Some(c.name.as_str()));
        assert_eq!(d.arguments, c.arguments);
        check_id(c);
    }
    assert_eq!(p.failure_reasons().len(), p.failures());
    Outcome {
        content: all.content,
        calls: calls
            .iter()
            .map(|c| (c.name.clone(), parse_args(&c.arguments)))
            .collect(),
        failures: p.failures(),
    }
}

fn parse_args(arguments: &str) -> Value {
    let v: Value = serde_json::from_str(arguments).expect("arguments are JSON");
    assert!(v.is_object(), "arguments must be an object: {arguments}");
    v
}

fn check_id(c: &ToolCall) {
    assert!(c.id.starts_with("call_") && c.id.len() == 29, "{}", c.id);
    assert!(
        c.id[5..].bytes().all(|b| b.is_ascii_alphanumeric()),
        "{}",
        c.id
    );
}

/// Runs every chunking of `text`; returns the agreed outcome.
fn check(parser: &str, tools: &[Value], text: &str) -> Outcome {
    let whole = run_chunks(parser, tools, &[text]);

    let mut p = tool_parser(parser, tools).expect("known parser");
    let (content, calls) = parse_complete(p.as_mut(), text);
    assert_eq!(content, whole.content, "parse_complete content");
    let calls: Vec<(String, Value)> = calls
        .iter()
        .map(|c| (c.name.clone(), parse_args(&c.arguments)))
        .collect();
    assert_eq!(calls, whole.calls, "parse_complete calls");
    assert_eq!(p.failures(), whole.failures);

    for (i, _) in text.char_indices().skip(1) {
        let split = run_chunks(parser, tools, &[&text[..i], &text[i..]]);
        assert_eq!(
            split,
            whole,
            "split at byte {i}: {:?} | {:?}",
            &text[..i],
            &text[i..]
        );
    }
    let chars: Vec<String> = text.chars().map(String::from).collect();
    let chars: Vec<&str> = chars.iter().map(String::as_str).collect();
    assert_eq!(run_chunks(parser, tools, &chars), whole, "char by char");
    whole
}

fn call(name: &str, args: Value) -> (String, Value) {
    (name.to_owned(), args)
}

// ---------------------------------------------------------------- glm47 / glm45

#[test]
fn glm47_no_newline_after_name() {
    let text = "I'll check the weather in Paris for you.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call>";
    let out = check("glm47", &weather_tools(), text);
    assert_eq!(out.content, "I'll check the weather in Paris for you.");
    assert_eq!(
        out.calls,
        vec![call("get_weather", json!({"city": "Paris", "days": 3}))]
    );
    assert_eq!(out.failures, 0);
}

#[test]
fn glm45_layout_with_newlines_under_both_names() {
    let text = "\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>unit</arg_key>\n<arg_value>celsius</arg_value>\n</tool_call>";
    for parser in ["glm45", "glm47"] {
        let out = check(parser, &weather_tools(), text);
        assert_eq!(
            out.content, "",
            "{parser}: no whitespace-only content next to a call"
        );
        assert_eq!(
            out.calls,
            vec![call(
                "get_weather",
                json!({"city": "Paris", "unit": "celsius"})
            )]
        );
    }
}

#[test]
fn glm_zero_argument_calls() {
    for text in [
        "<tool_call>get_time</tool_call>",
        "<tool_call>get_time\n</tool_call>",
        "<tool_call> get_time </tool_call>",
    ] {
        let out = check("glm47", &weather_tools(), text);
        assert_eq!(out.calls, vec![call("get_time", json!({}))], "{text:?}");
        assert_eq!(out.content, "");
    }
}

#[test]
fn glm_several_calls_inline_after_text() {
    let text = "Let me look both up.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>\n<tool_call>get_weather<arg_key>city</arg_key><arg_value>Tokyo</arg_value><arg_key>days</arg_key><arg_value>2</arg_value></tool_call><tool_call>get_time</tool_call>";
    let out = check("glm47", &weather_tools(), text);
    assert_eq!(out.content, "Let me look both up.");
    assert_eq!(
        out.calls,
        vec![
            call("get_weather", json!({"city": "Paris"})),
            call("get_weather", json!({"city": "Tokyo", "days": 2})),
            call("get_time", json!({})),
        ]
    );
}

#[test]
fn glm_values_typed_by_schema() {
    let text = "<tool_call>book<arg_key>zip</arg_key><arg_value>02134</arg_value><arg_key>guests</arg_key><arg_value>4</arg_value><arg_key>budget</arg_key><arg_value>199.5</arg_value><arg_key>refundable</arg_key><arg_value>true</arg_value><arg_key>prefs</arg_key><arg_value>{\"view\": \"sea\", \"floor\": 3}</arg_value><arg_key>dates</arg_key><arg_value>[\"2025-06-01\", \"2025-06-03\"]</arg_value><arg_key>note</arg_key><arg_value>null</arg_value></tool_call>";
    let out = check("glm47", &weather_tools(), text);
    assert_eq!(
        out.calls,
        vec![call(
            "book",
            json!({"zip": "02134", "guests": 4, "budget": 199.5, "refundable": true,
                   "prefs": {"view": "sea", "floor": 3}, "dates": ["2025-06-01", "2025-06-03"], "note": null})
        )]
    );
    // Arguments keep the model's key order.
    let mut p = tool_parser("glm47", &weather_tools()).expect("known parser");
    let (_, calls) = parse_complete(p.as_mut(), text);
    assert!(
        calls[0]
            .arguments
            .starts_with(r#"{"zip":"02134","guests":4,"#),
        "{}",
        calls[0].arguments
    );
}

#[test]
fn glm_unknown_tool_and_param_values_try_json_then_string() {
    let text = "<tool_call>search<arg_key>query</arg_key><arg_value>rust async</arg_value><arg_key>limit</arg_key><arg_value>10</arg_value><arg_key>filters</arg_key><arg_value>{\"lang\": \"en\"}</arg_value></tool_call>";
    let out = check("glm47", &[], text);
    assert_eq!(
        out.calls,
        vec![call(
            "search",
            json!({"query": "rust async", "limit": 10, "filters": {"lang": "en"}})
        )]
    );
}

#[test]
fn glm_string_values_keep_markup_and_newlines() {
    let text = "<tool_call>write_file<arg_key>path</arg_key><arg_value>src/main.rs</arg_value><arg_key>content</arg_key><arg_value>fn main() {\n    if a < b { println!(\"<ok>\"); }\n}\n</arg_value></tool_call>";
    let tools = [
        json!({"type": "function", "function": {"name": "write_file", "parameters": {"type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}),
    ];
    let out = check("glm47", &tools, text);
    assert_eq!(
        out.calls,
        vec![call(
            "write_file",
            json!({"path": "src/main.rs", "content": "fn main() {\n    if a < b { println!(\"<ok>\"); }\n}\n"})
        )]
    );
}

#[test]
fn glm_whole_call_in_one_chunk() {
    let mut p = tool_parser("glm47", &weather_tools()).expect("known parser");
    let first = p.push("Checking now.");
    assert_eq!(first.content, "Checking now.");
    let d = p.push(
        "\n<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value></tool_call>",
    );
    assert_eq!(d.content, "", "no content noise with the call");
    assert_eq!(d.tool_calls.len(), 1);
    assert_eq!(d.tool_calls[0].index, 0);
    assert_eq!(d.tool_calls[0].name.as_deref(), Some("get_weather"));
    assert_eq!(d.tool_calls[0].arguments, r#"{"city":"Oslo"}"#);
    assert!(p.finish().is_empty());
    assert_eq!(p.failures(), 0);
}

#[test]
fn glm_content_after_calls_and_angle_brackets_pass_through() {
    let out = check(
        "glm47",
        &weather_tools(),
        "Use a <b>bold</b> tag, a < b, and <tool>.",
    );
    assert_eq!(out.content, "Use a <b>bold</b> tag, a < b, and <tool>.");
    assert!(out.calls.is_empty());
    let out = check(
        "glm47",
        &weather_tools(),
        "<tool_call>get_time</tool_call>\n\nIt is noon. Done!  ",
    );
    assert_eq!(out.content, "It is noon. Done!  ");
    assert_eq!(out.calls.len(), 1);
}

#[test]
fn glm_malformed_call_is_content_and_a_failure() {
    let text = "Sure.<tool_call>get_weather<arg_key>city</arg_key>Paris</tool_call>";
    let out = check("glm47", &weather_tools(), text);
    assert_eq!(out.failures, 1);
    assert!(out.calls.is_empty(), "never a silent {{}}");
    assert_eq!(
        out.content,
        "Sure.<tool_call>get_weather<arg_key>city</arg_key>Paris</tool_call>"
    );
    let mut p = tool_parser("glm47", &weather_tools()).expect("known parser");
    parse_complete(p.as_mut(), text);
    assert!(
        p.failure_reasons()[0].contains("without <arg_value>")
            || p.failure_reasons()[0].contains("<arg_value>"),
        "{:?}",
        p.failure_reasons()
    );
}

#[test]
fn glm_unterminated_call_at_end_is_content_and_a_failure() {
    let out = check(
        "glm47",
        &weather_tools(),
        "One moment.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Par",
    );
    assert_eq!(out.failures, 1);
    assert!(out.calls.is_empty());
    assert_eq!(
        out.content,
        "One moment.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Par"
    );
    // A call cut off by the next call's start: the first fails, the second parses.
    let out = check(
        "glm47",
        &weather_tools(),
        "<tool_call>get_weather<arg_key>city<tool_call>get_time</tool_call>",
    );
    assert_eq!(out.failures, 1);
    assert_eq!(out.calls, vec![call("get_time", json!({}))]);
    assert_eq!(out.content, "<tool_call>get_weather<arg_key>city");
}

#[test]
fn unicode_content_splits_only_on_char_boundaries() {
    let out = check("glm47", &weather_tools(), "Привет 👋 — погода:<tool_call>get_weather<arg_key>city</arg_key><arg_value>Москва</arg_value></tool_call>");
    assert_eq!(out.content, "Привет 👋 — погода:");
    assert_eq!(
        out.calls,
        vec![call("get_weather", json!({"city": "Москва"}))]
    );
}

// ---------------------------------------------------------------- hermes

#[test]
fn hermes_qwen3_output() {
    let text = "I'll get both.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
    let out = check("hermes", &weather_tools(), text);
    assert_eq!(out.content, "I'll get both.");
    assert_eq!(
        out.calls,
        vec![
            call("get_weather", json!({"city": "Paris", "unit": "celsius"})),
            call("get_time", json!({}))
        ]
    );
}

#[test]
fn hermes_argument_variants() {
    let text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Rome\\\"}\"}\n</tool_call><tool_call>{\"name\": \"get_time\"}</tool_call><tool_call>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}</tool_call>";
    let out = check("hermes", &[], text);
    assert_eq!(
        out.calls,
        vec![
            call("get_weather", json!({"city": "Rome"})),
            call("get_time", json!({})),
            call("get_weather", json!({"city": "Oslo"}))
        ]
    );
}

#[test]
fn hermes_malformed_json_is_content_and_a_failure() {
    let text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"\n</tool_call>";
    let out = check("hermes", &weather_tools(), text);
    assert_eq!(out.failures, 1);
    assert!(out.calls.is_empty());
    assert_eq!(out.content, text);
    let out = check(
        "hermes",
        &weather_tools(),
        "<tool_call>{\"name\": \"get_weather\", \"arguments\": [1]}</tool_call>",
    );
    assert_eq!((out.failures, out.calls.len()), (1, 0));
}

// ---------------------------------------------------------------- deepseek

#[test]
fn deepseek_v3_output() {
    let text = "Let me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\", \"days\": 3}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    let out = check("deepseek_v3", &weather_tools(), text);
    assert_eq!(out.content, "Let me check.");
    assert_eq!(
        out.calls,
        vec![
            call("get_weather", json!({"city": "Paris", "days": 3})),
            call("get_time", json!({}))
        ]
    );
    assert_eq!(out.failures, 0);
}

#[test]
fn deepseek_v3_malformed_call_keeps_the_good_one() {
    let text = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \n```<｜tool▁call▁end｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    let out = check("deepseek_v3", &weather_tools(), text);
    assert_eq!(out.failures, 1);
    assert_eq!(out.calls, vec![call("get_time", json!({}))]);
    assert!(out.content.contains("get_weather"), "{:?}", out.content);
}

#[test]
fn deepseek_v31_output() {
    let text = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>Both requested.";
    let out = check("deepseek_v31", &weather_tools(), text);
    assert_eq!(
        out.calls,
        vec![
            call("get_weather", json!({"city": "Paris"})),
            call("get_time", json!({}))
        ]
    );
    assert_eq!(out.content, "Both requested.");
}

#[test]
fn deepseek_v31_without_block_end_and_with_bad_args() {
    // Generation may stop (EOS) right after the last call.
    let out = check(
        "deepseek_v31",
        &[],
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜>",
    );
    assert_eq!(
        (out.calls.len(), out.failures, out.content.as_str()),
        (1, 0, "")
    );
    let out = check("deepseek_v31", &[], "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>not json<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
    assert_eq!((out.calls.len(), out.failures), (0, 1));
    assert_eq!(
        out.content,
        "<｜tool▁call▁begin｜>get_time<｜tool▁sep｜>not json<｜tool▁call▁end｜>"
    );
    let out = check(
        "deepseek_v31",
        &[],
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"a\":",
    );
    assert_eq!((out.calls.len(), out.failures), (0, 1));
}

// ---------------------------------------------------------------- qwen3_coder

#[test]
fn qwen3_coder_output_typed_by_schema() {
    let text = "I'll book it.\n<tool_call>\n<function=book>\n<parameter=zip>\n02134\n</parameter>\n<parameter=guests>\n2\n</parameter>\n<parameter=refundable>\nfalse\n</parameter>\n<parameter=dates>\n[\"2025-06-01\"]\n</parameter>\n</function>\n</tool_call>";
    let out = check("qwen3_coder", &weather_tools(), text);
    assert_eq!(out.content, "I'll book it.");
    assert_eq!(
        out.calls,
        vec![call(
            "book",
            json!({"zip": "02134", "guests": 2, "refundable": false, "dates": ["2025-06-01"]})
        )]
    );
}

#[test]
fn qwen3_coder_multiline_code_zero_args_and_missing_close() {
    let tools = [
        json!({"type": "function", "function": {"name": "write_file", "parameters": {"type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}),
    ];
    let text = "<tool_call>\n<function=write_file>\n<parameter=path>\na.py\n</parameter>\n<parameter=content>\ndef f(x):\n    return x < 3\n\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=list_files>\n</function>\n</tool_call>\n<tool_call>\n<function=write_file>\n<parameter=path>\nb.py\n<parameter=content>\npass\n</function>\n</tool_call>";
    let out = check("qwen3_coder", &tools, text);
    assert_eq!(
        out.calls,
        vec![
            call(
                "write_file",
                json!({"path": "a.py", "content": "def f(x):\n    return x < 3\n"})
            ),
            call("list_files", json!({})),
            call("write_file", json!({"path": "b.py", "content": "pass"})),
        ]
    );
    assert_eq!((out.content.as_str(), out.failures), ("", 0));
}

#[test]
fn qwen3_coder_malformed_is_content_and_a_failure() {
    let text = "<tool_call>\n<function=book>\n<parameter=zip>\n02134\n</parameter>\n</tool_call>";
    let out = check("qwen3_coder", &weather_tools(), text);
    assert_eq!((out.calls.len(), out.failures), (0, 1));
    assert_eq!(out.content, text);
}

// ---------------------------------------------------------------- factory

#[test]
fn unknown_tool_parser_names_the_allowed_ones() {
    let err = tool_parser("glm5", &[]).err().expect("unknown name");
    let msg = err.to_string();
    assert!(
        msg.contains("`glm5`")
            && msg.contains("glm47, glm45, hermes, deepseek_v3, deepseek_v31, qwen3_coder"),
        "{msg}"
    );
}

#[test]
fn long_call_streamed_in_tiny_pieces() {
    let body: String = (0..5000).map(|i| format!("line {i} < x\n")).collect();
    let text = format!(
        "<tool_call>write_file<arg_key>content</arg_key><arg_value>{body}</arg_value></tool_call>"
    );
    let chars: Vec<String> = text.chars().map(String::from).collect();
    let chars: Vec<&str> = chars.iter().map(String::as_str).collect();
    let out = run_chunks("glm47", &[], &chars);
    assert_eq!(
        out.calls,
        vec![call("write_file", json!({"content": body}))]
    );
    assert_eq!(out.content, "");
}
