//! The one place HTTP errors become responses: `ApiError` carries a kind (hearth-protocol's
//! `ErrorKind`, which owns the status and `type` strings of both APIs), a message written for the
//! user (naming the field, the value and what is allowed), and the API flavour whose error shape
//! to answer in (OpenAI or Anthropic). Bad input is always a 4xx.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use hearth_protocol::{anthropic, openai};

pub use hearth_protocol::ErrorKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Flavor {
    #[default]
    OpenAi,
    Anthropic,
}

#[derive(Debug, Clone)]
pub struct ApiError {
    pub kind: ErrorKind,
    pub message: String,
    /// The request field at fault, when there is one.
    pub param: Option<String>,
    pub flavor: Flavor,
}

impl ApiError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ApiError {
            kind,
            message: message.into(),
            param: None,
            flavor: Flavor::OpenAi,
        }
    }

    pub fn bad(param: &str, message: impl Into<String>) -> Self {
        ApiError {
            param: Some(param.to_owned()),
            ..Self::new(ErrorKind::InvalidRequest, message)
        }
    }

    pub fn anthropic(mut self) -> Self {
        self.flavor = Flavor::Anthropic;
        self
    }

    fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// The JSON body (also used for errors inside a stream).
    pub fn body(&self) -> serde_json::Value {
        let body = match self.flavor {
            Flavor::OpenAi => {
                let mut e = openai::ErrorResponse::new(self.kind, &self.message);
                e.error.param = self.param.clone();
                serde_json::to_value(e)
            }
            Flavor::Anthropic => serde_json::to_value(anthropic::error::ErrorResponse::new(
                self.kind,
                &self.message,
            )),
        };
        body.unwrap_or_default()
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.kind == ErrorKind::Internal {
            tracing::error!(message = %self.message, "request failed");
        } else {
            tracing::info!(status = self.status().as_u16(), message = %self.message, "request refused");
        }
        (self.status(), Json(self.body())).into_response()
    }
}

impl From<axum::extract::rejection::JsonRejection> for ApiError {
    fn from(r: axum::extract::rejection::JsonRejection) -> Self {
        // A body over the size limit keeps its 413; every other rejection is the client's JSON.
        let kind = if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ErrorKind::RequestTooLarge
        } else {
            ErrorKind::InvalidRequest
        };
        ApiError::new(kind, format!("invalid JSON body: {}", r.body_text()))
    }
}

impl From<hearth_runtime::SubmitError> for ApiError {
    fn from(e: hearth_runtime::SubmitError) -> Self {
        match e {
            hearth_runtime::SubmitError::Closed => {
                ApiError::new(ErrorKind::Unavailable, "the engine is shutting down")
            }
            other => ApiError::new(ErrorKind::InvalidRequest, other.to_string()),
        }
    }
}
