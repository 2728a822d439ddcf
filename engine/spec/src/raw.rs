//! The spec as written: serde structs with `deny_unknown_fields`, one per YAML mapping.
//!
//! Leaves stay `serde_yaml::Value` here because after interpolation `port: "8000"` and
//! `port: 8000` must mean the same; validate.rs gives every leaf its type and its error message.
//! These structs are also the one list of allowed keys: `check_keys` reads the field names
//! from them, reports every unknown key (not just serde's first) and removes it before
//! deserializing.

use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde::Deserialize;
use serde_yaml::Value;

use crate::error::{child, Issues};
use crate::yaml::{key_text, show};

/// A scalar (or a free-form value) exactly as written; validate.rs types it.
pub(crate) type Leaf = Value;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSpec {
    pub name: Option<Leaf>,
    pub model: Option<Leaf>,
    pub served_model_name: Option<Leaf>,
    pub tokenizer: Option<Leaf>,
    pub chat_template: Option<Leaf>,
    pub engine: Option<RawEngine>,
    pub server: Option<RawServer>,
    pub deploy: Option<RawDeploy>,
}

/// vLLM serve flags, snake_case.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEngine {
    pub device: Option<Leaf>,
    pub dtype: Option<Leaf>,
    pub tensor_parallel_size: Option<Leaf>,
    pub pipeline_parallel_size: Option<Leaf>,
    pub decode_context_parallel_size: Option<Leaf>,
    pub enable_expert_parallel: Option<Leaf>,
    pub quantization: Option<Leaf>,
    pub kv_cache_dtype: Option<Leaf>,
    pub max_model_len: Option<Leaf>,
    pub max_num_seqs: Option<Leaf>,
    pub max_num_batched_tokens: Option<Leaf>,
    pub gpu_memory_utilization: Option<Leaf>,
    pub block_size: Option<Leaf>,
    pub enable_prefix_caching: Option<Leaf>,
    pub enable_chunked_prefill: Option<Leaf>,
    pub speculative_config: Option<RawSpeculative>,
    pub tool_call_parser: Option<Leaf>,
    pub enable_auto_tool_choice: Option<Leaf>,
    pub reasoning_parser: Option<Leaf>,
    pub enable_thinking: Option<Leaf>,
    pub hf_overrides: Option<Leaf>,
    pub trust_remote_code: Option<Leaf>,
    pub seed: Option<Leaf>,
    pub threads: Option<Leaf>,
    pub default_chat_template_kwargs: Option<Leaf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSpeculative {
    pub method: Option<Leaf>,
    pub num_speculative_tokens: Option<Leaf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawServer {
    pub host: Option<Leaf>,
    pub port: Option<Leaf>,
    pub api_key: Option<Leaf>,
    pub allowed_origins: Option<Leaf>,
    pub claude_code_normalization: Option<Leaf>,
    pub strip_date_line: Option<Leaf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDeploy {
    pub image: Option<Leaf>,
    pub gpus: Option<Leaf>,
    pub env: Option<Leaf>,
    pub shm_size: Option<Leaf>,
    pub ipc: Option<Leaf>,
    pub restart: Option<RawRestart>,
    pub volumes: Option<Leaf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRestart {
    pub policy: Option<Leaf>,
    pub max_retries: Option<Leaf>,
}

/// The allowed keys of the struct at a key path, for the paths that hold a struct.
fn struct_at(path: &str) -> Option<&'static [&'static str]> {
    Some(match path {
        "" => fields_of::<RawSpec>(),
        "engine" => fields_of::<RawEngine>(),
        "engine.speculative_config" => fields_of::<RawSpeculative>(),
        "server" => fields_of::<RawServer>(),
        "deploy" => fields_of::<RawDeploy>(),
        "deploy.restart" => fields_of::<RawRestart>(),
        _ => return None,
    })
}

/// Reports every unknown key and every struct that is not a mapping, and removes them, so that
/// `deserialize` afterwards sees only known keys.
pub(crate) fn check_keys(value: &mut Value, path: &str, issues: &mut Issues) {
    let Some(fields) = struct_at(path) else {
        return;
    };
    match value {
        Value::Null => {}
        Value::Mapping(map) => {
            let mut unknown = Vec::new();
            for (k, v) in map.iter_mut() {
                match k.as_str() {
                    Some(name) if fields.contains(&name) => {
                        check_keys(v, &child(path, name), issues);
                    }
                    _ => {
                        let name = key_text(k);
                        issues.push(child(path, &name), unknown_key(&name, path, fields));
                        unknown.push(k.clone());
                    }
                }
            }
            for k in unknown {
                map.remove(&k);
            }
        }
        other => {
            issues.push(
                path,
                format!(
                    "expected a mapping with keys {}, found {}",
                    fields.join(", "),
                    show(other)
                ),
            );
            *other = Value::Null;
        }
    }
}

fn unknown_key(name: &str, path: &str, fields: &[&str]) -> String {
    let place = if path.is_empty() {
        "at the top level".to_owned()
    } else {
        format!("in {path}")
    };
    let hint = fields
        .iter()
        .map(|f| (edit_distance(name, f), f))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, f)| format!(" (did you mean {f}?)"))
        .unwrap_or_default();
    format!(
        "unknown key{hint}; allowed keys {place}: {}",
        fields.join(", ")
    )
}

