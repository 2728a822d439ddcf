//! Chat templates render exactly like transformers' `apply_chat_template` (jinja2): the expected
//! files in tests/fixtures/templates/expected were written by tests/fixtures/render_templates.py
//! from tests/fixtures/conversations.json.

mod support;

use std::path::{Path, PathBuf};

use hearth_text::{ChatRequest, ChatTemplate, TextError};
use serde_json::{json, Map, Value};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Where two strings first differ, with a little context, for a readable failure.
fn first_difference(want: &str, got: &str) -> String {
    let (w, g): (Vec<char>, Vec<char>) = (want.chars().collect(), got.chars().collect());
    let at = w
        .iter()
        .zip(&g)
        .position(|(a, b)| a != b)
        .unwrap_or(w.len().min(g.len()));
    let ctx = |s: &[char]| {
        let piece: String = s[at.saturating_sub(40)..(at + 40).min(s.len())]
            .iter()
            .collect();
        format!("{piece:?}")
    };
    format!("char {at}: want {} got {}", ctx(&w), ctx(&g))
}

#[test]
fn templates_render_like_transformers() {
    let spec: Value =
        serde_json::from_str(&read(&fixtures().join("conversations.json"))).expect("json");
    let tools: Vec<Value> = spec["tools"].as_array().expect("tools").clone();
    let mut failures = Vec::new();
    let mut checked = 0;
    for (file, tokens) in spec["templates"].as_object().expect("templates") {
        let source = read(&fixtures().join("templates").join(file));
        let token = |k: &str| tokens[k].as_str().map(str::to_owned);
        let tmpl = ChatTemplate::with_name(file, &source, token("bos_token"), token("eos_token"))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let stem = file.trim_end_matches(".jinja");
        for case in spec["cases"].as_array().expect("cases") {
            let name = case["name"].as_str().expect("name");
            let expected = read(
                &fixtures()
                    .join("templates/expected")
                    .join(format!("{stem}__{name}.txt")),
            );
            let messages = case["messages"].as_array().expect("messages");
            let empty = Map::new();
            let req = ChatRequest {
                messages,
                tools: case["with_tools"]
                    .as_bool()
                    .unwrap_or(false)
                    .then_some(&tools[..]),
                add_generation_prompt: case["add_generation_prompt"].as_bool().expect("agp"),
                kwargs: case["kwargs"].as_object().unwrap_or(&empty),
            };
            let got = tmpl.render(&req);
            checked += 1;
            let label = format!("{stem}__{name}");
            match (expected.strip_prefix("!!raise_exception: "), &got) {
                (Some(msg), Err(TextError::TemplateRaised { message, .. })) if message == msg => {}
                (Some(msg), _) => failures.push(format!(
                    "{label}: want raise_exception({msg:?}), got {got:?}"
                )),
                (None, _) if expected.starts_with("!!error:") => {
                    if got.is_ok() {
                        failures.push(format!("{label}: Python fails ({expected}), we rendered"));
                    }
                }
                (None, Ok(text)) if *text == expected => {}
                (None, Ok(text)) => {
                    failures.push(format!("{label}: {}", first_difference(&expected, text)))
                }
                (None, Err(e)) => failures.push(format!("{label}: {e}")),
            }
        }
    }
    assert!(checked >= 30, "only {checked} cases checked");
    assert!(
        failures.is_empty(),
        "{} of {checked} renders differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn fixture_templates_match_the_shared_tokenizer_configs() {
    let shared = support::shared_dir().join("tokenizers");
    if !support::require_fixture(&shared, "shared tokenizers ($HEARTH_SHARED)") {
        return;
    }
    for (dir, fixture) in [
        ("qwen3", "Qwen-Qwen3-0.6B.jinja"),
        ("deepseek_v3", "hf-deepseek_v3.jinja"),
    ] {
        let cfg: Value =
            serde_json::from_str(&read(&shared.join(dir).join("tokenizer_config.json")))
                .expect("json");
        let want = read(&fixtures().join("templates").join(fixture));
        assert_eq!(cfg["chat_template"].as_str(), Some(want.as_str()), "{dir}");
    }
}

fn render(source: &str, messages: Value, kwargs: Value) -> Result<String, TextError> {
    let tmpl = ChatTemplate::new(source, Some("<s>".into()), Some("</s>".into()))?;
    let messages = messages.as_array().expect("array").clone();
    let kwargs = kwargs.as_object().expect("object").clone();
    tmpl.render(&ChatRequest {
        messages: &messages,
        tools: None,
        add_generation_prompt: true,
        kwargs: &kwargs,
    })
}

#[test]
fn python_semantics_for_printed_values_and_helpers() {
    let src = "{{ bos_token }}{{ none_var }}|{{ flag }}|{{ d }}|{{ d | tojson }}|{{ d | tojson(indent=2) }}|\
               {{ 'a,b'.split(',') }}|{{ x | string }}|{% for m in messages %}{% if loop.index0 == 1 %}{% break %}{% endif %}{{ m.role }}{% endfor %}|\
               {% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}|{{ tools }}|{{ add_generation_prompt }}";
    let out = render(
        src,
        json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]),
        json!({"none_var": null, "flag": false, "d": {"k": [1, 2.5, "é<>"]}, "x": {"a": null}}),
    )
    .expect("renders");
    assert_eq!(
        out,
        "<s>None|False|{'k': [1, 2.5, 'é<>']}|{\"k\": [1, 2.5, \"é<>\"]}|{\n  \"k\": [\n    1,\n    2.5,\n    \"é<>\"\n  ]\n}|\
         ['a', 'b']|{'a': None}|user|3|None|True"
    );
}

#[test]
fn raise_exception_and_syntax_errors_name_the_template_and_line() {
    let err = render(
        "line one\n{{ raise_exception('Only user and assistant roles!') }}",
        json!([]),
        json!({}),
    )
    .expect_err("raises");
    match &err {
        TextError::TemplateRaised {
            name,
            message,
            line,
        } => {
            assert_eq!(name, "chat_template");
            assert_eq!(message, "Only user and assistant roles!");
            assert_eq!(*line, Some(2));
        }
        other => panic!("wrong error {other:?}"),
    }
    let err = ChatTemplate::with_name("broken.jinja", "ok\n{% if x %}\nno endif", None, None)
        .expect_err("syntax error");
    let text = err.to_string();
    assert!(
        text.contains("broken.jinja") && text.contains("line"),
        "{text}"
    );
}

#[test]
fn strftime_now_and_trim_blocks() {
    let out = render(
        "{% if true %}\n  {{ strftime_now('%Y') | length }}\n{% endif %}\n",
        json!([]),
        json!({}),
    )
    .expect("renders");
    // trim_blocks eats the newline after a block tag, lstrip_blocks the indent before one.
    assert_eq!(out, "  4\n");
}
