//! Reasoning parsers, alone and in front of a tool parser as the server runs them. Every case
//! runs as one chunk, split in two at every char boundary and char by char; all must agree.

use hearth_text::parsers::{reasoning_parser, tool_parser, ReasoningParser};
use serde_json::{json, Value};

fn run(parser: &str, thinking: bool, chunks: &[&str]) -> (String, String) {
    let mut p = reasoning_parser(parser, thinking).expect("known parser");
    let (mut reasoning, mut content) = (String::new(), String::new());
    for c in chunks {
        let (r, t) = p.push(c);
        reasoning += &r;
        content += &t;
    }
    let (r, t) = p.finish();
    (reasoning + &r, content + &t)
}

/// Every chunking of `text` gives the same (reasoning, content); returns it.
fn check(parser: &str, thinking: bool, text: &str) -> (String, String) {
    let whole = run(parser, thinking, &[text]);
    for (i, _) in text.char_indices().skip(1) {
        assert_eq!(
            run(parser, thinking, &[&text[..i], &text[i..]]),
            whole,
            "split at byte {i}"
        );
    }
    let chars: Vec<String> = text.chars().map(String::from).collect();
    let chars: Vec<&str> = chars.iter().map(String::as_str).collect();
    assert_eq!(run(parser, thinking, &chars), whole, "char by char");
    whole
}

fn pair(reasoning: &str, content: &str) -> (String, String) {
    (reasoning.to_owned(), content.to_owned())
}

#[test]
fn glm45_reasoning_without_and_with_start_tag() {
    // GLM-4.7's template put `<think>` in the prompt; GLM-4.6 lets the model write it.
    let expected = pair("The user wants 2+2.\nThat is 4.", "2 + 2 = 4.");
    assert_eq!(
        check(
            "glm45",
            true,
            "The user wants 2+2.\nThat is 4.</think>\n2 + 2 = 4."
        ),
        expected
    );
    assert_eq!(
        check(
            "glm45",
            true,
            "\n<think>The user wants 2+2.\nThat is 4.\n</think>\n\n2 + 2 = 4."
        ),
        expected
    );
}

#[test]
fn glm45_thinking_disabled_is_all_content() {
    assert_eq!(
        check("glm45", false, "Hello! How can I help?"),
        pair("", "Hello! How can I help?")
    );
}

#[test]
fn glm45_tool_call_inside_reasoning_ends_it() {
    let text = "I need the weather for Paris.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>";
    assert_eq!(
        check("glm45", true, text),
        pair(
            "I need the weather for Paris.",
            "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"
        )
    );
}

#[test]
fn unterminated_reasoning_stays_reasoning() {
    // max_tokens ran out while thinking: finish_reason length with empty content.
    assert_eq!(
        check(
            "glm45",
            true,
            "Let me think about this carefully.\n\nFirst,"
        ),
        pair("Let me think about this carefully.\n\nFirst,", "")
    );
    assert_eq!(
        check("qwen3", true, "<think>\nHmm, the"),
        pair("Hmm, the", "")
    );
}

#[test]
fn qwen3_think_block_at_start() {
    let text = "<think>\nThe user greets me. I should greet back.\n</think>\n\nHello! How can I help you today?";
    assert_eq!(
        check("qwen3", true, text),
        pair(
            "The user greets me. I should greet back.",
            "Hello! How can I help you today?"
        )
    );
}

#[test]
fn qwen3_empty_think_block_is_stripped() {
    assert_eq!(
        check("qwen3", false, "<think>\n\n</think>\n\nHello!"),
        pair("", "Hello!")
    );
    assert_eq!(
        check("qwen3", true, "<think>\n\n</think>\n\nHello!"),
        pair("", "Hello!")
    );
}

#[test]
fn qwen3_without_think_is_all_content() {
    assert_eq!(
        check(
            "qwen3",
            false,
            "Hello! Tags like <think> mid-text are content."
        ),
        pair("", "Hello! Tags like <think> mid-text are content.")
    );
    assert_eq!(
        check("qwen3", true, "<thinking is fun>"),
        pair("", "<thinking is fun>")
    );
}

#[test]
fn qwen3_tool_call_inside_think_ends_it() {
    let text = "<think>\nI should call the tool.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
    assert_eq!(
        check("qwen3", true, text),
        pair(
            "I should call the tool.",
            "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"
        )
    );
}

