//! OpenAI-compatible wire types, with the vLLM extensions clients commonly send
//! (`top_k`, `min_p`, `repetition_penalty`, `chat_template_kwargs`, `/tokenize`, ...).

pub mod chat;
pub mod common;
pub mod completions;
pub mod error;
pub mod models;
pub mod tokenize;

pub use chat::{
    ChatChoice, ChatCompletionChunk, ChatCompletionRequest, ChatCompletionResponse, ChatDelta,
    ChatMessage, ChatResponseMessage, ChunkChoice, ContentPart, FunctionCall, FunctionCallDelta,
    FunctionDefinition, FunctionName, ImageUrl, MessageContent, NamedToolChoice, Role, Tool,
    ToolCall, ToolCallDelta, ToolChoice, ToolChoiceMode, ToolType,
};
pub use common::{
    ChatLogprobToken, ChatLogprobs, FinishReason, PromptTokensDetails, SamplingOptions,
    StopSequences, StreamOptions, TopLogprob, Usage,
};
pub use completions::{
    CompletionChoice, CompletionChunk, CompletionLogprobs, CompletionRequest, CompletionResponse,
    Prompt,
};
pub use error::{ErrorBody, ErrorCode, ErrorResponse};
pub use models::{ModelCard, ModelList};
pub use tokenize::{
    DetokenizeRequest, DetokenizeResponse, TokenizeChatRequest, TokenizeCompletionRequest,
    TokenizeRequest, TokenizeResponse,
};
