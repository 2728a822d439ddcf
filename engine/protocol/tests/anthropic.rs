//! Round-trips Anthropic-shaped JSON, as Claude Code and the Anthropic SDKs send and
//! expect it, through the wire types.

use hearth_protocol::anthropic::*;
use hearth_protocol::ErrorKind;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

/// Parses `json`, re-serializes, and checks the JSON is unchanged (through text, so f32
/// fields compare by their shortest decimal form).
fn exact_round_trip<T: Serialize + DeserializeOwned>(json: &Value) -> T {
    let parsed: T = serde_json::from_value(json.clone()).expect("fixture parses");
    let back: Value = serde_json::from_str(&serde_json::to_string(&parsed).expect("serializes"))
        .expect("output parses");
    assert_eq!(&back, json, "re-serialized JSON differs");
    parsed
}

fn claude_code_request() -> Value {
    json!({
        "model": "claude-sonnet-4-5-20250929",
        "max_tokens": 32000,
        "temperature": 1.0,
        "stream": true,
        "system": [
            {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.",
             "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "You are an interactive CLI tool that helps users with software engineering tasks.",
             "cache_control": {"type": "ephemeral", "ttl": "1h"}}
        ],
        "metadata": {"user_id": "user_3f2a_account__session_9c1d"},
        "thinking": {"type": "enabled", "budget_tokens": 10000},
        "tools": [{
            "name": "Bash",
            "description": "Executes a given bash command in a persistent shell session.",
            "input_schema": {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command to execute"},
                    "timeout": {"type": "number"}
                },
                "required": ["command"],
                "additionalProperties": false
            }
        }, {
            "name": "Read",
            "description": "Reads a file from the local filesystem.",
            "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}},
                             "required": ["file_path"]},
            "cache_control": {"type": "ephemeral"}
        }],
        "tool_choice": {"type": "auto"},
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "<system-reminder>\nContext here\n</system-reminder>"},
                {"type": "text", "text": "list the files in src"}
            ]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "I should run ls.", "signature": "EqQBCkYIBxgCKkA="},
                {"type": "text", "text": "I'll list them."},
                {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "Bash",
                 "input": {"command": "ls src", "timeout": 120000}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
                 "content": "lib.rs\nmain.rs", "is_error": false},
                {"type": "text", "text": "now read lib.rs", "cache_control": {"type": "ephemeral"}}
            ]},
            {"role": "assistant", "content": [
                {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
                {"type": "tool_use", "id": "toolu_02", "name": "Read",
                 "input": {"file_path": "/repo/src/lib.rs"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_02", "content": [
                    {"type": "text", "text": "pub fn main() {}"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
                ]}
            ]}
        ]
    })
}

#[test]
fn claude_code_request_round_trips() {
    let req: MessagesRequest = exact_round_trip(&claude_code_request());
    assert!(req.extra.is_empty(), "unexpected extra: {:?}", req.extra);
    assert!(req.is_stream());
    assert_eq!(req.max_tokens, 32000);
    let system = req.system.as_ref().unwrap();
    assert!(system.text().starts_with("You are Claude Code"));
    assert!(system.text().contains("\nYou are an interactive CLI tool"));
    assert_eq!(
        req.thinking,
        Some(ThinkingConfig::Enabled {
            budget_tokens: Some(10000)
        })
    );
    assert!(req.thinking.unwrap().is_enabled());
    assert_eq!(
        req.tool_choice,
        Some(ToolChoice::Auto {
            disable_parallel_tool_use: None
        })
    );
    assert_eq!(
        req.tools.as_ref().unwrap()[0]
            .input_schema
            .as_ref()
            .unwrap()["required"],
        json!(["command"])
    );

    let blocks = req.messages[1].content.blocks();
    assert_eq!(
        blocks
            .iter()
            .map(ContentBlock::type_name)
            .collect::<Vec<_>>(),
        ["thinking", "text", "tool_use"]
    );
    assert!(
        matches!(&blocks[2], ContentBlock::ToolUse { input, .. } if input["command"] == "ls src")
    );
    assert_eq!(req.messages[1].text_content(), "I'll list them.");
    match &req.messages[2].content.blocks()[0] {
        ContentBlock::ToolResult {
            content: Some(c),
            is_error,
            ..
        } => {
            assert_eq!(c.text(), "lib.rs\nmain.rs");
            assert_eq!(*is_error, Some(false));
        }
        other => panic!("expected tool_result, got {other:?}"),
    }
    match &req.messages[4].content.blocks()[0] {
        ContentBlock::ToolResult {
            content: Some(c @ ToolResultContent::Blocks(_)),
            ..
        } => {
            assert_eq!(c.text(), "pub fn main() {}")
        }
        other => panic!("expected tool_result with blocks, got {other:?}"),
    }
}

