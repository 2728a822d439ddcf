//! `/v1/messages` and `/v1/messages/count_tokens`: the request (conversation, system
//! prompt, tools, thinking), content blocks and the non-streaming response. Streaming
//! events are in `stream.rs`.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::str_or::impl_str_or_deserialize;
use crate::tag::{AssistantRole, MessageType, TextType};

/// Body of `POST /v1/messages`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MessagesRequest {
    pub model: String,
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<SystemPrompt>,
    /// Required by Anthropic: the output-length cap.
    pub max_tokens: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<ThinkingConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// Every key this type does not know; the server rejects or ignores them by name.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl MessagesRequest {
    /// Whether the client asked for server-sent events.
    pub fn is_stream(&self) -> bool {
        self.stream.unwrap_or(false)
    }

    /// Names of the fields collected in `extra`, for an error message.
    pub fn unknown_fields(&self) -> Vec<&str> {
        self.extra.keys().map(String::as_str).collect()
    }
}

/// Body of `POST /v1/messages/count_tokens`: a messages request without `max_tokens`
/// or sampling.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CountTokensRequest {
    pub model: String,
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<SystemPrompt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<ThinkingConfig>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Body returned by `/v1/messages/count_tokens`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountTokensResponse {
    pub input_tokens: u32,
}

/// `metadata`: Claude Code puts a session/user id here.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
}

/// `system`: a string or a list of text blocks (each may carry `cache_control`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SystemPrompt {
    Text(String),
    Blocks(Vec<SystemBlock>),
}

impl_str_or_deserialize!(
    SystemPrompt,
    Text,
    Blocks,
    "a string or an array of text blocks"
);

impl SystemPrompt {
    /// The system prompt as one string, blocks joined with `"\n"`.
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            Self::Text(s) => Cow::Borrowed(s),
            Self::Blocks(blocks) => match blocks.as_slice() {
                [one] => Cow::Borrowed(&one.text),
                _ => Cow::Owned(
                    blocks
                        .iter()
                        .map(|b| b.text.as_str())
                        .collect::<Vec<_>>()
                        .join("\n"),
                ),
            },
        }
    }
}

/// One text block of a `system` array.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SystemBlock {
    #[serde(rename = "type")]
    pub kind: TextType,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
}

/// A prompt-caching breakpoint. Accepted wherever Anthropic allows it and otherwise
/// ignored: Hearth's prefix cache works without hints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheControl {
    /// `"ephemeral"` today; kept as a string so newer kinds still parse.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
}

/// Who wrote a message; Anthropic has no system or tool role.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    #[default]
    User,
    Assistant,
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: MessageContent,
}

impl Message {
    /// A message with plain-text content.
    pub fn new(role: Role, text: impl Into<String>) -> Self {
        Self {
            role,
            content: MessageContent::Text(text.into()),
        }
    }

    /// The text blocks joined with `"\n"`; tool calls, results and thinking are skipped.
    pub fn text_content(&self) -> String {
        self.content.text().into_owned()
    }
}

/// `content`: a string (shorthand for one text block) or a list of blocks.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Blocks(Vec<ContentBlock>),
}

impl_str_or_deserialize!(
    MessageContent,
    Text,
    Blocks,
    "a string or an array of content blocks"
);

impl MessageContent {
    /// The content as blocks, turning the string shorthand into one text block.
    pub fn blocks(&self) -> Cow<'_, [ContentBlock]> {
        match self {
            Self::Text(s) => Cow::Owned(vec![ContentBlock::text(s.clone())]),
            Self::Blocks(b) => Cow::Borrowed(b),
        }
    }

    /// The text blocks joined with `"\n"`.
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            Self::Text(s) => Cow::Borrowed(s),
            Self::Blocks(blocks) => join_text(blocks),
        }
    }
}

fn join_text(blocks: &[ContentBlock]) -> Cow<'_, str> {
    let texts: Vec<&str> = blocks.iter().filter_map(ContentBlock::as_text).collect();
    match texts.as_slice() {
        [one] => Cow::Borrowed(one),
        _ => Cow::Owned(texts.join("\n")),
    }
}

