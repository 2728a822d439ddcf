//! Unit tests of the guided-decoding grammars: whole strings accepted or refused, incremental
//! matching, schema errors, tool-call formats and token masks over a toy vocabulary.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use serde_json::{json, Value};

use super::*;

fn schema(s: Value) -> Arc<Grammar> {
    Arc::new(json_schema_grammar(&s).unwrap())
}

fn accepts(g: &Arc<Grammar>, text: &str) -> bool {
    Matcher::matches(g, text)
}

#[track_caller]
fn check(g: &Arc<Grammar>, good: &[&str], bad: &[&str]) {
    for t in good {
        assert!(accepts(g, t), "should accept {t:?}");
    }
    for t in bad {
        assert!(!accepts(g, t), "should refuse {t:?}");
    }
}

#[test]
fn strings_with_escapes_lengths_and_utf8() {
    let g = schema(json!({"type": "string"}));
    check(
        &g,
        &[
            r#""""#,
            r#""abc""#,
            r#""a\"b\\c\n\u00e9""#,
            "\"caf\u{e9} \u{1F600}\"",
        ],
        &[
            r#""abc"#,
            r#"abc"#,
            "\"a\nb\"",
            r#""\x""#,
            r#""\ud800""#,
            r#""a" "#,
        ],
    );
    let g = schema(json!({"type": "string", "minLength": 2, "maxLength": 3}));
    check(
        &g,
        &[r#""ab""#, r#""a\nc""#, "\"\u{e9}\u{e9}\""],
        &[r#""a""#, r#""abcd""#],
    );
    let mut m = Matcher::new(schema(json!({"type": "string"})));
    // Bytes that are not UTF-8 are refused and leave the matcher as it was.
    assert!(!m.accept_bytes(b"\"\xff"));
    assert!(!m.accept_bytes(b"\"\xc3\x28"));
    assert!(m.accept_bytes(b"\"\xc3"));
    assert!(!m.is_accepting());
    assert!(m.accept_bytes(b"\xa9\""));
    assert!(m.is_finished());
}

#[test]
fn numbers_integers_booleans_null() {
    let n = schema(json!({"type": "number"}));
    check(
        &n,
        &["0", "-0", "12", "-3.25", "1e5", "2.5E-3", "1e+2"],
        &[
            "01",
            "-",
            "1.",
            ".5",
            "1e",
            "+1",
            "1.5.2",
            "12345678901234567",
        ],
    );
    let i = schema(json!({"type": "integer"}));
    check(&i, &["0", "-42", "7"], &["1.0", "1e3", "00"]);
    check(
        &schema(json!({"type": "boolean"})),
        &["true", "false"],
        &["True", "1"],
    );
    check(
        &schema(json!({"type": "null"})),
        &["null"],
        &["nul", "None"],
    );
    check(
        &schema(json!({"type": ["integer", "null"]})),
        &["3", "null"],
        &["\"3\""],
    );
}

#[test]
fn objects_keep_declared_order_and_allow_bounded_whitespace() {
    let g = schema(json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"}},
        "required": ["city"],
    }));
    check(
        &g,
        &[
            r#"{"city":"Paris"}"#,
            r#"{"city": "Paris", "days": 3}"#,
            r#"{"city":"Paris","metric":true}"#,
            "{\n  \"city\": \"Paris\",\n  \"days\": 3,\n  \"metric\": false\n}",
        ],
        &[
            r#"{}"#,
            r#"{"days": 3}"#,
            r#"{"days": 3, "city": "Paris"}"#,
            r#"{"city": "Paris", "extra": 1}"#,
            r#"{"city": "Paris",}"#,
            r#"{"city": "Paris" "days": 3}"#,
        ],
    );
    // Whitespace is bounded per gap.
    let spaces = " ".repeat(MAX_WS as usize);
    assert!(accepts(&g, &format!("{{{spaces}\"city\":\"x\"}}")));
    assert!(!accepts(&g, &format!("{{{spaces} \"city\":\"x\"}}")));
}

