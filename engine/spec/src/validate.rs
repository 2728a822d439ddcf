//! From `RawSpec` to `ResolvedSpec`: every key typed and range-checked, every default filled
//! in. Checks of one key (or one struct) live here; rules that relate keys across sections
//! are in rules.rs. Problems go to `Issues`; a key with a problem gets its default so checking
//! can go on, and the caller never hands out a spec that had issues.

use std::path::PathBuf;

use serde_yaml::Value;

use crate::choices::{
    Device, Dtype, KvCacheDtype, Quantization, ReasoningParser, RestartPolicy, SpecMethod,
    ToolCallParser,
};
use crate::coerce::{
    boolean, choice, env_map, float, int, json_object, string_list, text, u32_min,
};
use crate::error::Issues;
use crate::raw::{RawDeploy, RawEngine, RawRestart, RawServer, RawSpec, RawSpeculative};
use crate::resolved::{
    ByteSize, DeploySpec, EngineSpec, Gpus, ResolvedSpec, Restart, Secret, ServerSpec,
    SpeculativeConfig,
};
use crate::source::{self, ModelSource};
use crate::yaml::{quote, show};

/// Where a spec came from; carried into `ResolvedSpec` but not part of it.
#[derive(Debug)]
pub(crate) struct Origin {
    pub file: PathBuf,
    pub dotenv: Option<PathBuf>,
    pub cache_dir: PathBuf,
}

pub(crate) const BLOCK_SIZES: [u64; 5] = [8, 16, 32, 64, 128];
pub(crate) const DEFAULT_MAX_NUM_SEQS: u32 = 256;
pub(crate) const CPU_IMAGE: &str = "hearth-engine:cpu";
pub(crate) const CUDA_IMAGE: &str = "hearth-engine:cuda12.8";

pub(crate) fn resolve(raw: RawSpec, origin: Origin, issues: &mut Issues) -> ResolvedSpec {
    let name = required(
        issues,
        "name",
        raw.name.as_ref(),
        "the deployment's name (letters, digits, . _ -)",
    )
    .filter(|n| check_name(issues, n))
    .unwrap_or_default();
    let model = required(issues, "model", raw.model.as_ref(), source::SOURCE_FORMS)
        .and_then(|m| model_source(issues, "model", &m))
        .unwrap_or_else(|| ModelSource::LocalDir(PathBuf::new()));
    let served_model_name = text(issues, "served_model_name", raw.served_model_name.as_ref())
        .unwrap_or_else(|| name.clone());
    let tokenizer = text(issues, "tokenizer", raw.tokenizer.as_ref())
        .and_then(|t| model_source(issues, "tokenizer", &t));
    let chat_template =
        text(issues, "chat_template", raw.chat_template.as_ref()).map(PathBuf::from);
    let engine = engine(raw.engine.unwrap_or_default(), issues);
    let server = server(raw.server.unwrap_or_default(), issues);
    let deploy = deploy(raw.deploy.unwrap_or_default(), engine.device, issues);
    ResolvedSpec {
        name,
        model,
        served_model_name,
        tokenizer,
        chat_template,
        engine,
        server,
        deploy,
        file: origin.file,
        dotenv: origin.dotenv,
        cache_dir: origin.cache_dir,
    }
}

fn required(issues: &mut Issues, key: &str, v: Option<&Value>, what: &str) -> Option<String> {
    let t = text(issues, key, v);
    if t.is_none() && !issues.has(key) {
        issues.push(key, format!("missing; expected {what}"));
    }
    t
}

/// Deployment names become container names: `[A-Za-z0-9][A-Za-z0-9_.-]*`.
fn check_name(issues: &mut Issues, name: &str) -> bool {
    let ok = name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if !ok {
        issues.push(
            "name",
            format!(
                "{} is not a valid name; use letters, digits, . _ - (starting with a letter or digit)",
                quote(name)
            ),
        );
    }
    ok
}

