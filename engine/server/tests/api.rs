//! The HTTP API through `app().oneshot()` (no socket) on the embedded default's model,
//! SmolLM2-135M-Instruct: OpenAI chat (JSON and SSE agree), models, tokenize, admin routes,
//! auth, and bad input answered with a 4xx that names the field.

#![allow(clippy::unwrap_used)]

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{json, Value};
use support::{call, post, state, MODEL};

fn chat(extra: Value) -> Value {
    let mut body = json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "max_tokens": 24,
    });
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    body
}

#[tokio::test]
async fn chat_json_and_sse_agree_and_answer_paris() {
    let (status, body) = call(state(None), post("/v1/chat/completions", chat(json!({})))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let content = v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(content.contains("Paris"), "{content}");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert!(v["usage"]["completion_tokens"].as_u64().unwrap() > 0);
    assert!(v["choices"][0]["message"].get("tool_calls").is_none());

    let stream = chat(json!({"stream": true, "stream_options": {"include_usage": true}}));
    let (status, body) = call(state(None), post("/v1/chat/completions", stream)).await;
    assert_eq!(status, StatusCode::OK);
    let events: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(events.last(), Some(&"[DONE]"));
    let mut streamed = String::new();
    let mut finish = None;
    for e in &events[..events.len() - 1] {
        let c: Value = serde_json::from_str(e).unwrap();
        if let Some(choice) = c["choices"].get(0) {
            // Never `content: ""` or `tool_calls: null` noise in a delta.
            assert_ne!(choice["delta"]["content"], json!(""));
            assert!(choice["delta"].get("tool_calls").is_none());
            streamed.push_str(choice["delta"]["content"].as_str().unwrap_or(""));
            if !choice["finish_reason"].is_null() {
                finish = Some(choice["finish_reason"].clone());
            }
        } else {
            assert!(c["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
        }
    }
    assert_eq!(streamed, content, "streaming and non-streaming differ");
    assert_eq!(finish, Some(json!("stop")));
}

#[tokio::test]
async fn stop_strings_and_n_and_logprobs() {
    let body = chat(json!({"stop": [" Paris"], "n": 2, "logprobs": true, "top_logprobs": 2}));
    let (status, body) = call(state(None), post("/v1/chat/completions", body)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["choices"].as_array().unwrap().len(), 2);
    for c in v["choices"].as_array().unwrap() {
        let text = c["message"]["content"].as_str().unwrap();
        assert!(!text.contains("Paris"), "stop string leaked: {text}");
        assert_eq!(c["finish_reason"], "stop");
        let lps = c["logprobs"]["content"].as_array().unwrap();
        assert!(!lps.is_empty() && lps[0]["top_logprobs"].as_array().unwrap().len() == 2);
    }
}

#[tokio::test]
async fn bad_input_is_a_4xx_naming_the_field() {
    let cases = [
        (
            chat(json!({"temperature": 5})),
            StatusCode::BAD_REQUEST,
            "temperature",
        ),
        (chat(json!({"top_p": 0})), StatusCode::BAD_REQUEST, "top_p"),
        (chat(json!({"n": 0})), StatusCode::BAD_REQUEST, "n is 0"),
        (
            chat(json!({"frobnicate": 1})),
            StatusCode::BAD_REQUEST,
            "frobnicate",
        ),
        (
            chat(json!({"model": "gpt-9"})),
            StatusCode::NOT_FOUND,
            "gpt-9",
        ),
        (
            chat(json!({"response_format": {"type": "xml"}})),
            StatusCode::BAD_REQUEST,
            "allowed: text, json_object, json_schema",
        ),
        (
            chat(json!({"max_tokens": 5000})),
            StatusCode::BAD_REQUEST,
            "1024",
        ),
        (chat(json!({"stop": [""]})), StatusCode::BAD_REQUEST, "stop"),
        (
            chat(json!({"messages": []})),
            StatusCode::BAD_REQUEST,
            "messages",
        ),
        (
            chat(
                json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]}),
            ),
            StatusCode::BAD_REQUEST,
            "text only",
        ),
        (
            chat(json!({"tools": [{"type": "function", "function": {"name": "f"}}]})),
            StatusCode::BAD_REQUEST,
            "tool_call_parser",
        ),
    ];
    for (body, want, needle) in cases {
        let (status, text) = call(state(None), post("/v1/chat/completions", body.clone())).await;
        assert_eq!(status, want, "{body}: {text}");
        assert!(text.contains(needle), "{body}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert!(v["error"]["message"].is_string());
    }
    let raw = Request::post("/v1/chat/completions")
        .header("content-type", "application/json")
        .body(Body::from("{not json"))
        .unwrap();
    let (status, text) = call(state(None), raw).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    // The engine is still serving after all of that.
    let (status, _) = call(
        state(None),
        post("/v1/chat/completions", chat(json!({"max_tokens": 2}))),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn api_key_guards_v1_but_not_health() {
    let s = || state(Some("sekrit"));
    let (status, body) = call(s(), Request::get("/v1/models").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(!body.contains("sekrit"));
    let bearer = Request::get("/v1/models")
        .header("authorization", "Bearer sekrit")
        .body(Body::empty())
        .unwrap();
    assert_eq!(call(s(), bearer).await.0, StatusCode::OK);
    let x_key = Request::get("/v1/models")
        .header("x-api-key", "sekrit")
        .body(Body::empty())
        .unwrap();
    assert_eq!(call(s(), x_key).await.0, StatusCode::OK);
    let wrong = Request::get("/v1/models")
        .header("authorization", "Bearer nope")
        .body(Body::empty())
        .unwrap();
    assert_eq!(call(s(), wrong).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(
        call(s(), Request::get("/health").body(Body::empty()).unwrap())
            .await
            .0,
        StatusCode::OK
    );
}

#[tokio::test]
async fn models_tokenize_admin_and_metrics() {
    let (status, body) = call(
        state(None),
        Request::get("/v1/models").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["data"][0]["id"], MODEL);
    assert_eq!(v["data"][0]["max_model_len"], 1024);

    let (status, body) = call(
        state(None),
        post("/tokenize", json!({"prompt": "Hello world"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let tokens = v["tokens"].clone();
    assert_eq!(v["count"], tokens.as_array().unwrap().len());
    let (_, body) = call(state(None), post("/detokenize", json!({"tokens": tokens}))).await;
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["prompt"],
        "Hello world"
    );
    let (status, body) = call(
        state(None),
        post("/detokenize", json!({"tokens": [99999999]})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let chat_tok = json!({"messages": [{"role": "user", "content": "hi"}]});
    let (status, body) = call(state(None), post("/tokenize", chat_tok)).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    for path in ["/health", "/ready", "/version"] {
        let (status, body) =
            call(state(None), Request::get(path).body(Body::empty()).unwrap()).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
    let (status, body) = call(
        state(None),
        Request::get("/metrics").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    for name in [
        "vllm:num_requests_running",
        "vllm:kv_cache_usage_perc",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:prompt_tokens_total",
        "vllm:iteration_tokens_total_bucket",
    ] {
        assert!(body.contains(name), "{name} missing");
    }
    let (status, body) = call(
        state(None),
        Request::get("/nope").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}

#[tokio::test]
async fn completions_text_tokens_batches_stream_echo_logprobs() {
    let base = json!({"model": MODEL, "prompt": "The capital of France is", "max_tokens": 8});
    let (status, body) = call(state(None), post("/v1/completions", base.clone())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let text = v["choices"][0]["text"].as_str().unwrap().to_owned();
    assert!(!text.is_empty());
    assert_eq!(v["usage"]["completion_tokens"], 8);

    let mut streamed = base.clone();
    streamed["stream"] = json!(true);
    let (_, body) = call(state(None), post("/v1/completions", streamed)).await;
    let joined: String = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| {
            serde_json::from_str::<Value>(d).unwrap()["choices"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert_eq!(joined, text, "streaming and non-streaming differ");

    let mut batch = base.clone();
    batch["prompt"] = json!(["The capital of France is", "One, two, three,"]);
    batch["echo"] = json!(true);
    batch["logprobs"] = json!(2);
    let (status, body) = call(state(None), post("/v1/completions", batch)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let choices = v["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 2);
    assert_eq!(
        choices[0]["text"].as_str().unwrap(),
        format!("The capital of France is{text}")
    );
    assert!(choices[1]["text"]
        .as_str()
        .unwrap()
        .starts_with("One, two, three,"));
    assert_eq!(choices[1]["index"], 1);
    assert_eq!(
        choices[0]["logprobs"]["tokens"].as_array().unwrap().len(),
        8
    );

    let mut ids = base.clone();
    ids["prompt"] = json!([504, 3575, 282, 4649, 314]);
    assert_eq!(
        call(state(None), post("/v1/completions", ids)).await.0,
        StatusCode::OK
    );
    let mut bad = base.clone();
    bad["suffix"] = json!("x");
    let (status, body) = call(state(None), post("/v1/completions", bad)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("suffix"));
}

fn messages(extra: Value) -> Value {
    let mut body = json!({
        "model": MODEL,
        "max_tokens": 24,
        "temperature": 0,
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
    });
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    body
}

#[tokio::test]
async fn anthropic_messages_json_and_event_stream_agree() {
    let (status, body) = call(state(None), post("/v1/messages", messages(json!({})))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["type"], "message");
    assert_eq!(v["stop_reason"], "end_turn");
    let text = v["content"][0]["text"].as_str().unwrap().to_owned();
    assert!(text.contains("Paris"), "{text}");
    assert!(v["usage"]["output_tokens"].as_u64().unwrap() > 0);

    let (status, body) = call(
        state(None),
        post("/v1/messages", messages(json!({"stream": true}))),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let events: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(events.first(), Some(&"message_start"));
    assert_eq!(
        &events[events.len() - 2..],
        &["message_delta", "message_stop"]
    );
    assert!(events.contains(&"content_block_start") && events.contains(&"content_block_stop"));
    let mut streamed = String::new();
    for d in body.lines().filter_map(|l| l.strip_prefix("data: ")) {
        let e: Value = serde_json::from_str(d).unwrap();
        if e["type"] == "content_block_delta" {
            streamed.push_str(e["delta"]["text"].as_str().unwrap());
        }
        if e["type"] == "message_delta" {
            assert_eq!(e["delta"]["stop_reason"], "end_turn");
        }
    }
    assert_eq!(streamed, text, "streaming and non-streaming differ");
}

#[tokio::test]
async fn anthropic_count_tokens_ignores_the_billing_header_and_errors_have_its_shape() {
    let plain = json!({"model": MODEL, "system": [{"type": "text", "text": "Be brief."}],
        "messages": [{"role": "user", "content": "Hi"}]});
    let busted = json!({"model": MODEL, "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=1; cch=93af1;"},
            {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]});
    let count = |b: Value| async move {
        let (status, body) = call(state(None), post("/v1/messages/count_tokens", b)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        serde_json::from_str::<Value>(&body).unwrap()["input_tokens"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(count(plain).await, count(busted).await);

    let (status, body) = call(
        state(None),
        post("/v1/messages", messages(json!({"temperature": 3}))),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["type"], "error");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("temperature"));
    let no_max = json!({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]});
    let (status, body) = call(state(None), post("/v1/messages", no_max)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("max_tokens"), "{body}");
}

/// Two consecutive Claude-Code-shaped requests that differ only in the billing header nonce,
/// cache_control placement and tool order share the whole prompt prefix in the KV cache.
#[tokio::test]
async fn claude_code_cache_busters_do_not_bust_the_prefix_cache() {
    let s = state(None);
    let request = |nonce: &str, swap: bool| {
        let mut tools = vec![
            json!({"name": "read_file", "description": "Read a file", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}),
            json!({"name": "bash", "description": "Run a command", "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}}, "cache_control": {"type": "ephemeral"}}),
        ];
        if swap {
            tools.reverse();
        }
        json!({
            "model": MODEL, "max_tokens": 4, "stream": false,
            "system": [
                {"type": "text", "text": format!("x-anthropic-billing-header: cc_version=2.1; cch={nonce};")},
                {"type": "text", "text": format!("You are Claude Code, a coding agent. Follow the user's instructions carefully and keep answers short and precise.\nToday's date is 2026-11-2{}.", if swap { 4 } else { 3 }), "cache_control": {"type": "ephemeral"}},
            ],
            "tools": tools,
            "tool_choice": {"type": "none"},
            "messages": [{"role": "user", "content": [{"type": "text", "text": "List the files in this directory, please.", "cache_control": if swap { json!({"type": "ephemeral"}) } else { json!(null) }}]}],
        })
    };
    let (status, body) = call(s.clone(), post("/v1/messages", request("a1b2c3", false))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let first: Value = serde_json::from_str(&body).unwrap();
    let prompt = first["usage"]["input_tokens"].as_u64().unwrap();
    let (status, body) = call(s, post("/v1/messages", request("ffee99", true))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let second: Value = serde_json::from_str(&body).unwrap();
    let cached = second["usage"]["cache_read_input_tokens"].as_u64().unwrap();
    let total = cached + second["usage"]["input_tokens"].as_u64().unwrap();
    assert_eq!(
        total, prompt,
        "the two prompts should be identical after normalization"
    );
    // Every full block of the shared prompt is a hit (block size 16).
    assert!(
        cached + 16 > total,
        "only {cached} of {total} prompt tokens came from the cache"
    );
}

#[tokio::test]
async fn a_body_over_the_limit_is_413() {
    let big = "x".repeat(hearth_server::MAX_BODY_BYTES + 1);
    let body = json!({"model": MODEL, "messages": [{"role": "user", "content": big}]});
    let (status, text) = call(state(None), post("/v1/chat/completions", body)).await;
    assert_eq!(
        status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{}",
        &text[..text.len().min(300)]
    );
}