#[test]
fn object_without_properties_is_any_object_and_maps_type_their_values() {
    let any = schema(json!({"type": "object"}));
    check(
        &any,
        &[r#"{}"#, r#"{"a": [1, {"b": null}], "c": "d"}"#],
        &["[]", "3"],
    );
    let map = schema(json!({"type": "object", "additionalProperties": {"type": "integer"}}));
    check(&map, &[r#"{"a": 1, "b": 2}"#, "{}"], &[r#"{"a": "x"}"#]);
    let closed = schema(json!({"type": "object", "additionalProperties": false}));
    check(&closed, &["{}", "{ }"], &[r#"{"a": 1}"#]);
    let json_mode = Arc::new(json_object_grammar());
    check(
        &json_mode,
        &[r#"{"x": [true, 1.5, "s"]}"#],
        &["[1]", "\"s\"", "{"],
    );
}

#[test]
fn arrays_with_item_counts() {
    let g = schema(
        json!({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}),
    );
    check(
        &g,
        &["[1]", "[1, 2,3]", "[ 1 ]"],
        &["[]", "[1,2,3,4]", "[1,]", "[\"a\"]"],
    );
    let g = schema(json!({"type": "array", "maxItems": 0}));
    check(&g, &["[]"], &["[1]"]);
}

#[test]
fn enum_const_anyof_and_refs() {
    check(
        &schema(json!({"enum": ["red", "green", 3, null, {"a": 1}]})),
        &[r#""red""#, "3", "null", r#"{"a":1}"#],
        &[r#""blue""#, "4", r#"{"a": 1}"#],
    );
    check(&schema(json!({"const": "x"})), &[r#""x""#], &[r#""y""#]);
    check(
        &schema(json!({"anyOf": [{"type": "string"}, {"type": "integer"}]})),
        &[r#""a""#, "5"],
        &["true"],
    );
    // A recursive tree through $defs.
    let tree = schema(json!({
        "$ref": "#/$defs/node",
        "$defs": {"node": {"type": "object", "properties": {
            "value": {"type": "integer"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}
        }, "required": ["value"]}}
    }));
    check(
        &tree,
        &[
            r#"{"value": 1}"#,
            r#"{"value": 1, "children": [{"value": 2, "children": []}]}"#,
        ],
        &[r#"{"value": 1, "children": [{}]}"#],
    );
    let defs = schema(json!({
        "type": "object",
        "properties": {"p": {"allOf": [{"$ref": "#/definitions/point"}]}},
        "required": ["p"],
        "definitions": {"point": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}}
    }));
    check(&defs, &[r#"{"p": [1, 2.5]}"#], &[r#"{"p": [1]}"#]);
}

#[test]
fn unsupported_keywords_are_named() {
    let err = |s: Value| json_schema_grammar(&s).unwrap_err().to_string();
    let e = err(json!({"type": "string", "pattern": "^a+$"}));
    assert!(
        e.contains("`pattern`") && e.contains("#") && e.contains("supported keywords"),
        "{e}"
    );
    let e = err(json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}));
    assert!(
        e.contains("#/properties/n") && e.contains("`minimum`"),
        "{e}"
    );
    let e = err(json!({"$ref": "https://example.com/s.json"}));
    assert!(e.contains("only local references"), "{e}");
    let e = err(json!({"type": "object", "properties": {"a": {}}, "required": ["b"]}));
    assert!(e.contains("`b` is required"), "{e}");
    let e = err(json!({"type": "strin"}));
    assert!(e.contains("unknown type `strin`"), "{e}");
}

#[test]
fn incremental_matching_reports_accepting_and_finished() {
    let mut m = Matcher::new(schema(json!({"type": "integer"})));
    assert!(!m.is_accepting());
    assert!(m.accept_bytes(b"1"));
    assert!(m.is_accepting() && !m.is_finished());
    assert!(!m.accept_bytes(b"x"));
    assert!(m.accept_bytes(b"2"));
    let mut m = Matcher::new(schema(
        json!({"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"]}),
    ));
    for part in ["{", "\"a\"", ": ", "tr", "ue"] {
        assert!(m.accept_bytes(part.as_bytes()), "{part}");
        assert!(!m.is_accepting());
    }
    assert!(m.accept_bytes(b" }"));
    assert!(m.is_finished());
    assert!(!m.accept_bytes(b" "));
}

fn weather_tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "get_weather".into(),
            parameters: Some(json!({"type": "object", "properties": {
                "city": {"type": "string"}, "days": {"type": "integer"},
                "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]})),
        },
        ToolSpec {
            name: "now".into(),
            parameters: None,
        },
    ]
}

#[test]
fn hermes_tool_calls() {
    let g = Arc::new(tool_call_grammar("hermes", &weather_tools(), true).unwrap());
    check(
        &g,
        &[
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>",
            "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
        ],
        &[
            "",
            "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>",
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"days\": 3}}\n</tool_call>",
            "Sure! <tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
        ],
    );
    let one = Arc::new(tool_call_grammar("hermes", &weather_tools()[1..], false).unwrap());
    assert!(!accepts(
        &one,
        "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"
    ));
}

#[test]
fn glm_tool_calls_write_strings_raw_and_other_values_as_json() {
    let g47 = Arc::new(tool_call_grammar("glm47", &weather_tools(), false).unwrap());
    check(
        &g47,
        &[
            "<tool_call>get_weather<arg_key>city</arg_key><arg_value>New York</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call>",
            "<tool_call>get_weather<arg_key>city</arg_key><arg_value></arg_value><arg_key>unit</arg_key><arg_value>f</arg_value></tool_call>",
            "<tool_call>now</tool_call>",
        ],
        &[
            "<tool_call>get_weather<arg_key>city</arg_key><arg_value>\"Paris\"</arg_value>x</tool_call>",
            "<tool_call>get_weather<arg_key>days</arg_key><arg_value>3</arg_value></tool_call>",
            "<tool_call>get_weather<arg_key>city</arg_key><arg_value>a</arg_value><arg_key>unit</arg_key><arg_value>k</arg_value></tool_call>",
            "<tool_call>get_weather<arg_key>city</arg_key><arg_value>a</tool_call></arg_value></tool_call>",
        ],
    );
    let g45 = Arc::new(tool_call_grammar("glm45", &weather_tools(), true).unwrap());
    check(
        &g45,
        &["<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>\n<tool_call>now\n</tool_call>"],
        &["<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"],
    );
    let e = tool_call_grammar("deepseek_v3", &weather_tools(), false).unwrap_err();
    assert!(
        e.to_string().contains("`deepseek_v3`") && e.to_string().contains("hermes"),
        "{e}"
    );
}

#[test]
fn tool_calls_forced_by_the_grammar_parse_back_through_the_tool_parser() {
    let tools = json!([{"type": "function", "function": {"name": "get_weather", "parameters":
        {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]);
    let tools = tools.as_array().unwrap().clone();
    let specs: Vec<ToolSpec> = tools.iter().filter_map(ToolSpec::from_openai).collect();
    for (parser, text) in [
        ("hermes", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>"),
        ("glm47", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call>"),
        ("glm45", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>"),
    ] {
        let g = Arc::new(tool_call_grammar(parser, &specs, false).unwrap());
        assert!(accepts(&g, text), "{parser}");
        let mut p = crate::parsers::tool_parser(parser, &tools).unwrap();
        let (content, calls) = crate::parsers::parse_complete(p.as_mut(), text);
        assert_eq!(content.trim(), "", "{parser}");
        assert_eq!(calls.len(), 1, "{parser}");
        assert_eq!(calls[0].name, "get_weather");
        let args: Value = serde_json::from_str(&calls[0].arguments).unwrap();
        assert_eq!(args, json!({"city": "Paris", "days": 3}), "{parser}");
    }
}

/// A toy vocabulary: single characters, a few merged pieces, and one control token.
fn toy_vocab() -> Arc<TokenVocab> {
    let pieces = [
        "{", "}", "\"", "a", "b", ":", " ", "1", "2", "{\"", "\":", "ab", "\"}", "<eos>", "\n", "x",
    ];
    Arc::new(TokenVocab::from_pieces(
        pieces
            .iter()
            .map(|p| (p.as_bytes().to_vec(), *p == "<eos>")),
    ))
}

#[test]
fn token_masks_follow_the_grammar_and_leave_out_control_tokens() {
    let vocab = toy_vocab();
    let g = schema(
        json!({"type": "object", "properties": {"ab": {"type": "integer"}}, "required": ["ab"]}),
    );
    let guide = Guide {
        grammar: g,
        vocab: vocab.clone(),
    };
    let mut st = GuideState::new(&guide, SharedMaskCache::default());
    let names = |m: &TokenMask| -> Vec<String> {
        m.allowed()
            .map(|t| String::from_utf8_lossy(vocab.token_bytes(t)).into_owned())
            .collect()
    };
    assert_eq!(names(&st.mask()), ["{", "{\""]);
    assert!(st.advance(9)); // {"
    assert_eq!(names(&st.mask()), ["a", "ab"]);
    assert!(!st.advance(4)); // "b" does not spell the key
    assert!(st.advance(11)); // ab
    assert_eq!(names(&st.mask()), ["\"", "\":"]);
    assert!(st.advance(10)); // ":
    assert_eq!(names(&st.mask()), [" ", "1", "2", "\n"]);
    assert!(st.advance(7));
    assert!(!st.is_accepting());
    assert_eq!(names(&st.mask()), ["}", " ", "1", "2", "\n"]);
    assert!(st.advance(1));
    assert!(st.is_finished());
    assert_eq!(st.mask().count(), 0);
    assert!(!st.advance(13), "a control token is never guided text");
}

#[test]
fn masks_are_cached_per_state() {
    let vocab = toy_vocab();
    let guide = Guide {
        grammar: schema(json!({"type": "string"})),
        vocab,
    };
    let cache = SharedMaskCache::default();
    let mut st = GuideState::new(&guide, cache.clone());
    st.mask();
    assert!(st.advance(2));
    let first = st.mask();
    for _ in 0..5 {
        assert!(st.advance(3));
        assert_eq!(*st.mask(), *first);
    }
    assert_eq!(cache.lock().unwrap().computed, 2);
    let mut logits = vec![1.0f32; 20];
    first.apply(&mut logits);
    assert_eq!(logits[3], 1.0);
    assert_eq!(logits[13], f32::NEG_INFINITY);
    assert_eq!(
        logits[19],
        f32::NEG_INFINITY,
        "ids past the vocabulary are masked"
    );
}

/// Every mask equals the brute-force answer (each token's bytes fed to a copy of the matcher),
/// in string, raw-text and structural states alike, so the trie walk and its fast paths for
/// plain string / text tokens are exact.
#[test]
fn masks_equal_brute_force_token_by_token() {
    let mut pieces: Vec<(Vec<u8>, bool)> = (0..=255u8).map(|b| (vec![b], false)).collect();
    for p in [
        "ab",
        "a\"",
        "\",",
        "\", \"",
        "\\n",
        "\\u00",
        "é",
        "日本",
        "x<",
        "</",
        "</arg_value>",
        "<arg_key>",
        "</tool_call>",
        "\": ",
        "{\"",
        "true",
        "12",
        "-0.",
        "e+1",
        " \n",
        "\"}",
        "]}",
        "\u{1F600}",
    ] {
        pieces.push((p.as_bytes().to_vec(), false));
    }
    pieces.push((vec![0xC3], false)); // half a character
    pieces.push((b"<|eot|>".to_vec(), true));
    let vocab = Arc::new(TokenVocab::from_pieces(pieces));
    let tools = weather_tools();
    let cases: Vec<(Arc<Grammar>, Vec<&str>)> = vec![
        (
            schema(
                json!({"type": "object", "properties": {"ab": {"type": "string"}, "n": {"type": "number"}}}),
            ),
            vec![
                "",
                "{",
                "{\"ab\": \"x",
                "{\"ab\": \"x\\",
                "{\"ab\": \"\u{e9}",
                "{\"ab\": \"q\", \"n\": -0",
            ],
        ),
        (
            Arc::new(tool_call_grammar("glm47", &tools, true).unwrap()),
            vec![
                "<tool_call>get_weather<arg_key>city</arg_key><arg_value>",
                "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Par</",
                "<tool_call>now</tool_call>",
            ],
        ),
        (
            Arc::new(after_reasoning(
                json_object_grammar(),
                ReasoningPrefix::Explicit,
            )),
            vec![
                "",
                "<think>",
                "<think>hmm <",
                "<think>x</think>\n",
                "{\"k\": [\"v",
            ],
        ),
    ];
    for (g, prefixes) in cases {
        let guide = Guide {
            grammar: g.clone(),
            vocab: vocab.clone(),
        };
        for prefix in prefixes {
            let mut st = GuideState::new(&guide, SharedMaskCache::default());
            let mut m = Matcher::new(g.clone());
            assert!(m.accept_bytes(prefix.as_bytes()), "{prefix:?}");
            for &b in prefix.as_bytes() {
                assert!(st.advance(b as u32), "{prefix:?}");
            }
            let mask = st.mask();
            for id in 0..vocab.len() as u32 {
                let brute = vocab.is_guidable(id) && m.clone().accept_bytes(vocab.token_bytes(id));
                assert_eq!(
                    mask.is_allowed(id),
                    brute,
                    "after {prefix:?}, token {:?}",
                    String::from_utf8_lossy(vocab.token_bytes(id))
                );
            }
        }
    }
}

#[test]
fn glm_raw_string_values_honour_max_length_and_empty_properties_mean_no_arguments() {
    let tools = vec![
        ToolSpec {
            name: "note".into(),
            parameters: Some(
                json!({"type": "object", "properties": {"text": {"type": "string", "maxLength": 3}}, "required": ["text"]}),
            ),
        },
        ToolSpec {
            name: "ping".into(),
            parameters: Some(json!({"type": "object", "properties": {}})),
        },
    ];
    let g = Arc::new(tool_call_grammar("glm47", &tools, false).unwrap());
    check(
        &g,
        &[
            "<tool_call>note<arg_key>text</arg_key><arg_value>a\u{e9}c</arg_value></tool_call>",
            "<tool_call>ping</tool_call>",
        ],
        &["<tool_call>note<arg_key>text</arg_key><arg_value>abcd</arg_value></tool_call>"],
    );
    let h = Arc::new(tool_call_grammar("hermes", &tools[1..], false).unwrap());
    check(
        &h,
        &["<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>"],
        &["<tool_call>\n{\"name\": \"ping\", \"arguments\": {\"x\": 1}}\n</tool_call>"],
    );
}

#[test]
fn reasoning_comes_first_and_may_not_hide_a_tool_call() {
    let explicit = Arc::new(after_reasoning(
        json_schema_grammar(&json!({"type": "integer"})).unwrap(),
        ReasoningPrefix::Explicit,
    ));
    check(
        &explicit,
        &[
            "7",
            "<think>\nso: 3 + 4 < 8</think>\n\n7",
            "<think></think>7",
        ],
        &["<think>7", "hmm</think>7", "<think>a<tool_call>b</think>7"],
    );
    let implicit = Arc::new(after_reasoning(
        json_schema_grammar(&json!({"type": "integer"})).unwrap(),
        ReasoningPrefix::Implicit,
    ));
    check(
        &implicit,
        &["7", "thinking it over</think>\n7"],
        &["<think>x</think>7 ", "x</think>y"],
    );
}
