//! Guided decoding through `app().oneshot()` on SmolLM2-135M: whatever the tiny model would
//! say, `response_format` answers are JSON that fits the schema and forced tool choices come back
//! as tool calls of the right tool, in JSON and SSE alike, for n > 1 and temperature sampling;
//! unsupported schemas and formats are 400s that name what is wrong.

#![allow(clippy::unwrap_used)]

mod support;

use axum::http::StatusCode;
use hearth_server::AppState;
use serde_json::{json, Value};
use support::{call, post, state, MODEL};

fn chat(extra: Value) -> Value {
    let mut body = json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": "Describe Paris as a JSON object."}],
        "max_tokens": 96,
    });
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    body
}

fn with_parser(parser: &str) -> AppState {
    let mut s = state(None);
    s.tool_parser = Some(parser.to_owned());
    s
}

async fn ok(s: AppState, path: &str, body: Value) -> Value {
    let (status, text) = call(s, post(path, body)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    serde_json::from_str(&text).unwrap()
}

fn city_schema() -> Value {
    json!({"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 40},
        "population": {"type": "integer"},
        "landmarks": {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 2},
        "capital": {"type": "boolean"}
    }, "required": ["city", "population", "capital"], "additionalProperties": false})
}

/// A hand check of `city_schema` (the text crate's property test uses the jsonschema crate).
fn fits_city_schema(v: &Value) {
    let o = v.as_object().unwrap();
    assert!(
        o["city"].is_string() && o["population"].is_i64() && o["capital"].is_boolean(),
        "{v}"
    );
    if let Some(l) = o.get("landmarks") {
        assert!(l.as_array().unwrap().len() <= 2, "{v}");
    }
    assert!(
        o.keys()
            .all(|k| ["city", "population", "landmarks", "capital"].contains(&k.as_str())),
        "{v}"
    );
}

#[tokio::test]
async fn json_schema_content_parses_and_fits_for_every_sample() {
    let rf = json!({"type": "json_schema", "json_schema": {"name": "city", "schema": city_schema(), "strict": true}});
    let body = chat(json!({"response_format": rf, "n": 2, "temperature": 0.9, "seed": 7}));
    let v = ok(state(None), "/v1/chat/completions", body).await;
    for c in v["choices"].as_array().unwrap() {
        let content = c["message"]["content"].as_str().unwrap();
        let parsed: Value =
            serde_json::from_str(content).unwrap_or_else(|e| panic!("{e}: {content}"));
        fits_city_schema(&parsed);
        assert_eq!(
            c["finish_reason"], "stop",
            "the grammar completed: {content}"
        );
    }
    // Greedy, streamed: the same text as the JSON body.
    let greedy = chat(json!({"response_format": rf}));
    let v = ok(state(None), "/v1/chat/completions", greedy.clone()).await;
    let content = v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    fits_city_schema(&serde_json::from_str(&content).unwrap());
    let mut stream = greedy;
    stream["stream"] = json!(true);
    let (status, body) = call(state(None), post("/v1/chat/completions", stream)).await;
    assert_eq!(status, StatusCode::OK);
    let streamed: String = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| {
            let c: Value = serde_json::from_str(d).unwrap();
            c["choices"][0]["delta"]["content"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert_eq!(streamed, content);
}

#[tokio::test]
async fn json_object_mode_gives_an_object() {
    let body = chat(json!({"response_format": {"type": "json_object"}, "max_tokens": 200}));
    let v = ok(state(None), "/v1/chat/completions", body).await;
    let c = &v["choices"][0];
    let content = c["message"]["content"].as_str().unwrap();
    if c["finish_reason"] == "stop" {
        let parsed: Value =
            serde_json::from_str(content).unwrap_or_else(|e| panic!("{e}: {content}"));
        assert!(parsed.is_object());
    } else {
        // Cut by max_tokens: still a prefix of an object.
        assert_eq!(c["finish_reason"], "length");
        assert!(content.starts_with('{'), "{content}");
    }
}

#[tokio::test]
async fn unsupported_schemas_and_formats_are_400s_that_name_them() {
    let bad = |schema: Value| {
        chat(
            json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}),
        )
    };
    let cases = [
        (bad(json!({"type": "string", "pattern": "a+"})), "`pattern`"),
        (
            bad(json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}})),
            "#/properties/n",
        ),
        (
            chat(json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}})),
            "schema is missing",
        ),
        (
            chat(
                json!({"response_format": {"type": "json_object"}, "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "required"}),
            ),
            "cannot be combined",
        ),
    ];
    for (body, needle) in cases {
        let (status, text) = call(with_parser("hermes"), post("/v1/chat/completions", body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
        assert!(text.contains(needle), "{needle} not in {text}");
    }
}

fn weather_tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
         "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}, "days": {"type": "integer"}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "get_time", "description": "Local time",
         "parameters": {"type": "object", "properties": {"timezone": {"type": "string", "enum": ["UTC", "CET"]}}, "required": ["timezone"]}}}
    ])
}

