//! `/v1/chat/completions`: the request (messages, tools, sampling), the full response and
//! the streamed chunk. Conversion to prompts and validation live in the server and text
//! crates; this file only fixes the JSON shapes.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::common::{ChatLogprobs, FinishReason, SamplingOptions, StreamOptions, Usage};
use crate::str_or::impl_str_or_deserialize;
use crate::tag::{ChatCompletionChunkObject, ChatCompletionObject};

/// Body of `POST /v1/chat/completions`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletionRequest {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    /// Deprecated by OpenAI in favour of `max_completion_tokens`; both are accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    #[serde(flatten)]
    pub sampling: SamplingOptions,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_logprobs: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// vLLM extra: passed to the chat template (`{"enable_thinking": false}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_template_kwargs: Option<Map<String, Value>>,
    /// Kept opaque so the server can reject structured output by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// vLLM extra: prepend the last message's content to the output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub echo: Option<bool>,
    /// vLLM extra; defaults to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_generation_prompt: Option<bool>,
    /// vLLM extra: continue the final assistant message instead of starting a new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continue_final_message: Option<bool>,
    /// vLLM extra: isolates this request's prefix-cache entries from other tenants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_salt: Option<String>,
    /// Every key this type does not know; the server rejects them by name.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ChatCompletionRequest {
    /// The output-length cap, preferring `max_completion_tokens` over `max_tokens`.
    pub fn max_output_tokens(&self) -> Option<u32> {
        self.max_completion_tokens.or(self.max_tokens)
    }

    /// Whether the client asked for server-sent events.
    pub fn is_stream(&self) -> bool {
        self.stream.unwrap_or(false)
    }

    /// Whether the stream should end with a usage chunk.
    pub fn include_usage(&self) -> bool {
        self.stream_options
            .and_then(|o| o.include_usage)
            .unwrap_or(false)
    }

    /// Names of the fields collected in `extra`, for an error message.
    pub fn unknown_fields(&self) -> Vec<&str> {
        self.extra.keys().map(String::as_str).collect()
    }
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    /// OpenAI's newer name for `system`; templates usually treat it the same.
    Developer,
    #[default]
    User,
    Assistant,
    Tool,
}

impl Role {
    /// The role as written on the wire and passed to chat templates.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::Developer => "developer",
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::Tool => "tool",
        }
    }
}

/// One message of the conversation. A flat struct rather than an enum per role, because
/// chat templates consume messages as loosely-typed dicts and the server checks per-role
/// rules (`tool` needs `tool_call_id`) when it validates.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    /// Absent or null for an assistant message that only calls tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<MessageContent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Reasoning from an earlier assistant turn; vLLM also accepts it as `reasoning`.
    #[serde(default, alias = "reasoning", skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
}

impl ChatMessage {
    /// A message with plain-text content.
    pub fn new(role: Role, text: impl Into<String>) -> Self {
        Self {
            role,
            content: Some(MessageContent::Text(text.into())),
            ..Self::default()
        }
    }

    pub fn system(text: impl Into<String>) -> Self {
        Self::new(Role::System, text)
    }

    pub fn user(text: impl Into<String>) -> Self {
        Self::new(Role::User, text)
    }

    pub fn assistant(text: impl Into<String>) -> Self {
        Self::new(Role::Assistant, text)
    }

    /// A tool result answering the call `tool_call_id`.
    pub fn tool(tool_call_id: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            tool_call_id: Some(tool_call_id.into()),
            ..Self::new(Role::Tool, text)
        }
    }

    /// The message's text; parts are joined as [`MessageContent::text`] does. Empty when
    /// there is no content.
    pub fn text_content(&self) -> String {
        self.content
            .as_ref()
            .map(|c| c.text().into_owned())
            .unwrap_or_default()
    }
}

/// `content`: a string, or an array of typed parts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

impl_str_or_deserialize!(
    MessageContent,
    Text,
    Parts,
    "a string or an array of content parts"
);