/// A typed block of message content, in requests (history) and responses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Image {
        source: ImageSource,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolUse {
        id: String,
        name: String,
        /// The arguments as a JSON object (not a string, unlike OpenAI).
        input: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<ToolResultContent>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        is_error: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Thinking {
        thinking: String,
        /// Empty in `content_block_start`; the signature arrives as a `signature_delta`.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
}

impl ContentBlock {
    /// A text block without cache control.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text {
            text: text.into(),
            cache_control: None,
        }
    }

    /// A tool-use block without cache control.
    pub fn tool_use(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        Self::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
            cache_control: None,
        }
    }

    /// The text of a `text` block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text { text, .. } => Some(text),
            _ => None,
        }
    }

    /// The wire name of the block's type (`"tool_use"`), for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Text { .. } => "text",
            Self::Image { .. } => "image",
            Self::ToolUse { .. } => "tool_use",
            Self::ToolResult { .. } => "tool_result",
            Self::Thinking { .. } => "thinking",
            Self::RedactedThinking { .. } => "redacted_thinking",
        }
    }
}

/// Where an image's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ImageSource {
    Base64 { media_type: String, data: String },
    Url { url: String },
}

/// `tool_result.content`: a string or a list of (text or image) blocks.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ToolResultContent {
    Text(String),
    Blocks(Vec<ContentBlock>),
}

impl_str_or_deserialize!(
    ToolResultContent,
    Text,
    Blocks,
    "a string or an array of content blocks"
);

impl ToolResultContent {
    /// The text blocks joined with `"\n"`.
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            Self::Text(s) => Cow::Borrowed(s),
            Self::Blocks(blocks) => join_text(blocks),
        }
    }
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of `input`. Server tools (`web_search_...`) have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// Absent or `"custom"` for client tools; a versioned name for Anthropic's server
    /// tools, which the server can reject by name.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
}

/// `tool_choice`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    Auto {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        disable_parallel_tool_use: Option<bool>,
    },
    /// The model must call some tool.
    Any {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        disable_parallel_tool_use: Option<bool>,
    },
    /// The model must call the named tool.
    Tool {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        disable_parallel_tool_use: Option<bool>,
    },
    /// No tool calls.
    None,
}

/// `thinking`: extended reasoning on or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ThinkingConfig {
    Enabled {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        budget_tokens: Option<u32>,
    },
    Disabled,
    /// Newer clients let the model choose how much to think.
    Adaptive,
}

impl ThinkingConfig {
    /// Whether the model should reason before answering.
    pub fn is_enabled(self) -> bool {
        !matches!(self, Self::Disabled)
    }
}

/// Body of a non-streaming `/v1/messages` response, and the `message` of `message_start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessagesResponse {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: MessageType,
    pub role: AssistantRole,
    pub model: String,
    pub content: Vec<ContentBlock>,
    /// `null` only in `message_start`.
    pub stop_reason: Option<StopReason>,
    /// Which stop sequence matched, when `stop_reason` is `stop_sequence`.
    pub stop_sequence: Option<String>,
    pub usage: Usage,
}

impl MessagesResponse {
    /// An assistant message with the given content and no stop reason yet.
    pub fn new(
        id: impl Into<String>,
        model: impl Into<String>,
        content: Vec<ContentBlock>,
    ) -> Self {
        Self {
            id: id.into(),
            kind: MessageType,
            role: AssistantRole,
            model: model.into(),
            content,
            stop_reason: None,
            stop_sequence: None,
            usage: Usage::default(),
        }
    }
}

/// Why the assistant stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    MaxTokens,
    StopSequence,
    ToolUse,
    PauseTurn,
    Refusal,
}

/// Token accounting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u32,
    pub output_tokens: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation_input_tokens: Option<u32>,
    /// Prompt tokens served from the prefix cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_input_tokens: Option<u32>,
}
