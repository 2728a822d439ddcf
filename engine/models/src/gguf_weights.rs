//! GGUF checkpoints as a `WeightSource`: llama.cpp tensor names mapped to transformers names,
//! metadata translated to a config.json, and llama.cpp's Q/K row permutation undone so the
//! architectures see exactly the transformers layout (NeoX rotary).

use std::path::Path;

use hearth_backend::{GgmlType, HostWeight, WeightData};
use serde_json::json;

use crate::config::HfConfig;
use crate::gguf::{GgufFile, GgufTensorInfo};
use crate::source::WeightSource;
use crate::LoadError;

/// GGUF `general.architecture` values we map, with their transformers class.
const ARCHES: &[(&str, &str)] = &[
    ("llama", "LlamaForCausalLM"),
    ("qwen2", "Qwen2ForCausalLM"),
    ("qwen3", "Qwen3ForCausalLM"),
];

pub struct GgufWeights {
    file: GgufFile,
    arch: String,
    config: HfConfig,
}

impl GgufWeights {
    pub fn open(path: &Path) -> Result<Self, LoadError> {
        let file = GgufFile::open(path)?;
        let arch = file
            .get_str("general.architecture")
            .ok_or_else(|| LoadError::missing_field(path, "general.architecture"))?
            .to_owned();
        let Some((_, hf_arch)) = ARCHES.iter().find(|(a, _)| *a == arch) else {
            return Err(LoadError::UnsupportedArchitecture {
                path: path.to_path_buf(),
                architecture: format!("{arch} (GGUF)"),
                supported: ARCHES
                    .iter()
                    .map(|(a, _)| *a)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let config = gguf_config(&file, &arch, hf_arch)?;
        Ok(GgufWeights { file, arch, config })
    }

    pub fn file(&self) -> &GgufFile {
        &self.file
    }
}

fn gguf_config(f: &GgufFile, arch: &str, hf_arch: &str) -> Result<HfConfig, LoadError> {
    let key = |k: &str| format!("{arch}.{k}");
    let req = |k: &str| f.require_u64(&key(k));
    let n_heads = req("attention.head_count")?;
    let vocab = f
        .get_u64(&key("vocab_size"))
        .or_else(|| {
            f.string_array("tokenizer.ggml.tokens")
                .map(|t| t.len() as u64)
        })
        .ok_or_else(|| LoadError::missing_field(&f.path, &key("vocab_size")))?;
    let cfg = json!({
        "architectures": [hf_arch],
        "hidden_size": req("embedding_length")?,
        "intermediate_size": req("feed_forward_length")?,
        "num_hidden_layers": req("block_count")?,
        "num_attention_heads": n_heads,
        "num_key_value_heads": f.get_u64(&key("attention.head_count_kv")).unwrap_or(n_heads),
        "head_dim": f.get_u64(&key("attention.key_length")),
        "vocab_size": vocab,
        "rms_norm_eps": f.get_f64(&key("attention.layer_norm_rms_epsilon")).unwrap_or(1e-6),
        "rope_theta": f.get_f64(&key("rope.freq_base")).unwrap_or(10000.0),
        "max_position_embeddings": f.get_u64(&key("context_length")),
        "tie_word_embeddings": f.tensor("output.weight").is_none(),
        "attention_bias": f.tensor("blk.0.attn_q.bias").is_some(),
    });
    HfConfig::from_json(&f.path, &cfg.to_string())
}

/// transformers name -> llama.cpp name.
fn gguf_name(hf: &str) -> Option<String> {
    let fixed = match hf {
        "model.embed_tokens.weight" => Some("token_embd.weight"),
        "model.norm.weight" => Some("output_norm.weight"),
        "lm_head.weight" => Some("output.weight"),
        _ => None,
    };
    if let Some(n) = fixed {
        return Some(n.to_owned());
    }
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, name) = rest.split_once('.')?;
    let (module, suffix) = name.rsplit_once('.')?;
    let mapped = match module {
        "input_layernorm" => "attn_norm",
        "post_attention_layernorm" => "ffn_norm",
        "self_attn.q_proj" => "attn_q",
        "self_attn.k_proj" => "attn_k",
        "self_attn.v_proj" => "attn_v",
        "self_attn.o_proj" => "attn_output",
        "self_attn.q_norm" => "attn_q_norm",
        "self_attn.k_norm" => "attn_k_norm",
        "mlp.gate_proj" => "ffn_gate",
        "mlp.up_proj" => "ffn_up",
        "mlp.down_proj" => "ffn_down",
        _ => return None,
    };
    Some(format!("blk.{layer}.{mapped}.{suffix}"))
}

impl WeightSource for GgufWeights {
    fn path(&self) -> &Path {
        &self.file.path
    }

    fn config(&self) -> &HfConfig {
        &self.config
    }

    fn describe(&self) -> String {
        let mut kinds: Vec<&str> = self
            .file
            .tensors
            .iter()
            .map(|t| t.ggml_type.name())
            .collect();
        kinds.sort_unstable();
        kinds.dedup();
        format!(
            "gguf v{} ({}, {})",
            self.file.version,
            self.arch,
            kinds.join("/")
        )
    }

    fn gguf(&self) -> Option<&GgufFile> {
        Some(&self.file)
    }

    fn tensor(&self, name: &str) -> Result<Option<HostWeight>, LoadError> {
        let Some(info) = gguf_name(name).and_then(|g| self.file.tensor(&g)) else {
            return Ok(None);
        };
        let mut w = host_weight(&self.file, info, name);
        // llama.cpp's converter interleaves the two rotary halves of every Q/K head for the
        // `llama` architecture only; undo it to get back the NeoX layout.
        if self.arch == "llama"
            && (name.ends_with("q_proj.weight") || name.ends_with("k_proj.weight"))
        {
            let heads = if name.ends_with("q_proj.weight") {
                self.config.num_attention_heads
            } else {
                self.config.n_kv_heads()
            };
            unpermute_rows(&mut w, heads);
        }
        Ok(Some(w))
    }
}

fn host_weight(f: &GgufFile, info: &GgufTensorInfo, name: &str) -> HostWeight {
    let bytes = f.bytes(info);
    let shape = info.shape();
    let data = match info.ggml_type {
        GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => {
            let mut v = vec![0f32; info.n_elements() as usize];
            hearth_backend::quant::dequantize_row(info.ggml_type, bytes, &mut v);
            WeightData::F32(v)
        }
        ty => WeightData::Ggml {
            ty,
            bytes: bytes.to_vec().into(),
        },
    };
    HostWeight {
        name: name.to_owned(),
        shape,
        data,
    }
}

/// GGUF row `h*hd + 2i + j` holds transformers row `h*hd + j*hd/2 + i`; move rows back.
fn unpermute_rows(w: &mut HostWeight, heads: usize) {
    let rows = w.rows();
    let hd = rows / heads;
    let half = hd / 2;
    let row_bytes = match &w.data {
        WeightData::F32(_) => w.cols() * 4,
        WeightData::Ggml { ty, .. } => ty.bytes_for(w.cols()),
        WeightData::Fp8 { .. } => unreachable!("a GGUF file's tensors are never fp8 here"),
    };
    let src: Vec<u8> = match &w.data {
        WeightData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        WeightData::Ggml { bytes, .. } => bytes.to_vec(),
        WeightData::Fp8 { .. } => unreachable!("a GGUF file's tensors are never fp8 here"),
    };
    let mut dst = vec![0u8; src.len()];
    for h in 0..heads {
        for i in 0..half {
            for j in 0..2 {
                let from = h * hd + 2 * i + j;
                let to = h * hd + j * half + i;
                dst[to * row_bytes..(to + 1) * row_bytes]
                    .copy_from_slice(&src[from * row_bytes..(from + 1) * row_bytes]);
            }
        }
    }
    w.data = match &w.data {
        WeightData::F32(_) => WeightData::F32(
            dst.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        WeightData::Ggml { ty, .. } => WeightData::Ggml {
            ty: *ty,
            bytes: dst.into(),
        },
        WeightData::Fp8 { .. } => unreachable!("a GGUF file's tensors are never fp8 here"),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_both_ways_for_layers() {
        assert_eq!(
            gguf_name("model.layers.3.self_attn.q_proj.weight").as_deref(),
            Some("blk.3.attn_q.weight")
        );
        assert_eq!(
            gguf_name("model.layers.0.mlp.down_proj.weight").as_deref(),
            Some("blk.0.ffn_down.weight")
        );
        assert_eq!(gguf_name("model.layers.0.mtp.weird.weight"), None);
    }

    #[test]
    fn unpermute_inverts_llama_cpp_permute() {
        // llama.cpp: reshape(heads, 2, hd/2, cols).swapaxes(1, 2). Build that from known rows.
        let (heads, hd, cols) = (2, 4, 1);
        let hf: Vec<f32> = (0..heads * hd).map(|r| r as f32).collect();
        let mut permuted = vec![0f32; hf.len()];
        for h in 0..heads {
            for j in 0..2 {
                for i in 0..hd / 2 {
                    permuted[h * hd + 2 * i + j] = hf[h * hd + j * hd / 2 + i];
                }
            }
        }
        let mut w = HostWeight::f32("q", vec![heads * hd, cols], permuted);
        unpermute_rows(&mut w, heads);
        match w.data {
            WeightData::F32(v) => assert_eq!(v, hf),
            WeightData::Ggml { .. } | WeightData::Fp8 { .. } => unreachable!(),
        }
    }
}