#[test]
fn string_content_and_string_system_parse() {
    let req: MessagesRequest = exact_round_trip(&json!({
        "model": "m", "max_tokens": 1024, "system": "Be brief.",
        "messages": [{"role": "user", "content": "Hello, Claude"}],
        "stop_sequences": ["\n\nHuman:"], "top_k": 40, "top_p": 0.9,
        "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": true},
        "thinking": {"type": "disabled"}
    }));
    assert_eq!(req.system.as_ref().unwrap().text(), "Be brief.");
    assert_eq!(req.messages[0].text_content(), "Hello, Claude");
    assert_eq!(
        req.messages[0].content.blocks().into_owned(),
        [ContentBlock::text("Hello, Claude")]
    );
    assert!(!req.thinking.unwrap().is_enabled());
}

#[test]
fn unknown_fields_land_in_extra_and_max_tokens_is_required() {
    let req: MessagesRequest = serde_json::from_value(json!({
        "model": "m", "max_tokens": 10, "messages": [],
        "service_tier": "auto", "context_management": {"edits": []}
    }))
    .unwrap();
    assert_eq!(req.unknown_fields(), ["service_tier", "context_management"]);
    let err = serde_json::from_value::<MessagesRequest>(json!({"model": "m", "messages": []}))
        .unwrap_err();
    assert!(err.to_string().contains("max_tokens"), "{err}");
    let bad_block = json!({"role": "user", "content": [{"type": "hologram"}]});
    let err = serde_json::from_value::<Message>(bad_block).unwrap_err();
    assert!(err.to_string().contains("hologram"), "{err}");
}

#[test]
fn messages_response_round_trips() {
    let body = json!({
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": "The user wants the weather.", "signature": "EqQBCgIYAhIM"},
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"location": "Paris"}}
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 2095, "output_tokens": 503,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1800}
    });
    let resp: MessagesResponse = exact_round_trip(&body);
    assert_eq!(resp.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(resp.usage.cache_read_input_tokens, Some(1800));

    let built = MessagesResponse::new("msg_1", "m", vec![ContentBlock::text("hi")]);
    assert_eq!(
        serde_json::to_value(&built).unwrap(),
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
               "content": [{"type": "text", "text": "hi"}], "stop_reason": null,
               "stop_sequence": null, "usage": {"input_tokens": 0, "output_tokens": 0}})
    );
}

