//! OpenAI and Anthropic wire types, as an HTTP client or server sees them.
//!
//! Owns the serde shapes of request and response bodies and streaming events for
//! `/v1/chat/completions`, `/v1/completions`, `/v1/models`, `/tokenize`, `/detokenize`
//! (OpenAI + vLLM extras) and `/v1/messages`, `/v1/messages/count_tokens` (Anthropic).
//! It does not validate combinations, render templates or talk HTTP: these are the raw
//! structs that the server parses and then validates into its own trusted types.
//!
//! Conventions every type here follows:
//! - `Option` fields are omitted from JSON when `None`, unless the upstream API documents
//!   an explicit `null` (`finish_reason`, `stop_reason`, assistant `content`).
//! - Top-level requests keep fields they do not know in `extra` so the server can reject
//!   them by name instead of silently ignoring them; nested objects ignore unknown keys
//!   because SDKs echo response fields (`refusal`, `annotations`) back into history.
//! - Constant strings such as `"object": "chat.completion"` are zero-sized tag types
//!   (see [`tag`]) that serialize to their value and refuse any other on parse.

pub mod anthropic;
mod kind;
pub mod openai;
mod str_or;
pub mod tag;

pub use kind::ErrorKind;
