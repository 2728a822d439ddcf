//! `ResolvedSpec`: a spec after interpolation and validation, with every default filled in.
//! The rest of Hearth trusts it without checking again. It renders back to YAML (secrets
//! masked) for `check-spec`, and hashes that YAML so the launcher can tell whether a running
//! deployment matches its spec.

use std::fmt;
use std::path::PathBuf;

use indexmap::IndexMap;
use serde::{Serialize, Serializer};
use sha2::{Digest, Sha256};

use crate::choices::{
    Device, Dtype, KvCacheDtype, Quantization, ReasoningParser, RestartPolicy, SpecMethod,
    ToolCallParser,
};
use crate::ModelSource;

/// A JSON object given in the spec as a YAML mapping (`hf_overrides`, chat template kwargs).
pub type JsonObject = serde_json::Map<String, serde_json::Value>;

/// A validated deployment spec. Paths are as written (relative ones are relative to the
/// directory the program runs in).
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedSpec {
    pub name: String,
    pub model: ModelSource,
    pub served_model_name: String,
    /// Where the tokenizer comes from when not from `model`.
    pub tokenizer: Option<ModelSource>,
    /// A Jinja chat template file that replaces the model's own.
    pub chat_template: Option<PathBuf>,
    pub engine: EngineSpec,
    pub server: ServerSpec,
    pub deploy: DeploySpec,
    /// The spec file this was loaded from.
    #[serde(skip)]
    pub file: PathBuf,
    /// The `.env` file whose variables were used, if one was found.
    #[serde(skip)]
    pub dotenv: Option<PathBuf>,
    /// Where fetched models are cached: `$HEARTH_CACHE` (environment, then `.env`), else
    /// `~/.cache/hearth`. Not part of the spec's identity, so not rendered or hashed.
    #[serde(skip)]
    pub cache_dir: PathBuf,
}

/// vLLM's serve flags, resolved. `None` means "the engine decides from the model".
#[derive(Debug, Clone, Serialize)]
pub struct EngineSpec {
    pub device: Device,
    pub dtype: Dtype,
    pub tensor_parallel_size: u32,
    pub pipeline_parallel_size: u32,
    pub decode_context_parallel_size: u32,
    pub enable_expert_parallel: bool,
    pub quantization: Option<Quantization>,
    pub kv_cache_dtype: KvCacheDtype,
    pub max_model_len: Option<u32>,
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: Option<u32>,
    pub gpu_memory_utilization: f64,
    pub block_size: u32,
    pub enable_prefix_caching: bool,
    pub enable_chunked_prefill: bool,
    pub speculative_config: Option<SpeculativeConfig>,
    pub tool_call_parser: Option<ToolCallParser>,
    pub enable_auto_tool_choice: bool,
    pub reasoning_parser: Option<ReasoningParser>,
    pub enable_thinking: bool,
    pub hf_overrides: JsonObject,
    pub trust_remote_code: bool,
    pub seed: u64,
    /// CPU backend threads (`None`: one per physical core).
    pub threads: Option<u32>,
    pub default_chat_template_kwargs: JsonObject,
}

impl EngineSpec {
    /// GPUs one replica needs: tensor x pipeline parallel (DCP and EP reuse the TP ranks).
    pub fn world_size(&self) -> u32 {
        self.tensor_parallel_size * self.pipeline_parallel_size
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpeculativeConfig {
    pub method: SpecMethod,
    pub num_speculative_tokens: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct ServerSpec {
    pub host: String,
    pub port: u16,
    /// Bearer key the API requires; `None` leaves the API open.
    pub api_key: Option<Secret>,
    /// CORS origins allowed to call the API (empty: no CORS headers).
    pub allowed_origins: Vec<String>,
    /// Normalize Claude Code's prompt-cache busters on /v1/messages (billing-header system
    /// block, cache_control markers, tool order). Default on.
    pub claude_code_normalization: bool,
    /// Also drop a system-prompt line starting "Today's date is" (changes daily). Default off.
    pub strip_date_line: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeploySpec {
    pub image: String,
    pub gpus: Gpus,
    /// Extra environment of the engine container.
    pub env: IndexMap<String, String>,
    /// `/dev/shm` size (`None`: Docker's default).
    pub shm_size: Option<ByteSize>,
    /// Docker IPC mode (`None`: Docker's default).
    pub ipc: Option<String>,
    pub restart: Restart,
    /// Extra bind mounts, `host:container[:ro|rw]`.
    pub volumes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Restart {
    pub policy: RestartPolicy,
    /// Only with `on-failure`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
}

/// Which GPUs the container gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gpus {
    All,
    Count(u32),
    /// Device indices or UUIDs.
    Ids(Vec<String>),
}

impl Gpus {
    /// How many GPUs, when the spec says (not for `all`).
    pub fn count(&self) -> Option<usize> {
        match self {
            Gpus::All => None,
            Gpus::Count(n) => usize::try_from(*n).ok(),
            Gpus::Ids(ids) => Some(ids.len()),
        }
    }
}

impl Serialize for Gpus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Gpus::All => s.serialize_str("all"),
            Gpus::Count(n) => s.serialize_u32(*n),
            Gpus::Ids(ids) => ids.serialize(s),
        }
    }
}

/// A secret string: renders as `***` in YAML and Debug output; `expose()` to use it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("***")
    }
}

