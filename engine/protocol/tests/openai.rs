//! Round-trips OpenAI-shaped JSON, as the OpenAI SDKs and vLLM clients send and expect
//! it, through the wire types.

use hearth_protocol::openai::*;
use hearth_protocol::tag::{ChatCompletionChunkObject, ChatCompletionObject};
use hearth_protocol::ErrorKind;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

/// Parses `json`, re-serializes, and checks the JSON is unchanged. Comparison goes
/// through text so f32 fields compare by their shortest decimal form.
fn exact_round_trip<T: Serialize + DeserializeOwned>(json: &Value) -> T {
    let parsed: T = serde_json::from_value(json.clone()).expect("fixture parses");
    let text = serde_json::to_string(&parsed).expect("serializes");
    let back: Value = serde_json::from_str(&text).expect("output is JSON");
    assert_eq!(&back, json, "re-serialized JSON differs");
    parsed
}

/// Parses `json` and checks serialize-then-parse gives an equal value.
fn stable<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(json: &Value) -> T {
    let parsed: T = serde_json::from_value(json.clone()).expect("fixture parses");
    let again: T = serde_json::from_str(&serde_json::to_string(&parsed).expect("serializes"))
        .expect("output parses");
    assert_eq!(again, parsed);
    parsed
}

fn sdk_chat_request() -> Value {
    json!({
        "model": "zai-org/GLM-4.6",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": [
                {"type": "text", "text": "What is the weather in Paris?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "auto"}}
            ]},
            {"role": "assistant", "tool_calls": [{
                "id": "call_9f2c", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}
            }]},
            {"role": "tool", "tool_call_id": "call_9f2c", "content": "18C, sunny"}
        ],
        "max_completion_tokens": 512,
        "temperature": 0.7,
        "top_p": 0.95,
        "seed": 42,
        "stop": ["</answer>", "\n\nUser:"],
        "stream": true,
        "stream_options": {"include_usage": true},
        "logprobs": true,
        "top_logprobs": 3,
        "tools": [{
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"]
                },
                "strict": true
            }
        }],
        "tool_choice": "auto",
        "parallel_tool_calls": true,
        "user": "user-1234"
    })
}

#[test]
fn sdk_chat_request_round_trips() {
    let req: ChatCompletionRequest = exact_round_trip(&sdk_chat_request());
    assert!(req.extra.is_empty(), "unexpected extra: {:?}", req.extra);
    assert_eq!(req.max_output_tokens(), Some(512));
    assert!(req.is_stream() && req.include_usage());
    assert_eq!(req.sampling.temperature, Some(0.7));
    assert_eq!(req.sampling.seed, Some(42));
    assert_eq!(req.sampling.stop.as_ref().unwrap().as_slice().len(), 2);
    assert_eq!(
        req.tool_choice,
        Some(ToolChoice::Mode(ToolChoiceMode::Auto))
    );
    assert_eq!(
        req.messages[1].text_content(),
        "What is the weather in Paris?"
    );
    assert!(req.messages[1].content.as_ref().unwrap().has_non_text());
    let call = &req.messages[2].tool_calls.as_ref().unwrap()[0];
    assert_eq!(call.function.name, "get_weather");
    assert!(req.messages[2].content.is_none());
    assert_eq!(req.messages[3].role, Role::Tool);
    assert_eq!(req.messages[3].tool_call_id.as_deref(), Some("call_9f2c"));
}

#[test]
fn vllm_extras_parse_and_unknown_fields_land_in_extra() {
    let body = json!({
        "model": "Qwen/Qwen3-8B",
        "messages": [{"role": "developer", "content": "Be terse."}, {"role": "user", "content": "hi"}],
        "max_tokens": 64,
        "top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1,
        "presence_penalty": 0.5, "frequency_penalty": 0.25,
        "min_tokens": 2, "ignore_eos": false, "stop_token_ids": [151645],
        "skip_special_tokens": true, "include_stop_str_in_output": false,
        "logit_bias": {"1234": -100.0},
        "n": 1, "stop": "###",
        "chat_template_kwargs": {"enable_thinking": false},
        "response_format": {"type": "json_object"},
        "tool_choice": {"type": "function", "function": {"name": "lookup"}},
        "echo": false, "add_generation_prompt": true, "continue_final_message": false,
        "cache_salt": "tenant-a",
        "guided_json": {"type": "object"},
        "best_of": 2
    });
    let req: ChatCompletionRequest = exact_round_trip(&body);
    assert_eq!(req.unknown_fields(), ["guided_json", "best_of"]);
    assert_eq!(req.sampling.top_k, Some(20));
    assert_eq!(req.sampling.stop_token_ids.as_deref(), Some(&[151645][..]));
    assert_eq!(req.sampling.stop.clone().unwrap().into_vec(), ["###"]);
    assert_eq!(req.max_output_tokens(), Some(64));
    assert_eq!(req.messages[0].role, Role::Developer);
    assert_eq!(
        req.chat_template_kwargs.as_ref().unwrap()["enable_thinking"],
        json!(false)
    );
    assert!(req.response_format.is_some());
    assert_eq!(
        req.tool_choice,
        Some(ToolChoice::Named(NamedToolChoice {
            kind: ToolType::Function,
            function: FunctionName {
                name: "lookup".into()
            }
        }))
    );
}