#[test]
fn deepseek_r1_and_v3() {
    let expected = pair("9.11 vs 9.9: 9.9 is larger.", "9.9 is larger.");
    for parser in ["deepseek_r1", "deepseek_v3"] {
        assert_eq!(
            check(
                parser,
                true,
                "<think>\n9.11 vs 9.9: 9.9 is larger.\n</think>\n\n9.9 is larger."
            ),
            expected
        );
        assert_eq!(
            check(
                parser,
                true,
                "9.11 vs 9.9: 9.9 is larger.\n</think>\n\n9.9 is larger."
            ),
            expected
        );
    }
    assert_eq!(
        check("deepseek_v3", false, "9.9 is larger."),
        pair("", "9.9 is larger.")
    );
    let text = "I'll look it up.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    assert_eq!(
        check("deepseek_v3", true, text),
        pair("I'll look it up.", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>")
    );
}

#[test]
fn unknown_reasoning_parser_names_the_allowed_ones() {
    let msg = reasoning_parser("r1", true)
        .err()
        .expect("unknown name")
        .to_string();
    assert!(
        msg.contains("unknown reasoning parser `r1`")
            && msg.contains("glm45, deepseek_r1, deepseek_v3, qwen3"),
        "{msg}"
    );
}

// ------------------------------------------------ reasoning -> tool, as the server chains them

#[derive(Debug, PartialEq)]
struct Chained {
    reasoning: String,
    content: String,
    calls: Vec<(String, Value)>,
    failures: usize,
}

fn chain(reasoning: &str, tool: &str, chunks: &[&str]) -> Chained {
    let mut rp: Box<dyn ReasoningParser> = reasoning_parser(reasoning, true).expect("known parser");
    let mut tp = tool_parser(tool, &[]).expect("known parser");
    let (mut r_all, mut c_all) = (String::new(), String::new());
    let mut n_calls = 0;
    let mut feed =
        |r: String, c: String, tp: &mut dyn hearth_text::parsers::ToolParser, last: bool| {
            r_all += &r;
            let mut d = tp.push(&c);
            if last {
                d.append(tp.finish());
            }
            c_all += &d.content;
            n_calls += d.tool_calls.len();
        };
    for c in chunks {
        let (r, t) = rp.push(c);
        feed(r, t, tp.as_mut(), false);
    }
    let (r, t) = rp.finish();
    feed(r, t, tp.as_mut(), true);
    assert_eq!(n_calls, tp.calls().len());
    Chained {
        reasoning: r_all,
        content: c_all,
        calls: tp
            .calls()
            .iter()
            .map(|c| {
                (
                    c.name.clone(),
                    serde_json::from_str(&c.arguments).expect("JSON"),
                )
            })
            .collect(),
        failures: tp.failures(),
    }
}

fn check_chain(reasoning: &str, tool: &str, text: &str) -> Chained {
    let whole = chain(reasoning, tool, &[text]);
    for (i, _) in text.char_indices().skip(1) {
        assert_eq!(
            chain(reasoning, tool, &[&text[..i], &text[i..]]),
            whole,
            "split at byte {i}"
        );
    }
    whole
}

#[test]
fn glm47_reasoning_followed_by_tool_call() {
    let text = "The user asks about Paris weather. I'll call get_weather.</think>\n<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>";
    let out = check_chain("glm45", "glm47", text);
    assert_eq!(
        out.reasoning,
        "The user asks about Paris weather. I'll call get_weather."
    );
    assert_eq!(out.content, "");
    assert_eq!(
        out.calls,
        vec![("get_weather".to_owned(), json!({"city": "Paris"}))]
    );
    assert_eq!(out.failures, 0);
}

#[test]
fn glm47_tool_call_without_closing_think_is_not_swallowed() {
    let text = "Need weather.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>";
    let out = check_chain("glm45", "glm47", text);
    assert_eq!(out.reasoning, "Need weather.");
    assert_eq!(
        out.calls,
        vec![("get_weather".to_owned(), json!({"city": "Paris"}))]
    );
    assert_eq!(out.content, "");
}

#[test]
fn qwen3_reasoning_then_hermes_call() {
    let text = "<think>\nCall the clock.\n</think>\n\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>";
    let out = check_chain("qwen3", "hermes", text);
    assert_eq!(out.reasoning, "Call the clock.");
    assert_eq!(
        out.calls,
        vec![("get_time".to_owned(), json!({"tz": "UTC"}))]
    );
    assert_eq!(out.content, "");
}

#[test]
fn deepseek_reasoning_then_v31_call() {
    let text = "Use the tool.</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"tz\": \"UTC\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    let out = check_chain("deepseek_v3", "deepseek_v31", text);
    assert_eq!(out.reasoning, "Use the tool.");
    assert_eq!(
        out.calls,
        vec![("get_time".to_owned(), json!({"tz": "UTC"}))]
    );
    assert_eq!(out.content, "");
}