fn model_source(issues: &mut Issues, key: &str, text: &str) -> Option<ModelSource> {
    source::parse(text)
        .map_err(|m| issues.push(key, format!("{}: {m}", quote(text))))
        .ok()
}

fn engine(raw: RawEngine, issues: &mut Issues) -> EngineSpec {
    let k = |field: &str| format!("engine.{field}");
    let b = |issues: &mut Issues, field: &str, v: Option<Value>, default: bool| {
        boolean(issues, &k(field), v.as_ref()).unwrap_or(default)
    };
    let n = |issues: &mut Issues, field: &str, v: Option<Value>| {
        u32_min(issues, &k(field), v.as_ref(), 1)
    };
    EngineSpec {
        device: choice(
            issues,
            &k("device"),
            raw.device.as_ref(),
            Device::parse,
            Device::ACCEPTED,
        )
        .unwrap_or(Device::Auto),
        dtype: choice(
            issues,
            &k("dtype"),
            raw.dtype.as_ref(),
            Dtype::parse,
            Dtype::ACCEPTED,
        )
        .unwrap_or(Dtype::Auto),
        tensor_parallel_size: n(issues, "tensor_parallel_size", raw.tensor_parallel_size)
            .unwrap_or(1),
        pipeline_parallel_size: n(issues, "pipeline_parallel_size", raw.pipeline_parallel_size)
            .unwrap_or(1),
        decode_context_parallel_size: n(
            issues,
            "decode_context_parallel_size",
            raw.decode_context_parallel_size,
        )
        .unwrap_or(1),
        enable_expert_parallel: b(
            issues,
            "enable_expert_parallel",
            raw.enable_expert_parallel,
            false,
        ),
        quantization: quantization(issues, &k("quantization"), raw.quantization.as_ref()),
        kv_cache_dtype: choice(
            issues,
            &k("kv_cache_dtype"),
            raw.kv_cache_dtype.as_ref(),
            KvCacheDtype::parse,
            KvCacheDtype::ACCEPTED,
        )
        .unwrap_or(KvCacheDtype::Auto),
        max_model_len: n(issues, "max_model_len", raw.max_model_len),
        max_num_seqs: n(issues, "max_num_seqs", raw.max_num_seqs).unwrap_or(DEFAULT_MAX_NUM_SEQS),
        max_num_batched_tokens: n(issues, "max_num_batched_tokens", raw.max_num_batched_tokens),
        gpu_memory_utilization: fraction(
            issues,
            &k("gpu_memory_utilization"),
            raw.gpu_memory_utilization.as_ref(),
        )
        .unwrap_or(0.9),
        block_size: block_size(issues, &k("block_size"), raw.block_size.as_ref()).unwrap_or(16),
        enable_prefix_caching: b(
            issues,
            "enable_prefix_caching",
            raw.enable_prefix_caching,
            true,
        ),
        enable_chunked_prefill: b(
            issues,
            "enable_chunked_prefill",
            raw.enable_chunked_prefill,
            true,
        ),
        speculative_config: raw.speculative_config.and_then(|s| speculative(issues, s)),
        tool_call_parser: choice(
            issues,
            &k("tool_call_parser"),
            raw.tool_call_parser.as_ref(),
            ToolCallParser::parse,
            ToolCallParser::ACCEPTED,
        ),
        enable_auto_tool_choice: b(
            issues,
            "enable_auto_tool_choice",
            raw.enable_auto_tool_choice,
            false,
        ),
        reasoning_parser: choice(
            issues,
            &k("reasoning_parser"),
            raw.reasoning_parser.as_ref(),
            ReasoningParser::parse,
            ReasoningParser::ACCEPTED,
        ),
        enable_thinking: b(issues, "enable_thinking", raw.enable_thinking, true),
        hf_overrides: json_object(issues, &k("hf_overrides"), raw.hf_overrides.as_ref()),
        trust_remote_code: b(issues, "trust_remote_code", raw.trust_remote_code, false),
        seed: int(issues, &k("seed"), raw.seed.as_ref(), 0, u64::MAX).unwrap_or(0),
        threads: n(issues, "threads", raw.threads),
        default_chat_template_kwargs: json_object(
            issues,
            &k("default_chat_template_kwargs"),
            raw.default_chat_template_kwargs.as_ref(),
        ),
    }
}

