//! GPU preflight arithmetic: the GPUs `nvidia-smi` reports, and a rough estimate of whether a
//! model fits them: weights (checkpoint file sizes) split over tensor x pipeline ranks, plus
//! the KV cache of one full `max_model_len` sequence in the spec's KV dtype, plus workspace,
//! against `gpu_memory_utilization` of the smallest GPU used. Rough on purpose: it catches
//! "this cannot possibly fit" before a multi-minute load, not every OOM.

use std::path::Path;

use hearth_spec::{Gpus, KvCacheDtype, ResolvedSpec};
use serde::Deserialize;

/// Activations, sampler and CUDA graphs, per GPU.
const WORKSPACE_BYTES: u64 = 2 << 30;

/// One GPU as nvidia-smi lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    pub index: String,
    pub uuid: String,
    pub memory_bytes: u64,
}

/// Parses `nvidia-smi --query-gpu=index,uuid,memory.total --format=csv,noheader,nounits`.
pub fn parse_gpus(text: &str) -> Vec<Gpu> {
    text.lines()
        .filter_map(|l| {
            let mut parts = l.split(',').map(str::trim);
            let index = parts.next()?.to_owned();
            let uuid = parts.next()?.to_owned();
            let mib: u64 = parts.next()?.parse().ok()?;
            Some(Gpu {
                index,
                uuid,
                memory_bytes: mib << 20,
            })
        })
        .collect()
}

/// The GPUs a spec's `deploy.gpus` selects among `all`; `Err` names the missing ones.
pub fn selected<'a>(gpus: &Gpus, all: &'a [Gpu]) -> Result<Vec<&'a Gpu>, String> {
    match gpus {
        Gpus::All => Ok(all.iter().collect()),
        Gpus::Count(n) => {
            let n = *n as usize;
            if all.len() < n {
                Err(format!(
                    "deploy.gpus asks for {n} GPUs; this machine has {}",
                    all.len()
                ))
            } else {
                Ok(all.iter().take(n).collect())
            }
        }
        Gpus::Ids(ids) => ids
            .iter()
            .map(|id| {
                all.iter()
                    .find(|g| &g.index == id || &g.uuid == id)
                    .ok_or_else(|| {
                        format!("deploy.gpus names GPU {id}, which is not on this machine")
                    })
            })
            .collect(),
    }
}

/// The fields of config.json the KV estimate needs.
#[derive(Debug, Default, Deserialize)]
struct Config {
    num_hidden_layers: Option<u64>,
    num_attention_heads: Option<u64>,
    num_key_value_heads: Option<u64>,
    hidden_size: Option<u64>,
    head_dim: Option<u64>,
    /// MLA (DeepSeek, GLM-5): one latent per token and layer instead of K and V per head.
    kv_lora_rank: Option<u64>,
    qk_rope_head_dim: Option<u64>,
    max_position_embeddings: Option<u64>,
}

/// The estimate, per GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Estimate {
    pub weights: u64,
    pub kv: u64,
    pub need: u64,
    pub have: u64,
    pub ranks: u64,
    pub tokens: u64,
}

impl Estimate {
    pub fn fits(&self) -> bool {
        self.need <= self.have
    }

    pub fn explain(&self) -> String {
        format!(
            "per GPU: weights {} ({} ranks) + KV cache for one {}-token sequence {} + workspace \
             {} = {} needed, {} available",
            gb(self.weights),
            self.ranks,
            self.tokens,
            gb(self.kv),
            gb(WORKSPACE_BYTES),
            gb(self.need),
            gb(self.have)
        )
    }
}