impl MessageContent {
    /// The text parts joined with `"\n"` (non-text parts skipped), which is how vLLM
    /// flattens parts for text-only templates, so prompts match between the two.
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            Self::Text(s) => Cow::Borrowed(s),
            Self::Parts(parts) => {
                let texts: Vec<&str> = parts.iter().filter_map(ContentPart::as_text).collect();
                match texts.as_slice() {
                    [one] => Cow::Borrowed(one),
                    _ => Cow::Owned(texts.join("\n")),
                }
            }
        }
    }

    /// Whether any part is not text (an image, audio, ...).
    pub fn has_non_text(&self) -> bool {
        matches!(self, Self::Parts(parts) if parts.iter().any(|p| p.as_text().is_none()))
    }
}

/// One element of a `content` array.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    Text {
        text: String,
    },
    ImageUrl {
        image_url: ImageUrl,
    },
    /// Kept opaque: parsed so the server can name it when rejecting it.
    InputAudio {
        input_audio: Value,
    },
    /// An assistant refusal echoed back in history.
    Refusal {
        refusal: String,
    },
}

impl ContentPart {
    /// The text of a `text` part.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text { text } => Some(text),
            _ => None,
        }
    }
}

/// `image_url` part payload: an `https:` or `data:` URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageUrl {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The only tool type OpenAI's chat API has. Defaults so a missing `type` still parses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolType {
    #[default]
    Function,
}

/// A tool call made by the assistant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type", default)]
    pub kind: ToolType,
    pub function: FunctionCall,
}

/// Name and JSON-encoded arguments of a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    /// A JSON object encoded as a string, as OpenAI sends it.
    pub arguments: String,
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    #[serde(rename = "type", default)]
    pub kind: ToolType,
    pub function: FunctionDefinition,
}

/// A function's name, description and JSON Schema for its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionDefinition {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// `tool_choice`: a mode string or a named function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ToolChoice {
    Mode(ToolChoiceMode),
    Named(NamedToolChoice),
}

impl_str_or_deserialize!(
    ToolChoice,
    Mode,
    Named,
    "\"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}"
);

/// `"none"`, `"auto"` or `"required"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoiceMode {
    None,
    Auto,
    Required,
}

/// `{"type": "function", "function": {"name": ...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamedToolChoice {
    #[serde(rename = "type", default)]
    pub kind: ToolType,
    pub function: FunctionName,
}

/// `{"name": ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionName {
    pub name: String,
}

/// Body of a non-streaming chat completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletionResponse {
    pub id: String,
    pub object: ChatCompletionObject,
    /// Unix seconds.
    pub created: u64,
    pub model: String,
    pub choices: Vec<ChatChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// One completed choice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatChoice {
    pub index: u32,
    pub message: ChatResponseMessage,
    /// `null` unless logprobs were requested, as OpenAI sends it.
    #[serde(default)]
    pub logprobs: Option<ChatLogprobs>,
    pub finish_reason: Option<FinishReason>,
}

/// The assistant message of a finished choice.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatResponseMessage {
    pub role: Role,
    /// `null` when the model only called tools, as OpenAI sends it.
    #[serde(default)]
    pub content: Option<String>,
    /// Reasoning split out by the reasoning parser (vLLM's older field name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Reasoning under vLLM's newer field name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
}

/// One server-sent event of a streaming chat completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletionChunk {
    pub id: String,
    pub object: ChatCompletionChunkObject,
    pub created: u64,
    pub model: String,
    /// Empty on the final usage-only chunk.
    pub choices: Vec<ChunkChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// One choice's increment within a chunk.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChunkChoice {
    pub index: u32,
    pub delta: ChatDelta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<ChatLogprobs>,
    /// `null` until the last chunk of the choice.
    #[serde(default)]
    pub finish_reason: Option<FinishReason>,
}

/// What a chunk adds to the message. Every field is omitted when `None`, so a delta never
/// carries `"content": null` next to a tool-call fragment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatDelta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
}

impl ChatDelta {
    /// A delta carrying only text.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: Some(text.into()),
            ..Self::default()
        }
    }

    /// Whether the delta carries nothing at all.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// A fragment of a tool call: the first carries `id`, `type` and the name; later ones
/// append to `arguments`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallDelta {
    pub index: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ToolType>,
    #[serde(default)]
    pub function: FunctionCallDelta,
}

/// The name and/or a piece of the arguments string.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCallDelta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
}
