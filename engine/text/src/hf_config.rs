//! The Hugging Face files that sit beside tokenizer.json: tokenizer_config.json (special tokens,
//! add_bos/add_eos, chat template), chat_template.jinja and generation_config.json (extra EOS ids).
//!
//! These files come in many historical shapes (a token as a string or as an `AddedToken` object,
//! the chat template as a string or a list of named templates), so they are read leniently into
//! `HfTokenizerConfig`; deciding what the values mean is tokenizer.rs's job.

use std::path::Path;

use serde_json::Value;

use crate::error::TextError;

/// The parts of tokenizer_config.json (and friends) that Hearth uses.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct HfTokenizerConfig {
    pub bos_token: Option<String>,
    pub eos_token: Option<String>,
    pub add_bos_token: Option<bool>,
    pub add_eos_token: Option<bool>,
    pub chat_template: Option<String>,
    /// `eos_token_id` from generation_config.json (an int or a list).
    pub generation_eos_ids: Vec<u32>,
}

impl HfTokenizerConfig {
    /// Read the optional files in `dir`; missing files leave their fields empty.
    pub(crate) fn load(dir: &Path) -> Result<Self, TextError> {
        let mut cfg = match read_json(&dir.join("tokenizer_config.json"))? {
            Some(v) => Self::from_json(&v),
            None => Self::default(),
        };
        let jinja = dir.join("chat_template.jinja");
        if cfg.chat_template.is_none() && jinja.is_file() {
            cfg.chat_template =
                Some(
                    std::fs::read_to_string(&jinja).map_err(|source| TextError::Io {
                        path: jinja.clone(),
                        source,
                    })?,
                );
        }
        if let Some(gen) = read_json(&dir.join("generation_config.json"))? {
            cfg.generation_eos_ids = ids_of(gen.get("eos_token_id"));
        }
        Ok(cfg)
    }

    pub(crate) fn from_json(v: &Value) -> Self {
        HfTokenizerConfig {
            bos_token: token_content(v.get("bos_token")),
            eos_token: token_content(v.get("eos_token")),
            add_bos_token: v.get("add_bos_token").and_then(Value::as_bool),
            add_eos_token: v.get("add_eos_token").and_then(Value::as_bool),
            chat_template: chat_template_of(v.get("chat_template")),
            generation_eos_ids: Vec::new(),
        }
    }
}

fn read_json(path: &Path) -> Result<Option<Value>, TextError> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).map_err(|source| TextError::Io {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|source| TextError::Json {
            path: path.to_owned(),
            source,
        })
}

/// `"<s>"` or `{"__type": "AddedToken", "content": "<s>", ...}`.
fn token_content(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content")?.as_str().map(str::to_owned),
        _ => None,
    }
}

/// A string, or a list of `{"name", "template"}` where "default" wins over the first entry.
fn chat_template_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Array(list) => {
            let named = |name: &str| {
                list.iter()
                    .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
            };
            named("default")
                .or_else(|| list.first())
                .and_then(|e| e.get("template"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        }
        _ => None,
    }
}

fn ids_of(v: Option<&Value>) -> Vec<u32> {
    match v {
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|x| u32::try_from(x).ok())
            .into_iter()
            .collect(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| x.as_u64().and_then(|x| u32::try_from(x).ok()))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_both_token_shapes_and_template_lists() {
        let cfg = HfTokenizerConfig::from_json(&json!({
            "bos_token": {"__type": "AddedToken", "content": "<s>"},
            "eos_token": "</s>",
            "add_bos_token": true,
            "chat_template": [
                {"name": "tool_use", "template": "T"},
                {"name": "default", "template": "D"}
            ]
        }));
        assert_eq!(cfg.bos_token.as_deref(), Some("<s>"));
        assert_eq!(cfg.eos_token.as_deref(), Some("</s>"));
        assert_eq!(cfg.add_bos_token, Some(true));
        assert_eq!(cfg.add_eos_token, None);
        assert_eq!(cfg.chat_template.as_deref(), Some("D"));
        assert_eq!(ids_of(Some(&json!([1, 2]))), vec![1, 2]);
        assert_eq!(ids_of(Some(&json!(7))), vec![7]);
    }
}