/// `none` (or null) means unquantized / as the checkpoint says.
fn quantization(issues: &mut Issues, key: &str, v: Option<&Value>) -> Option<Quantization> {
    fn parse(s: &str) -> Option<Option<Quantization>> {
        if s == "none" {
            Some(None)
        } else {
            Quantization::parse(s).map(Some)
        }
    }
    let accepted: Vec<&str> = std::iter::once("none")
        .chain(Quantization::ACCEPTED.iter().copied())
        .collect();
    choice(issues, key, v, parse, &accepted).flatten()
}

fn fraction(issues: &mut Issues, key: &str, v: Option<&Value>) -> Option<f64> {
    let x = float(issues, key, v)?;
    if x > 0.0 && x <= 1.0 {
        Some(x)
    } else {
        issues.push(
            key,
            format!("{x} is out of range; allowed: more than 0 and at most 1 (a fraction of GPU memory)"),
        );
        None
    }
}

fn block_size(issues: &mut Issues, key: &str, v: Option<&Value>) -> Option<u32> {
    let n = int(issues, key, v, 1, u64::from(u32::MAX))?;
    if BLOCK_SIZES.contains(&n) {
        u32::try_from(n).ok()
    } else {
        let allowed: Vec<String> = BLOCK_SIZES.iter().map(u64::to_string).collect();
        issues.push(key, format!("{n} is not one of {}", allowed.join(", ")));
        None
    }
}

fn speculative(issues: &mut Issues, raw: RawSpeculative) -> Option<SpeculativeConfig> {
    let key = "engine.speculative_config.method";
    let method = choice(
        issues,
        key,
        raw.method.as_ref(),
        SpecMethod::parse,
        SpecMethod::ACCEPTED,
    );
    if method.is_none() && !issues.has(key) {
        issues.push(
            key,
            format!(
                "missing; expected one of {}",
                SpecMethod::ACCEPTED.join(", ")
            ),
        );
    }
    let tokens = u32_min(
        issues,
        "engine.speculative_config.num_speculative_tokens",
        raw.num_speculative_tokens.as_ref(),
        1,
    )
    .unwrap_or(1);
    method.map(|method| SpeculativeConfig {
        method,
        num_speculative_tokens: tokens,
    })
}

fn server(raw: RawServer, issues: &mut Issues) -> ServerSpec {
    let host = text(issues, "server.host", raw.host.as_ref()).unwrap_or_else(|| "0.0.0.0".into());
    if host.chars().any(char::is_whitespace) {
        issues.push(
            "server.host",
            format!("{} is not a host name or address", quote(&host)),
        );
    }
    let port = int(
        issues,
        "server.port",
        raw.port.as_ref(),
        1,
        u64::from(u16::MAX),
    )
    .and_then(|p| u16::try_from(p).ok())
    .unwrap_or(8000);
    ServerSpec {
        host,
        port,
        api_key: text(issues, "server.api_key", raw.api_key.as_ref()).map(Secret::new),
        allowed_origins: string_list(
            issues,
            "server.allowed_origins",
            raw.allowed_origins.as_ref(),
        ),
        claude_code_normalization: boolean(
            issues,
            "server.claude_code_normalization",
            raw.claude_code_normalization.as_ref(),
        )
        .unwrap_or(true),
        strip_date_line: boolean(
            issues,
            "server.strip_date_line",
            raw.strip_date_line.as_ref(),
        )
        .unwrap_or(false),
    }
}