#[test]
fn content_as_string_and_as_parts_both_parse() {
    let as_string: ChatMessage =
        serde_json::from_value(json!({"role": "user", "content": "hello\nworld"})).unwrap();
    let as_parts: ChatMessage = serde_json::from_value(json!({"role": "user", "content": [
        {"type": "text", "text": "hello"}, {"type": "text", "text": "world"}
    ]}))
    .unwrap();
    assert!(matches!(as_string.content, Some(MessageContent::Text(_))));
    assert!(matches!(as_parts.content, Some(MessageContent::Parts(_))));
    assert_eq!(as_string.text_content(), as_parts.text_content());
    assert!(!as_parts.content.unwrap().has_non_text());
}

#[test]
fn assistant_history_accepts_null_content_reasoning_alias_and_sdk_echo_fields() {
    let msg: ChatMessage = serde_json::from_value(json!({
        "role": "assistant", "content": null, "reasoning": "think first",
        "refusal": null, "annotations": []
    }))
    .unwrap();
    assert!(msg.content.is_none());
    assert_eq!(msg.reasoning_content.as_deref(), Some("think first"));
    assert_eq!(msg.text_content(), "");
    let out = serde_json::to_value(&msg).unwrap();
    assert_eq!(
        out,
        json!({"role": "assistant", "reasoning_content": "think first"})
    );
}

#[test]
fn bad_role_and_part_type_are_rejected() {
    let err = serde_json::from_value::<ChatMessage>(json!({"role": "robot", "content": "x"}))
        .unwrap_err();
    assert!(err.to_string().contains("robot"), "{err}");
    let bad_part = json!({"role": "user", "content": [{"type": "video", "video": "x"}]});
    let err = serde_json::from_value::<ChatMessage>(bad_part).unwrap_err();
    assert!(err.to_string().contains("unknown variant `video`"), "{err}");
    let err =
        serde_json::from_value::<ChatMessage>(json!({"role": "user", "content": 5})).unwrap_err();
    assert!(
        err.to_string()
            .contains("a string or an array of content parts"),
        "{err}"
    );
}

#[test]
fn mistyped_union_fields_name_what_is_allowed() {
    let with = |key: &str, value: Value| {
        let body = json!({"model": "m", "messages": [], key: value});
        serde_json::from_value::<ChatCompletionRequest>(body)
            .unwrap_err()
            .to_string()
    };
    let err = with("tool_choice", json!("sometimes"));
    assert!(err.contains("unknown variant `sometimes`"), "{err}");
    let err = with("stop", json!(5));
    assert!(err.contains("a string or an array of strings"), "{err}");
}

#[test]
fn chat_response_round_trips() {
    let body = json!({
        "id": "chatcmpl-8a1b", "object": "chat.completion", "created": 1735689600,
        "model": "zai-org/GLM-4.6",
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant", "content": "Sunny, 18C.",
                "reasoning_content": "The tool said 18C."
            },
            "logprobs": {"content": [{
                "token": "Sunny", "logprob": -0.25, "bytes": [83, 117, 110, 110, 121],
                "top_logprobs": [
                    {"token": "Sunny", "logprob": -0.25, "bytes": [83, 117, 110, 110, 121]},
                    {"token": "It", "logprob": -1.5, "bytes": null}
                ]
            }]},
            "finish_reason": "stop"
        }, {
            "index": 1,
            "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]
            },
            "logprobs": null,
            "finish_reason": "tool_calls"
        }],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
                  "prompt_tokens_details": {"cached_tokens": 64}}
    });
    let resp: ChatCompletionResponse = exact_round_trip(&body);
    assert_eq!(resp.choices[1].finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(resp.usage, Some(Usage::new(100, 20).with_cached_tokens(64)));
}

