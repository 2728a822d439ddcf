//! Anthropic streaming: the server-sent events of a `/v1/messages` stream, each written
//! as `event: <name>` plus `data: <json>`. Order: `message_start`, then per block
//! `content_block_start` / `content_block_delta`* / `content_block_stop`, then
//! `message_delta` and `message_stop`; `ping` and `error` may appear anywhere.

use serde::{Deserialize, Serialize};

use super::error::ErrorBody;
use super::messages::{ContentBlock, MessagesResponse, StopReason};

/// One event of a messages stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    /// The message with empty `content` and the input usage.
    MessageStart {
        message: MessagesResponse,
    },
    /// A block opens: empty text, empty thinking, or a tool_use with `input: {}`.
    ContentBlockStart {
        index: u32,
        content_block: ContentBlock,
    },
    ContentBlockDelta {
        index: u32,
        delta: ContentDelta,
    },
    ContentBlockStop {
        index: u32,
    },
    /// Stop reason and cumulative output usage, once at the end.
    MessageDelta {
        delta: MessageDeltaBody,
        usage: DeltaUsage,
    },
    MessageStop,
    Ping,
    Error {
        error: ErrorBody,
    },
}

impl StreamEvent {
    /// The SSE `event:` name, equal to the JSON `type`.
    pub fn event_name(&self) -> &'static str {
        match self {
            Self::MessageStart { .. } => "message_start",
            Self::ContentBlockStart { .. } => "content_block_start",
            Self::ContentBlockDelta { .. } => "content_block_delta",
            Self::ContentBlockStop { .. } => "content_block_stop",
            Self::MessageDelta { .. } => "message_delta",
            Self::MessageStop => "message_stop",
            Self::Ping => "ping",
            Self::Error { .. } => "error",
        }
    }

    /// The event as SSE text: `event: <name>\ndata: <json>\n\n`.
    pub fn to_sse(&self) -> String {
        // Every field is a string, number, bool or a `Value` with string keys, which
        // serde_json always serializes.
        let data = serde_json::to_string(self).expect("stream events always serialize");
        format!("event: {}\ndata: {}\n\n", self.event_name(), data)
    }

    /// A `content_block_delta` carrying text.
    pub fn text_delta(index: u32, text: impl Into<String>) -> Self {
        Self::ContentBlockDelta {
            index,
            delta: ContentDelta::TextDelta { text: text.into() },
        }
    }
}

/// The increment inside a `content_block_delta`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentDelta {
    TextDelta {
        text: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    /// A piece of the tool input's JSON text; pieces concatenate to the full object.
    InputJsonDelta {
        partial_json: String,
    },
}

/// `message_delta.delta`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageDeltaBody {
    pub stop_reason: Option<StopReason>,
    pub stop_sequence: Option<String>,
}

/// `message_delta.usage`: cumulative counts; only `output_tokens` is always present.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeltaUsage {
    pub output_tokens: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation_input_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_input_tokens: Option<u32>,
}