fn deploy(raw: RawDeploy, device: Device, issues: &mut Issues) -> DeploySpec {
    let image = text(issues, "deploy.image", raw.image.as_ref()).unwrap_or_else(|| {
        if device == Device::Cpu {
            CPU_IMAGE
        } else {
            CUDA_IMAGE
        }
        .to_owned()
    });
    if image.chars().any(char::is_whitespace) {
        issues.push(
            "deploy.image",
            format!("{} is not an image reference", quote(&image)),
        );
    }
    let default_gpus = if device == Device::Cpu {
        Gpus::Count(0)
    } else {
        Gpus::All
    };
    DeploySpec {
        image,
        gpus: gpus(issues, "deploy.gpus", raw.gpus.as_ref()).unwrap_or(default_gpus),
        env: env_map(issues, "deploy.env", raw.env.as_ref()),
        shm_size: shm_size(issues, raw.shm_size.as_ref()),
        ipc: ipc(issues, raw.ipc.as_ref()),
        restart: restart(issues, raw.restart),
        volumes: volumes(issues, raw.volumes.as_ref()),
    }
}

fn shm_size(issues: &mut Issues, v: Option<&Value>) -> Option<ByteSize> {
    let key = "deploy.shm_size";
    let s = text(issues, key, v)?;
    let size = ByteSize::parse(&s);
    if size.is_none() {
        issues.push(
            key,
            format!(
                "{} is not a size; write a number with an optional unit k, m, g or t (e.g. 16g)",
                quote(&s)
            ),
        );
    }
    size
}

/// Docker's IPC modes.
fn ipc(issues: &mut Issues, v: Option<&Value>) -> Option<String> {
    let key = "deploy.ipc";
    let m = text(issues, key, v)?;
    let ok = matches!(m.as_str(), "host" | "private" | "shareable" | "none")
        || m.strip_prefix("container:").is_some_and(|c| !c.is_empty());
    if !ok {
        issues.push(
            key,
            format!(
                "{} is not one of host, private, shareable, none, container:NAME",
                quote(&m)
            ),
        );
    }
    ok.then_some(m)
}

/// `all`, `none`, a count (`2`, `"2"`), a list of ids (`[0, 1]`) or a comma list (`"0,1"`).
fn gpus(issues: &mut Issues, key: &str, v: Option<&Value>) -> Option<Gpus> {
    let v = v.filter(|v| !v.is_null() && v.as_str() != Some(""))?;
    let ids = |items: Vec<String>| -> Option<Gpus> {
        let mut seen = std::collections::HashSet::new();
        let ok = items
            .iter()
            .all(|i| !i.is_empty() && seen.insert(i.clone()));
        ok.then_some(Gpus::Ids(items))
    };
    let g = match v {
        Value::Number(n) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(Gpus::Count),
        Value::String(s) => match s.trim() {
            "all" => Some(Gpus::All),
            "none" => Some(Gpus::Count(0)),
            s if s.contains(',') => ids(s.split(',').map(|p| p.trim().to_owned()).collect()),
            s => s.parse::<u32>().ok().map(Gpus::Count),
        },
        Value::Sequence(items) => {
            let texts: Option<Vec<String>> = items
                .iter()
                .map(|i| match i {
                    Value::Number(n) => Some(n.to_string()),
                    Value::String(s) => Some(s.trim().to_owned()),
                    _ => None,
                })
                .collect();
            texts.and_then(ids)
        }
        _ => None,
    };
    if g.is_none() {
        issues.push(
            key,
            format!(
                "{} is not all, none, a GPU count or a list of distinct device ids (e.g. [0, 1])",
                show(v)
            ),
        );
    }
    g
}

