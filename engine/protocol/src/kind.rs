//! The error categories the server reports, shared by the OpenAI and Anthropic error
//! shapes so one server-side error maps to one HTTP status and one `type` string per API.

/// What went wrong, independent of which API reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// 400: the request is malformed or asks for something unsupported.
    InvalidRequest,
    /// 401: missing or wrong API key.
    Authentication,
    /// 404: unknown model or route.
    NotFound,
    /// 413: the prompt or body is larger than the server accepts.
    RequestTooLarge,
    /// 422: well-formed JSON that does not match the schema.
    Unprocessable,
    /// 500: a bug or an engine failure.
    Internal,
    /// 503: the engine is starting, overloaded or shutting down.
    Unavailable,
}

impl ErrorKind {
    /// The HTTP status code for this kind.
    pub fn status(self) -> u16 {
        match self {
            Self::InvalidRequest => 400,
            Self::Authentication => 401,
            Self::NotFound => 404,
            Self::RequestTooLarge => 413,
            Self::Unprocessable => 422,
            Self::Internal => 500,
            Self::Unavailable => 503,
        }
    }

    /// The `error.type` string OpenAI clients expect.
    pub fn openai_type(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request_error",
            Self::Authentication => "authentication_error",
            Self::NotFound => "not_found_error",
            Self::RequestTooLarge => "request_too_large",
            Self::Unprocessable => "unprocessable_entity_error",
            Self::Internal => "server_error",
            Self::Unavailable => "service_unavailable_error",
        }
    }

    /// The `error.type` string from Anthropic's documented list.
    pub fn anthropic_type(self) -> &'static str {
        match self {
            Self::InvalidRequest | Self::Unprocessable => "invalid_request_error",
            Self::Authentication => "authentication_error",
            Self::NotFound => "not_found_error",
            Self::RequestTooLarge => "request_too_large",
            Self::Internal => "api_error",
            Self::Unavailable => "overloaded_error",
        }
    }
}
