//! The OpenAI error body, `{"error": {"message", "type", "param", "code"}}`, which the
//! OpenAI SDKs turn into typed exceptions by HTTP status.

use serde::{Deserialize, Serialize};

use crate::ErrorKind;

/// Body of every non-2xx OpenAI-API response (and of an `error` event mid-stream).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorResponse {
    pub error: ErrorBody,
}

/// The `error` object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Written for the user: names the field, the value and what is allowed.
    pub message: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The request field at fault, when there is one.
    #[serde(default)]
    pub param: Option<String>,
    #[serde(default)]
    pub code: Option<ErrorCode>,
}

/// `code`: Hearth (like vLLM) sends the HTTP status; OpenAI itself sends short names such
/// as `"model_not_found"`. Both parse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ErrorCode {
    Status(u16),
    Name(String),
}

impl ErrorResponse {
    /// An error of `kind` with `code` set to its HTTP status.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            error: ErrorBody {
                message: message.into(),
                kind: kind.openai_type().to_owned(),
                param: None,
                code: Some(ErrorCode::Status(kind.status())),
            },
        }
    }

    /// Names the request field at fault.
    pub fn with_param(mut self, param: impl Into<String>) -> Self {
        self.error.param = Some(param.into());
        self
    }

    /// 400.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidRequest, message)
    }

    /// 401.
    pub fn authentication(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Authentication, message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// 413.
    pub fn request_too_large(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::RequestTooLarge, message)
    }

    /// 422.
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unprocessable, message)
    }

    /// 500.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    /// 503.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }

    /// The HTTP status carried in `code`, when it is one.
    pub fn status(&self) -> Option<u16> {
        match self.error.code {
            Some(ErrorCode::Status(s)) => Some(s),
            _ => None,
        }
    }
}