fn restart(issues: &mut Issues, raw: Option<RawRestart>) -> Restart {
    let Some(raw) = raw else {
        return Restart {
            policy: RestartPolicy::OnFailure,
            max_retries: Some(5),
        };
    };
    let policy = choice(
        issues,
        "deploy.restart.policy",
        raw.policy.as_ref(),
        RestartPolicy::parse,
        RestartPolicy::ACCEPTED,
    )
    .unwrap_or(RestartPolicy::OnFailure);
    let retries = int(
        issues,
        "deploy.restart.max_retries",
        raw.max_retries.as_ref(),
        0,
        u64::from(u32::MAX),
    )
    .and_then(|n| u32::try_from(n).ok());
    let max_retries = match (policy, retries) {
        (RestartPolicy::OnFailure, r) => Some(r.unwrap_or(5)),
        (_, None) => None,
        (p, Some(r)) => {
            issues.push(
                "deploy.restart.max_retries",
                format!("{r} only applies to policy on-failure (policy is {p})"),
            );
            None
        }
    };
    Restart {
        policy,
        max_retries,
    }
}

fn volumes(issues: &mut Issues, v: Option<&Value>) -> Vec<String> {
    let volumes = string_list(issues, "deploy.volumes", v);
    for (i, v) in volumes.iter().enumerate() {
        check_volume(issues, &format!("deploy.volumes[{i}]"), v);
    }
    volumes
}