#[test]
fn stream_events_serialize_as_sse_and_parse_back() {
    let mut start = MessagesResponse::new("msg_1", "m", vec![]);
    start.usage.input_tokens = 25;
    let events = vec![
        StreamEvent::MessageStart { message: start },
        StreamEvent::ContentBlockStart {
            index: 0,
            content_block: ContentBlock::Thinking {
                thinking: String::new(),
                signature: String::new(),
            },
        },
        StreamEvent::ContentBlockDelta {
            index: 0,
            delta: ContentDelta::ThinkingDelta {
                thinking: "hmm".into(),
            },
        },
        StreamEvent::ContentBlockDelta {
            index: 0,
            delta: ContentDelta::SignatureDelta {
                signature: "sig".into(),
            },
        },
        StreamEvent::ContentBlockStop { index: 0 },
        StreamEvent::Ping,
        StreamEvent::ContentBlockStart {
            index: 1,
            content_block: ContentBlock::text(""),
        },
        StreamEvent::text_delta(1, "Hello"),
        StreamEvent::ContentBlockStop { index: 1 },
        StreamEvent::ContentBlockStart {
            index: 2,
            content_block: ContentBlock::tool_use("toolu_1", "Bash", json!({})),
        },
        StreamEvent::ContentBlockDelta {
            index: 2,
            delta: ContentDelta::InputJsonDelta {
                partial_json: "{\"command\": \"ls\"}".into(),
            },
        },
        StreamEvent::ContentBlockStop { index: 2 },
        StreamEvent::MessageDelta {
            delta: MessageDeltaBody {
                stop_reason: Some(StopReason::ToolUse),
                stop_sequence: None,
            },
            usage: DeltaUsage {
                output_tokens: 15,
                ..Default::default()
            },
        },
        StreamEvent::MessageStop,
    ];
    for event in &events {
        let sse = event.to_sse();
        let (head, rest) = sse.split_once('\n').unwrap();
        assert_eq!(head, format!("event: {}", event.event_name()));
        let data = rest
            .strip_prefix("data: ")
            .unwrap()
            .strip_suffix("\n\n")
            .unwrap();
        let value: Value = serde_json::from_str(data).unwrap();
        assert_eq!(value["type"], event.event_name());
        let back: StreamEvent = serde_json::from_value(value).unwrap();
        assert_eq!(&back, event);
    }
    let wire = |i: usize| serde_json::to_value(&events[i]).unwrap();
    assert_eq!(
        wire(1),
        json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "thinking", "thinking": ""}})
    );
    assert_eq!(
        wire(7),
        json!({"type": "content_block_delta", "index": 1,
        "delta": {"type": "text_delta", "text": "Hello"}})
    );
    assert_eq!(
        wire(9),
        json!({"type": "content_block_start", "index": 2,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}})
    );
    assert_eq!(
        wire(12),
        json!({"type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 15}})
    );
    assert_eq!(
        events[13].to_sse(),
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
    );
}

#[test]
fn stream_error_event_and_error_response() {
    let event = StreamEvent::Error {
        error: ErrorBody::new(ErrorKind::Unavailable, "Overloaded"),
    };
    assert_eq!(
        serde_json::to_value(&event).unwrap(),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
    let resp: ErrorResponse = exact_round_trip(&json!({"type": "error",
        "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"}}));
    assert_eq!(
        resp,
        ErrorResponse::invalid_request("max_tokens: Field required")
    );
    assert_eq!(
        ErrorResponse::authentication("x").error.kind,
        "authentication_error"
    );
    assert_eq!(ErrorResponse::not_found("x").error.kind, "not_found_error");
    assert_eq!(
        ErrorResponse::request_too_large("x").error.kind,
        "request_too_large"
    );
    assert_eq!(ErrorResponse::internal("x").error.kind, "api_error");
    assert_eq!(
        ErrorResponse::overloaded("x").error.kind,
        "overloaded_error"
    );
    assert!(serde_json::from_value::<ErrorResponse>(
        json!({"type": "oops", "error": {"type": "a", "message": "b"}})
    )
    .is_err());
}

#[test]
fn count_tokens_round_trips() {
    let mut body = claude_code_request();
    let obj = body.as_object_mut().unwrap();
    for key in ["max_tokens", "temperature", "stream", "metadata"] {
        obj.remove(key);
    }
    let req: CountTokensRequest = exact_round_trip(&body);
    assert!(req.extra.is_empty());
    assert_eq!(req.messages.len(), 5);
    let _: CountTokensResponse = exact_round_trip(&json!({"input_tokens": 2095}));
}
