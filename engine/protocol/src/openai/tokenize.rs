//! vLLM's `/tokenize` and `/detokenize`: token ids for a prompt or a chat, and back.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use super::chat::{ChatMessage, Tool};

/// Body of `POST /tokenize`: a raw prompt or a chat to render first. Which one is decided by
/// the presence of `messages`, so an error names the right fields instead of serde's
/// "did not match any variant".
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum TokenizeRequest {
    Completion(TokenizeCompletionRequest),
    Chat(TokenizeChatRequest),
}

impl<'de> Deserialize<'de> for TokenizeRequest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = Map::<String, Value>::deserialize(d)?;
        let parsed = match (map.contains_key("messages"), map.contains_key("prompt")) {
            (true, true) => {
                return Err(D::Error::custom(
                    "send either `prompt` or `messages`, not both",
                ))
            }
            (true, false) => serde_json::from_value(Value::Object(map)).map(Self::Chat),
            (false, true) => serde_json::from_value(Value::Object(map)).map(Self::Completion),
            (false, false) => return Err(D::Error::custom("missing field `prompt` or `messages`")),
        };
        parsed.map_err(D::Error::custom)
    }
}

/// `/tokenize` for a raw prompt.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenizeCompletionRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub prompt: String,
    /// Defaults to true (BOS is added where the tokenizer adds one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_special_tokens: Option<bool>,
}

/// `/tokenize` for a chat, rendered through the chat template first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenizeChatRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub messages: Vec<ChatMessage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_generation_prompt: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continue_final_message: Option<bool>,
    /// Defaults to false: the template already writes BOS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_special_tokens: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_template_kwargs: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
}

/// Body returned by `/tokenize`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenizeResponse {
    pub count: u32,
    pub max_model_len: u32,
    pub tokens: Vec<u32>,
}

impl TokenizeResponse {
    /// A response for these tokens, with `count` filled in.
    pub fn new(tokens: Vec<u32>, max_model_len: u32) -> Self {
        let count = u32::try_from(tokens.len()).unwrap_or(u32::MAX);
        Self {
            count,
            max_model_len,
            tokens,
        }
    }
}

/// Body of `POST /detokenize`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetokenizeRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub tokens: Vec<u32>,
}

/// Body returned by `/detokenize`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DetokenizeResponse {
    pub prompt: String,
}
