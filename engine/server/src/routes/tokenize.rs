//! POST /tokenize and /detokenize (vLLM's extra endpoints): a raw prompt or chat messages
//! (through the chat template) to token ids, and back.

use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::Json;
use hearth_protocol::openai::tokenize::{
    DetokenizeRequest, DetokenizeResponse, TokenizeRequest, TokenizeResponse,
};
use serde_json::Value;

use super::chat::{messages_json, render, template_kwargs};
use crate::error::{ApiError, ErrorKind};
use crate::state::AppState;

pub async fn tokenize(
    State(s): State<AppState>,
    body: Result<Json<TokenizeRequest>, JsonRejection>,
) -> Result<Json<TokenizeResponse>, ApiError> {
    let Json(req) = body?;
    let tokens = match req {
        TokenizeRequest::Completion(r) => s
            .tokenizer
            .encode(&r.prompt, r.add_special_tokens.unwrap_or(true)),
        TokenizeRequest::Chat(r) => {
            let kwargs = template_kwargs(&s, r.chat_template_kwargs.as_ref());
            let tools: Vec<Value> = r
                .tools
                .iter()
                .flatten()
                .filter_map(|t| serde_json::to_value(t).ok())
                .collect();
            let messages = messages_json(&r.messages)?;
            let text = render(
                &s,
                &messages,
                &tools,
                r.add_generation_prompt.unwrap_or(true),
                &kwargs,
            )?;
            s.tokenizer
                .encode(&text, r.add_special_tokens.unwrap_or(false))
        }
    }
    .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()))?;
    Ok(Json(TokenizeResponse::new(tokens, s.max_model_len as u32)))
}

pub async fn detokenize(
    State(s): State<AppState>,
    body: Result<Json<DetokenizeRequest>, JsonRejection>,
) -> Result<Json<DetokenizeResponse>, ApiError> {
    let Json(req) = body?;
    let vocab = s.tokenizer.vocab_size() as u32;
    if let Some(bad) = req.tokens.iter().find(|&&t| t >= vocab) {
        return Err(ApiError::bad(
            "tokens",
            format!(
                "token id {bad} is out of range; allowed: 0 to {}",
                vocab - 1
            ),
        ));
    }
    let prompt = s
        .tokenizer
        .decode(&req.tokens, false)
        .map_err(|e| ApiError::bad("tokens", e.to_string()))?;
    Ok(Json(DetokenizeResponse { prompt }))
}
