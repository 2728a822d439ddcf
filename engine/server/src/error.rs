//! The one place HTTP errors become responses: `ApiError` carries a kind, a message written for
//! the user (naming the field, the value and what is allowed) and the API flavour whose error
//! shape to answer in (OpenAI or Anthropic). Bad input is always a 4xx.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    BadRequest,
    Unauthorized,
    NotFound,
    TooLarge,
    Unavailable,
    Internal,
}

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
            ..Self::new(ErrorKind::BadRequest, message)
        }
    }

    pub fn anthropic(mut self) -> Self {
        self.flavor = Flavor::Anthropic;
        self
    }

    fn status(&self) -> StatusCode {
        match self.kind {
            ErrorKind::BadRequest => StatusCode::BAD_REQUEST,
            ErrorKind::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn type_name(&self) -> &'static str {
        match (self.flavor, self.kind) {
            (Flavor::OpenAi, ErrorKind::BadRequest | ErrorKind::TooLarge) => {
                "invalid_request_error"
            }
            (Flavor::OpenAi, ErrorKind::Unauthorized) => "authentication_error",
            (Flavor::OpenAi, ErrorKind::NotFound) => "not_found_error",
            (Flavor::OpenAi, ErrorKind::Unavailable) => "service_unavailable",
            (Flavor::OpenAi, ErrorKind::Internal) => "internal_error",
            (Flavor::Anthropic, ErrorKind::BadRequest) => "invalid_request_error",
            (Flavor::Anthropic, ErrorKind::Unauthorized) => "authentication_error",
            (Flavor::Anthropic, ErrorKind::NotFound) => "not_found_error",
            (Flavor::Anthropic, ErrorKind::TooLarge) => "request_too_large",
            (Flavor::Anthropic, ErrorKind::Unavailable) => "overloaded_error",
            (Flavor::Anthropic, ErrorKind::Internal) => "api_error",
        }
    }

    /// The JSON body (also used for errors inside a stream).
    pub fn body(&self) -> serde_json::Value {
        match self.flavor {
            Flavor::OpenAi => json!({"error": {
                "message": self.message, "type": self.type_name(),
                "param": self.param, "code": self.status().as_u16(),
            }}),
            Flavor::Anthropic => json!({"type": "error", "error": {
                "type": self.type_name(), "message": self.message,
            }}),
        }
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
        ApiError::new(
            ErrorKind::BadRequest,
            format!("invalid JSON body: {}", r.body_text()),
        )
    }
}

impl From<hearth_runtime::SubmitError> for ApiError {
    fn from(e: hearth_runtime::SubmitError) -> Self {
        match e {
            hearth_runtime::SubmitError::Closed => {
                ApiError::new(ErrorKind::Unavailable, "the engine is shutting down")
            }
            other => ApiError::new(ErrorKind::BadRequest, other.to_string()),
        }
    }
}