#[test]
fn response_message_omits_tool_calls_but_keeps_null_content() {
    let msg = ChatResponseMessage {
        role: Role::Assistant,
        ..Default::default()
    };
    assert_eq!(
        serde_json::to_value(&msg).unwrap(),
        json!({"role": "assistant", "content": null})
    );
    let resp = ChatCompletionResponse {
        id: "x".into(),
        object: ChatCompletionObject,
        created: 1,
        model: "m".into(),
        choices: vec![],
        usage: None,
    };
    assert_eq!(
        serde_json::to_value(&resp).unwrap(),
        json!({"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": []})
    );
}

fn chunk(choices: Vec<ChunkChoice>, usage: Option<Usage>) -> ChatCompletionChunk {
    ChatCompletionChunk {
        id: "chatcmpl-1".into(),
        object: ChatCompletionChunkObject,
        created: 1735689600,
        model: "m".into(),
        choices,
        usage,
    }
}

#[test]
fn chunk_omits_none_fields() {
    let first = chunk(
        vec![ChunkChoice {
            delta: ChatDelta {
                role: Some(Role::Assistant),
                ..ChatDelta::text("")
            },
            ..Default::default()
        }],
        None,
    );
    assert_eq!(
        serde_json::to_value(&first).unwrap(),
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1735689600,
               "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
               "finish_reason": null}]})
    );

    let tool = chunk(
        vec![ChunkChoice {
            delta: ChatDelta {
                tool_calls: Some(vec![ToolCallDelta {
                    index: 0,
                    function: FunctionCallDelta {
                        arguments: Some("{\"ci".into()),
                        name: None,
                    },
                    ..Default::default()
                }]),
                ..Default::default()
            },
            ..Default::default()
        }],
        None,
    );
    let v = serde_json::to_value(&tool).unwrap();
    assert_eq!(
        v["choices"][0]["delta"],
        json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"ci"}}]})
    );
    assert!(v["choices"][0].get("logprobs").is_none());
    assert!(v.get("usage").is_none());

    let last = chunk(vec![], Some(Usage::new(7, 3)));
    assert_eq!(
        serde_json::to_value(&last).unwrap()["usage"],
        json!({"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10})
    );
    assert!(ChatDelta::default().is_empty());
}

#[test]
fn vllm_style_chunks_parse() {
    let body = json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1",
            "type": "function", "function": {"name": "get_weather", "arguments": ""}}]},
            "logprobs": null, "finish_reason": null}]
    });
    let c: ChatCompletionChunk = stable(&body);
    let d = &c.choices[0].delta.tool_calls.as_ref().unwrap()[0];
    assert_eq!(d.kind, Some(ToolType::Function));
    assert_eq!(d.function.name.as_deref(), Some("get_weather"));
    assert!(serde_json::from_value::<ChatCompletionChunk>(json!({
        "id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": []
    }))
    .is_err());
}

#[test]
fn completion_prompt_forms_parse() {
    let cases = [
        (json!("Once upon"), 1),
        (json!(["a", "b", "c"]), 3),
        (json!([1, 2, 3]), 1),
        (json!([[1, 2], [3]]), 2),
    ];
    for (prompt, len) in cases {
        let req: CompletionRequest = exact_round_trip(&json!({"model": "m", "prompt": prompt}));
        assert_eq!(req.prompt.len(), len, "{prompt}");
    }
    let tokens: CompletionRequest =
        serde_json::from_value(json!({"model": "m", "prompt": [1, 2]})).unwrap();
    assert_eq!(tokens.prompt, Prompt::Tokens(vec![1, 2]));
}

#[test]
fn completion_request_round_trips() {
    let body = json!({
        "model": "meta-llama/Llama-3.1-8B", "prompt": "def fib(n):", "suffix": "return x",
        "max_tokens": 16, "temperature": 0.0, "top_k": -1, "echo": true, "logprobs": 2,
        "stream": true, "stream_options": {"include_usage": true, "continuous_usage_stats": true},
        "stop": ["\n\n"], "add_special_tokens": false, "best_of": 1, "logit_bias": {"50256": -100.0},
        "prompt_logprobs": 1
    });
    let req: CompletionRequest = exact_round_trip(&body);
    assert_eq!(req.suffix.as_deref(), Some("return x"));
    assert_eq!(req.logprobs, Some(2));
    assert!(req.is_stream() && req.include_usage());
    assert_eq!(
        req.stream_options.unwrap().continuous_usage_stats,
        Some(true)
    );
    assert_eq!(req.unknown_fields(), ["prompt_logprobs"]);
}

