//! What the tools ask a server besides generating: the served model and its context length
//! (`/v1/models`, vLLM's `max_model_len`), exact token counts (`/tokenize`, vLLM and Hearth;
//! llama.cpp's has another shape), and prefix-cache counters from `/metrics`. Each answers
//! `None` when the server lacks it, so the tools can fall back and say so.

use hearth_protocol::openai::{
    ChatMessage, ModelList, TokenizeChatRequest, TokenizeCompletionRequest, TokenizeResponse,
};

use super::http::{self, RequestError};
use super::Target;

/// The model to use and what the server says about it.
#[derive(Debug, Clone)]
pub struct ModelInfo {
    pub id: String,
    pub max_model_len: Option<u32>,
}

/// The target's model (or the server's first) with its context length when the server says.
pub async fn model(http: &reqwest::Client, t: &Target) -> anyhow::Result<ModelInfo> {
    let list: ModelList = http::get(http, t, "/v1/models")
        .await?
        .json()
        .await
        .map_err(|source| RequestError::Body {
            url: format!("{}/v1/models", t.url),
            source,
        })?;
    let card = match &t.model {
        Some(m) => list.data.iter().find(|c| &c.id == m),
        None => list.data.first(),
    };
    match (card, &t.model) {
        (Some(c), _) => Ok(ModelInfo {
            id: c.id.clone(),
            max_model_len: c.max_model_len,
        }),
        // Some servers (llama.cpp) answer any model name; keep the one asked for.
        (None, Some(m)) => Ok(ModelInfo {
            id: m.clone(),
            max_model_len: None,
        }),
        (None, None) => anyhow::bail!("{}/v1/models lists no models", t.url),
    }
}

/// Token ids of a raw prompt (BOS added where the tokenizer adds one); `None` when the
/// server has no vLLM-style `/tokenize`.
pub async fn tokenize(
    http: &reqwest::Client,
    t: &Target,
    model: &str,
    prompt: &str,
) -> Result<Option<Vec<u32>>, RequestError> {
    let body = TokenizeCompletionRequest {
        model: Some(model.to_owned()),
        prompt: prompt.to_owned(),
        add_special_tokens: Some(false),
    };
    tokenize_body(http, t, &body)
        .await
        .map(|r| r.map(|r| r.tokens))
}

/// How many prompt tokens a chat renders to (chat template included); `None` when the
/// server has no `/tokenize` for chats.
pub async fn chat_tokens(
    http: &reqwest::Client,
    t: &Target,
    model: &str,
    messages: &[ChatMessage],
) -> Result<Option<u32>, RequestError> {
    let body = TokenizeChatRequest {
        model: Some(model.to_owned()),
        messages: messages.to_vec(),
        ..Default::default()
    };
    tokenize_body(http, t, &body)
        .await
        .map(|r| r.map(|r| r.count))
}

async fn tokenize_body<B: serde::Serialize>(
    http: &reqwest::Client,
    t: &Target,
    body: &B,
) -> Result<Option<TokenizeResponse>, RequestError> {
    let resp = match http::post(http, t, "/tokenize", body).await {
        Ok(r) => r,
        // No route, or a route of another shape (llama.cpp wants `content`, and may answer
        // that with a 4xx or a 5xx): no exact counts. A missing key still is an error.
        Err(RequestError::Status { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(resp.json::<TokenizeResponse>().await.ok())
}

/// The server's Prometheus text, or `None` when it has no `/metrics`.
pub async fn metrics(http: &reqwest::Client, t: &Target) -> Option<String> {
    http::get(http, t, "/metrics").await.ok()?.text().await.ok()
}

/// Prefix-cache counters summed over label sets: (queries, hits) in tokens, from vLLM's
/// `vllm:prefix_cache_queries` / `vllm:prefix_cache_hits` (with or without `_total`).
pub fn prefix_cache_counters(text: &str) -> Option<(f64, f64)> {
    let queries = sum_metric(text, "vllm:prefix_cache_queries")?;
    let hits = sum_metric(text, "vllm:prefix_cache_hits")?;
    Some((queries, hits))
}

fn sum_metric(text: &str, name: &str) -> Option<f64> {
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let rest = rest.strip_prefix("_total").unwrap_or(rest);
        let value = match rest.chars().next() {
            Some('{') => rest.rsplit_once('}').map(|(_, v)| v),
            Some(' ') => Some(rest),
            _ => None,
        };
        let Some(v) = value.and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok()) else {
            continue;
        };
        *found.get_or_insert(0.0) += v;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_counters_sum_label_sets_and_ignore_lookalikes() {
        let text = "# HELP vllm:prefix_cache_hits_total x\n\
                    vllm:prefix_cache_queries_total{model_name=\"a\"} 100\n\
                    vllm:prefix_cache_queries_total{model_name=\"b\"} 28\n\
                    vllm:prefix_cache_hits_total{model_name=\"a\"} 64\n\
                    vllm:prefix_cache_hits_created{model_name=\"a\"} 1.7e9\n";
        assert_eq!(prefix_cache_counters(text), Some((128.0, 64.0)));
        assert_eq!(
            prefix_cache_counters("vllm:prefix_cache_queries 4\nvllm:prefix_cache_hits 1\n"),
            Some((4.0, 1.0))
        );
        assert_eq!(prefix_cache_counters("vllm:num_requests_running 0\n"), None);
    }
}
