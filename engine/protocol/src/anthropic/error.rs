//! The Anthropic error body, `{"type": "error", "error": {"type", "message"}}`, also sent
//! as an `error` event mid-stream.

use serde::{Deserialize, Serialize};

use crate::tag::ErrorType;
use crate::ErrorKind;

/// Body of every non-2xx Anthropic-API response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorResponse {
    #[serde(rename = "type")]
    pub kind: ErrorType,
    pub error: ErrorBody,
}

/// The `error` object: a documented type string and a message for the user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
}

impl ErrorBody {
    /// An error body of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind: kind.anthropic_type().to_owned(),
            message: message.into(),
        }
    }
}

impl ErrorResponse {
    /// An error response of `kind`; its HTTP status is `kind.status()`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind: ErrorType,
            error: ErrorBody::new(kind, message),
        }
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

    /// 500.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    /// 503.
    pub fn overloaded(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }
}