#[tokio::test]
async fn named_and_required_tool_choice_come_back_as_tool_calls() {
    for parser in ["hermes", "glm47", "glm45"] {
        let named = chat(json!({
            "messages": [{"role": "user", "content": "What's the weather in Paris?"}],
            "tools": weather_tools(),
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            // The tiny model spells the GLM markers in many small tokens.
            "max_tokens": 300,
        }));
        let v = ok(with_parser(parser), "/v1/chat/completions", named).await;
        let c = &v["choices"][0];
        assert_eq!(c["finish_reason"], "tool_calls", "{parser}: {v}");
        let calls = c["message"]["tool_calls"].as_array().unwrap();
        assert_eq!(calls.len(), 1, "{parser}");
        assert_eq!(calls[0]["function"]["name"], "get_weather");
        let args: Value =
            serde_json::from_str(calls[0]["function"]["arguments"].as_str().unwrap()).unwrap();
        assert!(args["city"].is_string(), "{parser}: {args}");

        let required = chat(json!({
            "tools": weather_tools(), "tool_choice": "required", "parallel_tool_calls": false, "max_tokens": 300,
            "n": 2, "temperature": 1.0, "seed": 3,
        }));
        let v = ok(with_parser(parser), "/v1/chat/completions", required).await;
        for c in v["choices"].as_array().unwrap() {
            assert_eq!(c["finish_reason"], "tool_calls", "{parser}: {c}");
            let calls = c["message"]["tool_calls"].as_array().unwrap();
            assert_eq!(calls.len(), 1);
            let name = calls[0]["function"]["name"].as_str().unwrap();
            assert!(["get_weather", "get_time"].contains(&name), "{name}");
        }
    }
}

#[tokio::test]
async fn forced_tool_calls_stream_as_tool_call_deltas() {
    let body = chat(json!({
        "tools": weather_tools(), "stream": true,
        "tool_choice": {"type": "function", "function": {"name": "get_time"}},
    }));
    let (status, text) = call(with_parser("hermes"), post("/v1/chat/completions", body)).await;
    assert_eq!(status, StatusCode::OK);
    let mut names = Vec::new();
    let mut finish = None;
    for d in text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
    {
        let c: Value = serde_json::from_str(d).unwrap();
        let choice = &c["choices"][0];
        for call in choice["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            names.push(call["function"]["name"].as_str().unwrap().to_owned());
            let args: Value =
                serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
            assert!(
                ["UTC", "CET"].contains(&args["timezone"].as_str().unwrap()),
                "{args}"
            );
        }
        if !choice["finish_reason"].is_null() {
            finish = Some(choice["finish_reason"].clone());
        }
    }
    assert_eq!(names, ["get_time"]);
    assert_eq!(finish, Some(json!("tool_calls")));
}

#[tokio::test]
async fn tool_choice_refusals_name_the_problem() {
    let named = |name: &str| {
        chat(
            json!({"tools": weather_tools(), "tool_choice": {"type": "function", "function": {"name": name}}}),
        )
    };
    let cases = [
        (
            with_parser("hermes"),
            named("nope"),
            "`nope`, which is not among the tools (get_weather, get_time)",
        ),
        (
            with_parser("deepseek_v3"),
            named("get_weather"),
            "`deepseek_v3`",
        ),
        (state(None), named("get_weather"), "tool_call_parser"),
        (
            with_parser("hermes"),
            chat(json!({"tool_choice": "required"})),
            "needs `tools`",
        ),
        (
            with_parser("hermes"),
            chat(
                json!({"tool_choice": "required", "tools": [{"type": "function", "function": {"name": "f",
                "parameters": {"type": "object", "properties": {"q": {"type": "string", "pattern": "x"}}}}}]}),
            ),
            "tool `f`: #/properties/q: `pattern`",
        ),
    ];
    for (s, body, needle) in cases {
        let (status, text) = call(s, post("/v1/chat/completions", body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
        assert!(text.contains(needle), "{needle} not in {text}");
    }
}

#[tokio::test]
async fn anthropic_tool_choice_tool_and_any_give_tool_use_blocks() {
    let tools = json!([
        {"name": "get_weather", "description": "Weather", "input_schema": {"type": "object",
            "properties": {"city": {"type": "string", "maxLength": 30}}, "required": ["city"]}},
        {"name": "get_time", "input_schema": {"type": "object", "properties": {}}}
    ]);
    for (choice, expect) in [
        (
            json!({"type": "tool", "name": "get_weather"}),
            Some("get_weather"),
        ),
        (
            json!({"type": "any", "disable_parallel_tool_use": true}),
            None,
        ),
    ] {
        let body = json!({"model": MODEL, "max_tokens": 96, "tools": tools, "tool_choice": choice,
            "messages": [{"role": "user", "content": "Weather in Oslo?"}]});
        let v = ok(with_parser("hermes"), "/v1/messages", body).await;
        assert_eq!(v["stop_reason"], "tool_use", "{v}");
        let uses: Vec<&Value> = v["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .collect();
        assert_eq!(uses.len(), 1, "{v}");
        let name = uses[0]["name"].as_str().unwrap();
        if let Some(e) = expect {
            assert_eq!(name, e);
            assert!(uses[0]["input"]["city"].is_string(), "{v}");
        }
        assert!(uses[0]["input"].is_object());
    }
    let body = json!({"model": MODEL, "max_tokens": 16, "tools": tools,
        "tool_choice": {"type": "tool", "name": "missing"}, "messages": [{"role": "user", "content": "Hi"}]});
    let (status, text) = call(with_parser("hermes"), post("/v1/messages", body)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    let e: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(e["type"], "error");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`missing`"),
        "{text}"
    );
}