fn gb(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

/// Estimates for a local model directory (config.json + weights) or GGUF file; `None` when
/// there is too little to go on (no config.json, say).
pub fn estimate(spec: &ResolvedSpec, model: &Path, gpu_memory: u64) -> Option<Estimate> {
    let (weights_total, config) = if model.is_dir() {
        let text = std::fs::read_to_string(model.join("config.json")).ok()?;
        let config: Config = serde_json::from_str(&text).ok()?;
        (weight_bytes(model), config)
    } else {
        (std::fs::metadata(model).ok()?.len(), Config::default())
    };
    let e = &spec.engine;
    let ranks = u64::from(e.tensor_parallel_size * e.pipeline_parallel_size).max(1);
    let tp = u64::from(e.tensor_parallel_size).max(1);
    let dcp = u64::from(e.decode_context_parallel_size).max(1);
    let tokens = e
        .max_model_len
        .map(u64::from)
        .or(config.max_position_embeddings)
        .unwrap_or(4096);
    let elem = match e.kv_cache_dtype {
        KvCacheDtype::Fp8 | KvCacheDtype::Fp8E4m3 => 1,
        _ => 2,
    };
    let kv = kv_bytes_per_token(&config, elem).map_or(0, |per_token| {
        // MLA latents are replicated across TP ranks; K/V heads are split over them.
        let split = if config.kv_lora_rank.is_some() {
            dcp
        } else {
            tp * dcp
        };
        per_token * tokens / split
    });
    let weights = weights_total / ranks;
    let need = weights + kv + WORKSPACE_BYTES;
    let have = (gpu_memory as f64 * e.gpu_memory_utilization) as u64;
    Some(Estimate {
        weights,
        kv,
        need,
        have,
        ranks,
        tokens,
    })
}

fn kv_bytes_per_token(c: &Config, elem: u64) -> Option<u64> {
    let layers = c.num_hidden_layers?;
    if let Some(rank) = c.kv_lora_rank {
        return Some(layers * (rank + c.qk_rope_head_dim.unwrap_or(64)) * elem);
    }
    let heads = c.num_attention_heads?;
    let kv_heads = c.num_key_value_heads.unwrap_or(heads);
    let head_dim = c.head_dim.or_else(|| Some(c.hidden_size? / heads))?;
    Some(layers * 2 * kv_heads * head_dim * elem)
}

/// Total size of the weight files in a checkpoint directory.
fn weight_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| {
                    let n = e.file_name().to_string_lossy().to_ascii_lowercase();
                    n.ends_with(".safetensors") || n.ends_with(".gguf") || n.ends_with(".bin")
                })
                // metadata() follows symlinks (hub snapshots link into blobs/).
                .filter_map(|e| std::fs::metadata(e.path()).ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMI: &str = "0, GPU-aaa, 81559\n1, GPU-bbb, 81559\n";

    #[test]
    fn reads_nvidia_smi_and_selects_gpus() {
        let gpus = parse_gpus(SMI);
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[1].memory_bytes, 81559 << 20);
        assert_eq!(selected(&Gpus::All, &gpus).unwrap().len(), 2);
        assert_eq!(
            selected(&Gpus::Ids(vec!["GPU-bbb".into()]), &gpus).unwrap()[0].index,
            "1"
        );
        let e = selected(&Gpus::Count(4), &gpus).unwrap_err();
        assert_eq!(e, "deploy.gpus asks for 4 GPUs; this machine has 2");
        assert!(selected(&Gpus::Ids(vec!["7".into()]), &gpus).is_err());
    }

    fn spec(engine: &str) -> ResolvedSpec {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.yaml");
        std::fs::write(&file, format!("name: x\nmodel: /m/x\nengine: {engine}\n")).unwrap();
        let opts = hearth_spec::LoadOptions {
            env: Some(Default::default()),
            dotenv: hearth_spec::DotenvFile::Off,
        };
        hearth_spec::load_with(&file, &opts).unwrap()
    }

    fn model(config: &str, weights: u64) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), config).unwrap();
        let f = std::fs::File::create(dir.path().join("model.safetensors")).unwrap();
        f.set_len(weights).unwrap();
        dir
    }

    #[test]
    fn qwen3_8b_shaped_model_on_one_80gb_gpu() {
        // 36 layers, 8 KV heads of 128: 147,456 bytes per token in bf16.
        let m = model(
            r#"{"num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
                "head_dim": 128, "hidden_size": 4096}"#,
            16_400_000_000,
        );
        let s = spec("{device: cuda, max_model_len: 40960, gpu_memory_utilization: 0.9}");
        let e = estimate(&s, m.path(), 80 << 30).unwrap();
        assert_eq!(e.kv, 147_456 * 40960);
        assert!(e.fits(), "{}", e.explain());
        // The same on a 16 GB card does not fit, and the message has the numbers.
        let e = estimate(&s, m.path(), 16 << 30).unwrap();
        assert!(!e.fits());
        assert!(
            e.explain()
                .starts_with("per GPU: weights 16.4 GB (1 ranks) + KV cache for one 40960-token"),
            "{}",
            e.explain()
        );
    }

    #[test]
    fn mla_kv_is_one_latent_and_fp8_halves_it() {
        let m = model(
            r#"{"num_hidden_layers": 10, "num_attention_heads": 8, "kv_lora_rank": 512,
                "qk_rope_head_dim": 64}"#,
            1000,
        );
        let bf16 = estimate(
            &spec("{device: cuda, max_model_len: 1000, tensor_parallel_size: 4}"),
            m.path(),
            80 << 30,
        )
        .unwrap();
        assert_eq!(bf16.kv, 10 * 576 * 2 * 1000);
        let fp8 = estimate(
            &spec(
                "{device: cuda, max_model_len: 1000, tensor_parallel_size: 4, kv_cache_dtype: fp8}",
            ),
            m.path(),
            80 << 30,
        )
        .unwrap();
        assert_eq!(fp8.kv * 2, bf16.kv);
        assert_eq!(fp8.weights, 250);
    }
}