/// Levenshtein distance, for "did you mean" hints.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let subst = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = subst.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Deserializes a key-checked tree. After `check_keys` this cannot fail on shape; a failure is
/// still reported as an issue rather than trusted away.
pub(crate) fn deserialize(value: Value, issues: &mut Issues) -> RawSpec {
    if value.is_null() {
        return RawSpec::default();
    }
    serde_yaml::from_value(value).unwrap_or_else(|e| {
        issues.push("", e.to_string());
        RawSpec::default()
    })
}

/// The field names serde derives for `T`, read by handing it a deserializer that records the
/// `fields` argument of `deserialize_struct` and then stops.
fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut found = None;
    let _ = T::deserialize(FieldsProbe(&mut found));
    found.unwrap_or(&[])
}

struct FieldsProbe<'a>(&'a mut Option<&'static [&'static str]>);

impl<'de> Deserializer<'de> for FieldsProbe<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = Some(fields);
        Err(de::Error::custom("field names recorded"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(yaml: &str) -> (Value, Vec<crate::Issue>) {
        let mut v: Value = serde_yaml::from_str(yaml).unwrap();
        let mut issues = Issues::default();
        check_keys(&mut v, "", &mut issues);
        (v, issues.into_vec())
    }

    #[test]
    fn field_names_come_from_the_structs() {
        assert_eq!(fields_of::<RawRestart>(), ["policy", "max_retries"]);
        assert!(fields_of::<RawEngine>().contains(&"kv_cache_dtype"));
    }

    #[test]
    fn every_unknown_key_is_reported_with_the_allowed_keys() {
        let (v, issues) = check(
            "name: x\nmodel: m\nnmae: y\nengine:\n  max_num_seq: 4\n  bogus: 1\n\
             deploy:\n  restart: {policy: always, retries: 3}\n",
        );
        let keys: Vec<&str> = issues.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "nmae",
                "engine.max_num_seq",
                "engine.bogus",
                "deploy.restart.retries"
            ]
        );
        assert!(issues[0].message.contains("(did you mean name?)"));
        assert!(issues[0]
            .message
            .contains("allowed keys at the top level: name, model, served_model_name,"));
        assert!(issues[1].message.contains("did you mean max_num_seqs?"));
        assert!(issues[1]
            .message
            .contains("allowed keys in engine: device, dtype,"));
        assert!(issues[3]
            .message
            .ends_with("allowed keys in deploy.restart: policy, max_retries"));
        // The unknown keys are gone, so deserializing cannot trip over them.
        let mut more = Issues::default();
        let raw = deserialize(v, &mut more);
        assert!(more.is_empty());
        assert!(raw.engine.is_some_and(|e| e.max_num_seqs.is_none()));
    }

    #[test]
    fn a_struct_that_is_not_a_mapping_is_an_issue() {
        let (_, issues) = check("name: x\nengine: 5\nserver: [a]\n");
        assert_eq!(issues.len(), 2);
        assert_eq!(issues[0].key, "engine");
        assert!(issues[0]
            .message
            .starts_with("expected a mapping with keys device,"));
        assert!(issues[0].message.ends_with("found 5"));
        assert_eq!(issues[1].key, "server");
    }

    #[test]
    fn distance() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "ab"), 2);
    }
}
