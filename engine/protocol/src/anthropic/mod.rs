//! Anthropic Messages API wire types: what Claude Code and the Anthropic SDKs send to
//! `/v1/messages` and `/v1/messages/count_tokens`, and what they expect back.

pub mod error;
pub mod messages;
pub mod stream;

pub use error::{ErrorBody, ErrorResponse};
pub use messages::{
    CacheControl, ContentBlock, CountTokensRequest, CountTokensResponse, ImageSource, Message,
    MessageContent, MessagesRequest, MessagesResponse, Metadata, Role, StopReason, SystemBlock,
    SystemPrompt, ThinkingConfig, Tool, ToolChoice, ToolResultContent, Usage,
};
pub use stream::{ContentDelta, DeltaUsage, MessageDeltaBody, StreamEvent};
