//! Requests to the server with failures a user can act on: a server that is not there, a
//! missing or wrong API key, and the server's own error message for anything else.

use hearth_protocol::openai::ErrorResponse;
use reqwest::StatusCode;
use serde::Serialize;

use super::Target;

/// Why a request to the server failed, worded for the person running the tool.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error(
        "cannot reach the server at {url}: {reason}. Is it running? (`./launch` starts one, \
         `hearth status` lists them; --url picks another)"
    )]
    Unreachable { url: String, reason: String },
    #[error(
        "{status} from {url}: {message}. Pass the server's key with --api-key or set API_KEY \
         (in the environment or .env)"
    )]
    Unauthorized {
        url: String,
        status: StatusCode,
        message: String,
    },
    #[error("{status} from {url}: {message}")]
    Status {
        url: String,
        status: StatusCode,
        message: String,
    },
    #[error("the stream from {url} broke off: {message}")]
    Stream { url: String, message: String },
    #[error("reading the answer of {url}: {source}")]
    Body {
        url: String,
        #[source]
        source: reqwest::Error,
    },
}

/// POSTs `body` as JSON to `path` (e.g. "/v1/chat/completions"); a non-2xx answer is an error.
pub async fn post<B: Serialize + ?Sized>(
    http: &reqwest::Client,
    t: &Target,
    path: &str,
    body: &B,
) -> Result<reqwest::Response, RequestError> {
    let url = format!("{}{path}", t.url);
    let mut req = http.post(&url).json(body);
    if let Some(k) = &t.key {
        req = req.bearer_auth(k);
    }
    check(&url, req.send().await).await
}

/// GETs `path`; a non-2xx answer is an error.
pub async fn get(
    http: &reqwest::Client,
    t: &Target,
    path: &str,
) -> Result<reqwest::Response, RequestError> {
    let url = format!("{}{path}", t.url);
    let mut req = http.get(&url);
    if let Some(k) = &t.key {
        req = req.bearer_auth(k);
    }
    check(&url, req.send().await).await
}

async fn check(
    url: &str,
    sent: Result<reqwest::Response, reqwest::Error>,
) -> Result<reqwest::Response, RequestError> {
    let resp = sent.map_err(|e| RequestError::Unreachable {
        url: url.to_owned(),
        reason: root_cause(&e),
    })?;
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let text = resp.text().await.unwrap_or_default();
    let message = error_message(&text);
    let url = url.to_owned();
    Err(match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => RequestError::Unauthorized {
            url,
            status,
            message,
        },
        _ => RequestError::Status {
            url,
            status,
            message,
        },
    })
}

/// The `error.message` of an OpenAI error body, else the body itself (shortened).
pub fn error_message(body: &str) -> String {
    if let Ok(e) = serde_json::from_str::<ErrorResponse>(body) {
        return e.error.message;
    }
    let body = body.trim();
    match body.char_indices().nth(300) {
        Some((i, _)) => format!("{}...", &body[..i]),
        None if body.is_empty() => "(empty body)".into(),
        None => body.to_owned(),
    }
}

/// reqwest's outermost message is "error sending request"; the useful part (connection
/// refused, timed out) is at the bottom of the chain.
fn root_cause(e: &reqwest::Error) -> String {
    let mut source: &dyn std::error::Error = e;
    while let Some(next) = source.source() {
        source = next;
    }
    source.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_message_prefers_the_openai_message() {
        let body = r#"{"error":{"message":"missing or wrong API key","type":"authentication_error","param":null,"code":401}}"#;
        assert_eq!(error_message(body), "missing or wrong API key");
        assert_eq!(error_message("  "), "(empty body)");
        assert_eq!(error_message("Not Found"), "Not Found");
        assert!(error_message(&"x".repeat(1000)).ends_with("..."));
    }
}