#[test]
fn completion_response_round_trips() {
    let body = json!({
        "id": "cmpl-1", "object": "text_completion", "created": 1735689600, "model": "m",
        "choices": [{"index": 0, "text": " a + b", "finish_reason": "length",
            "logprobs": {"text_offset": [0, 2], "token_logprobs": [null, -0.5],
                "tokens": [" a", " +"], "top_logprobs": [null, {" +": -0.5, " -": -2.0}]}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    });
    let resp: CompletionResponse = exact_round_trip(&body);
    let lp = resp.choices[0].logprobs.as_ref().unwrap();
    assert_eq!(
        lp.top_logprobs[1].as_ref().unwrap().keys().next().unwrap(),
        " +"
    );
    let chunk = json!({"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "text": " a", "logprobs": null, "finish_reason": null}]});
    let _: CompletionChunk = exact_round_trip(&chunk);
}

#[test]
fn model_list_round_trips() {
    let body = json!({"object": "list", "data": [{"id": "glm-4.6", "object": "model",
        "created": 1735689600, "owned_by": "hearth", "max_model_len": 131072}]});
    let list: ModelList = exact_round_trip(&body);
    assert_eq!(list.data[0].max_model_len, Some(131072));
    let built = ModelList::new(vec![ModelCard {
        id: "x".into(),
        ..Default::default()
    }]);
    assert_eq!(
        serde_json::to_value(&built).unwrap()["data"][0]["object"],
        json!("model")
    );
}

#[test]
fn tokenize_requests_pick_their_shape() {
    let plain: TokenizeRequest =
        exact_round_trip(&json!({"model": "m", "prompt": "Hello", "add_special_tokens": true}));
    assert!(matches!(plain, TokenizeRequest::Completion(ref r) if r.prompt == "Hello"));

    let chat: TokenizeRequest = exact_round_trip(&json!({
        "messages": [{"role": "user", "content": "Hi"}],
        "add_generation_prompt": true, "chat_template_kwargs": {"enable_thinking": true}
    }));
    assert!(matches!(chat, TokenizeRequest::Chat(ref r) if r.model.is_none()));

    let both = serde_json::from_value::<TokenizeRequest>(json!({"prompt": "a", "messages": []}));
    assert!(both.unwrap_err().to_string().contains("not both"));
    let neither = serde_json::from_value::<TokenizeRequest>(json!({"model": "m"}));
    assert!(neither
        .unwrap_err()
        .to_string()
        .contains("`prompt` or `messages`"));
    let unknown = serde_json::from_value::<TokenizeRequest>(json!({"prompt": "a", "foo": 1}));
    assert!(unknown.unwrap_err().to_string().contains("foo"));

    let resp = TokenizeResponse::new(vec![9906, 11], 4096);
    let _: TokenizeResponse = exact_round_trip(&serde_json::to_value(&resp).unwrap());
    assert_eq!(
        serde_json::to_value(&resp).unwrap(),
        json!({"count": 2, "max_model_len": 4096, "tokens": [9906, 11]})
    );
    let de: DetokenizeRequest = exact_round_trip(&json!({"model": "m", "tokens": [9906, 11]}));
    assert_eq!(de.tokens, [9906, 11]);
    let _: DetokenizeResponse = exact_round_trip(&json!({"prompt": "Hello,"}));
}

#[test]
fn error_response_shapes() {
    let err = ErrorResponse::invalid_request("`temperature` must be in [0, 2], got 3")
        .with_param("temperature");
    assert_eq!(
        serde_json::to_value(&err).unwrap(),
        json!({"error": {"message": "`temperature` must be in [0, 2], got 3",
            "type": "invalid_request_error", "param": "temperature", "code": 400}})
    );
    assert_eq!(err.status(), Some(400));
    let cases = [
        (
            ErrorResponse::authentication("x"),
            401,
            "authentication_error",
        ),
        (ErrorResponse::not_found("x"), 404, "not_found_error"),
        (
            ErrorResponse::request_too_large("x"),
            413,
            "request_too_large",
        ),
        (
            ErrorResponse::unprocessable("x"),
            422,
            "unprocessable_entity_error",
        ),
        (ErrorResponse::internal("x"), 500, "server_error"),
        (
            ErrorResponse::unavailable("x"),
            503,
            "service_unavailable_error",
        ),
    ];
    for (e, status, kind) in cases {
        assert_eq!(e.status(), Some(status));
        assert_eq!(e.error.kind, kind);
    }
    assert_eq!(ErrorKind::NotFound.status(), 404);
    // OpenAI's own errors carry a string code; clients must still parse them.
    let openai: ErrorResponse = exact_round_trip(&json!({"error": {
        "message": "The model `gpt-9` does not exist", "type": "invalid_request_error",
        "param": null, "code": "model_not_found"}}));
    assert_eq!(
        openai.error.code,
        Some(ErrorCode::Name("model_not_found".into()))
    );
    assert_eq!(openai.status(), None);
}