/// A size in bytes written Docker's way (`16g`, `512m`, `1.5GiB`; units are powers of 1024).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

const UNITS: [(&str, u32); 5] = [("k", 1), ("m", 2), ("g", 3), ("t", 4), ("p", 5)];

impl ByteSize {
    /// Parses `16g`, `16G`, `16gb`, `16GiB`, `512m`, `1048576`; `None` if malformed or zero.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim().to_ascii_lowercase();
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        let num: f64 = num.parse().ok()?;
        let unit = unit.trim_start();
        let unit = unit
            .strip_suffix("ib")
            .or_else(|| unit.strip_suffix('b'))
            .unwrap_or(unit);
        let power = match unit {
            "" => 0,
            u => UNITS.iter().find(|(name, _)| *name == u)?.1,
        };
        let bytes = num * 1024f64.powi(i32::try_from(power).ok()?);
        // Byte counts are far below 2^53, so the f64 round trip is exact enough here.
        (1.0..9.0e15)
            .contains(&bytes)
            .then_some(ByteSize(bytes as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, power) in UNITS.iter().rev() {
            let unit = 1u64 << (10 * power);
            if self.0 >= unit && self.0 & (unit - 1) == 0 {
                return write!(f, "{}{name}", self.0 / unit);
            }
        }
        write!(f, "{}", self.0)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl ResolvedSpec {
    /// The resolved spec as YAML: every default filled in, secrets as `***`.
    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(self)
            .expect("a resolved spec is plain data with string keys and finite floats")
    }

    /// Hex sha256 of `to_yaml()`: equal hashes mean the same deployment. The API key is
    /// masked before hashing, so changing only the key does not change the hash.
    pub fn spec_hash(&self) -> String {
        let digest = Sha256::digest(self.to_yaml().as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes() {
        assert_eq!(ByteSize::parse("16g"), Some(ByteSize(16 << 30)));
        assert_eq!(ByteSize::parse("16GiB"), Some(ByteSize(16 << 30)));
        assert_eq!(ByteSize::parse("512mb"), Some(ByteSize(512 << 20)));
        assert_eq!(ByteSize::parse("1.5g"), Some(ByteSize(3 << 29)));
        assert_eq!(ByteSize::parse("1048576"), Some(ByteSize(1 << 20)));
        assert_eq!(ByteSize::parse("16x"), None);
        assert_eq!(ByteSize::parse("g"), None);
        assert_eq!(ByteSize::parse("0"), None);
        assert_eq!(ByteSize(16 << 30).to_string(), "16g");
        assert_eq!(ByteSize(3 << 29).to_string(), "1536m");
        assert_eq!(ByteSize(1000).to_string(), "1000");
    }

    #[test]
    fn secrets_never_show() {
        let s = Secret::new("sk-123");
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert_eq!(serde_yaml::to_string(&s).unwrap().trim(), "'***'");
        assert_eq!(s.expose(), "sk-123");
    }

    #[test]
    fn gpus_render() {
        let y = |g: Gpus| serde_yaml::to_string(&g).unwrap();
        assert_eq!(y(Gpus::All), "all\n");
        assert_eq!(y(Gpus::Count(2)), "2\n");
        assert_eq!(y(Gpus::Ids(vec!["0".into(), "1".into()])), "- '0'\n- '1'\n");
        assert_eq!(Gpus::Ids(vec!["a".into()]).count(), Some(1));
        assert_eq!(Gpus::All.count(), None);
    }
}