/// `host:container[:ro|rw]` with an absolute container path.
fn check_volume(issues: &mut Issues, key: &str, v: &str) {
    let parts: Vec<&str> = v.split(':').collect();
    let ok = match parts.as_slice() {
        [host, container] => !host.is_empty() && container.starts_with('/'),
        [host, container, mode] => {
            !host.is_empty() && container.starts_with('/') && matches!(*mode, "ro" | "rw")
        }
        _ => false,
    };
    if !ok {
        issues.push(
            key,
            format!(
                "{} is not host:container[:ro|rw] with an absolute container path",
                quote(v)
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::tests::{issues, load_yaml, MINIMAL};
    use crate::{ByteSize, Gpus, Quantization, RestartPolicy};

    fn with(extra: &str) -> String {
        format!("{MINIMAL}{extra}")
    }

    #[test]
    fn names_and_sources() {
        assert_eq!(
            issues("name: 'my box'\nmodel: /m\n"),
            ["name: \"my box\" is not a valid name; use letters, digits, . _ - (starting with a letter or digit)"]
        );
        let got = issues("name: t\nmodel: 'pip:pkg#a.gguf'\ntokenizer: 'hf:nope'\n");
        assert_eq!(got.len(), 2);
        assert!(got[0].starts_with("model: \"pip:pkg#a.gguf\": \"pkg\" does not pin a version"));
        assert!(got[1].starts_with("tokenizer: \"hf:nope\": \"nope\" is not a hub repository"));
        let s = load_yaml(&with("served_model_name: x\nchat_template: t.jinja\n"), &[]).unwrap();
        assert_eq!(s.served_model_name, "x");
        assert_eq!(
            s.chat_template.as_deref(),
            Some(std::path::Path::new("t.jinja"))
        );
    }

    #[test]
    fn engine_values() {
        let s = load_yaml(
            &with("engine: {quantization: none, block_size: '32', gpu_memory_utilization: 1, seed: 7}"),
            &[],
        )
        .unwrap();
        assert_eq!(s.engine.quantization, None);
        assert_eq!(s.engine.block_size, 32);
        assert_eq!(s.engine.seed, 7);
        let s = load_yaml(&with("engine: {quantization: compressed-tensors}"), &[]).unwrap();
        assert_eq!(s.engine.quantization, Some(Quantization::CompressedTensors));
        assert_eq!(
            issues(&with("engine: {block_size: 24, gpu_memory_utilization: 0}")),
            [
                "engine.gpu_memory_utilization: 0 is out of range; allowed: more than 0 and at most 1 (a fraction of GPU memory)",
                "engine.block_size: 24 is not one of 8, 16, 32, 64, 128",
            ]
        );
        assert_eq!(
            issues(&with("engine: {speculative_config: {method: medusa}, tool_call_parser: glm4}")),
            [
                "engine.speculative_config.method: \"medusa\" is not one of mtp, eagle, ngram",
                "engine.tool_call_parser: \"glm4\" is not one of glm47, glm45, hermes, deepseek_v3, deepseek_v31, qwen3_coder",
            ]
        );
        assert_eq!(
            issues(&with("engine: {max_num_seqs: 0, reasoning_parser: r1}")),
            [
                "engine.max_num_seqs: 0 is out of range; allowed: at least 1",
                "engine.reasoning_parser: \"r1\" is not one of glm45, deepseek_r1, deepseek_v3, qwen3",
            ]
        );
        assert_eq!(
            issues(&with("engine: {hf_overrides: [1], trust_remote_code: perhaps}")),
            [
                "engine.hf_overrides: expected a mapping, found [1]",
                "engine.trust_remote_code: \"perhaps\" is not a boolean; use true or false (or 1/0, yes/no, on/off)",
            ]
        );
    }

    #[test]
    fn server_values() {
        let s = load_yaml(
            &with("server: {host: 127.0.0.1, port: '9000', allowed_origins: [http://a]}"),
            &[],
        )
        .unwrap();
        assert_eq!((s.server.host.as_str(), s.server.port), ("127.0.0.1", 9000));
        assert_eq!(s.server.allowed_origins, ["http://a"]);
        assert_eq!(
            issues(&with("server: {port: 0}")),
            ["server.port: 0 is out of range; allowed: 1 to 65535"]
        );
    }

    #[test]
    fn gpus_forms() {
        let gpus = |v: &str| {
            load_yaml(&with(&format!("deploy: {{gpus: {v}}}")), &[])
                .unwrap()
                .deploy
                .gpus
        };
        assert_eq!(gpus("all"), Gpus::All);
        assert_eq!(gpus("none"), Gpus::Count(0));
        assert_eq!(gpus("2"), Gpus::Count(2));
        assert_eq!(gpus("'2'"), Gpus::Count(2));
        assert_eq!(gpus("[0, 1]"), Gpus::Ids(vec!["0".into(), "1".into()]));
        assert_eq!(gpus("'0, 3'"), Gpus::Ids(vec!["0".into(), "3".into()]));
        assert_eq!(gpus("[GPU-1234]"), Gpus::Ids(vec!["GPU-1234".into()]));
        assert_eq!(
            issues(&with("deploy: {gpus: [0, 0]}")),
            ["deploy.gpus: [0,0] is not all, none, a GPU count or a list of distinct device ids (e.g. [0, 1])"]
        );
        // A CPU deployment defaults to no GPUs and the CPU image.
        let s = load_yaml(&with("engine: {device: cpu}"), &[]).unwrap();
        assert_eq!(s.deploy.gpus, Gpus::Count(0));
        assert_eq!(s.deploy.image, "hearth-engine:cpu");
    }

    #[test]
    fn deploy_values() {
        let s = load_yaml(
            &with(
                "deploy:\n  env: [A=1]\n  shm_size: 16G\n  ipc: container:other\n  \
                 restart: {policy: always}\n  volumes: ['/data:/data:ro', './x:/x']\n",
            ),
            &[],
        )
        .unwrap();
        assert_eq!(s.deploy.env["A"], "1");
        assert_eq!(s.deploy.shm_size, Some(ByteSize(16 << 30)));
        assert_eq!(s.deploy.ipc.as_deref(), Some("container:other"));
        assert_eq!(s.deploy.restart.policy, RestartPolicy::Always);
        assert_eq!(s.deploy.restart.max_retries, None);
        let s = load_yaml(&with("deploy: {restart: {policy: on-failure}}"), &[]).unwrap();
        assert_eq!(s.deploy.restart.max_retries, Some(5));
        assert_eq!(
            issues(&with("deploy: {restart: {policy: sometimes}, volumes: ['/a:rel']}")),
            [
                "deploy.restart.policy: \"sometimes\" is not one of no, on-failure, always, unless-stopped",
                "deploy.volumes[0]: \"/a:rel\" is not host:container[:ro|rw] with an absolute container path",
            ]
        );
    }
}
