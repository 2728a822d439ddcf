//! Random weights of the shapes a config asks for, with no checkpoint on disk: benchmarks of
//! models too large to write out (a 30B MoE's 60 GB) run on exactly the tensors the
//! architecture loads. A directory holding config.json and an empty `RANDOM_WEIGHTS` file opens
//! as one. Matrices are bf16 with values of about ±0.02 (norm weights 1, so activations keep
//! their scale); each tensor's values follow from its name, so runs repeat.

use std::path::{Path, PathBuf};

use hearth_backend::{GgmlType, HostWeight, WeightData};
use rayon::prelude::*;

use crate::config::HfConfig;
use crate::source::WeightSource;
use crate::LoadError;

/// The marker file that makes a config-only directory a random-weight model.
pub const MARKER: &str = "RANDOM_WEIGHTS";

pub struct RandomWeights {
    dir: PathBuf,
    config: HfConfig,
}

impl RandomWeights {
    pub fn open(dir: &Path) -> Result<Self, LoadError> {
        Ok(RandomWeights {
            dir: dir.to_path_buf(),
            config: HfConfig::from_file(&dir.join("config.json"))?,
        })
    }
}

fn seed_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// bf16 bytes of `n` values: `center` plus uniform noise of +-`amp`, from a per-chunk
/// splitmix stream (chunks in parallel).
fn values(n: usize, seed: u64, center: f32, amp: f32) -> Vec<u8> {
    const CHUNK: usize = 1 << 16;
    let mut out = vec![0u8; 2 * n];
    out.par_chunks_mut(2 * CHUNK)
        .enumerate()
        .for_each(|(c, bytes)| {
            let mut s = seed ^ (c as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            for v in bytes.chunks_exact_mut(2) {
                s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = s;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^= z >> 31;
                let u = (z >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
                v.copy_from_slice(&half::bf16::from_f32(center + amp * u).to_le_bytes());
            }
        });
    out
}

impl WeightSource for RandomWeights {
    fn path(&self) -> &Path {
        &self.dir
    }

    fn config(&self) -> &HfConfig {
        &self.config
    }

    fn describe(&self) -> String {
        "random bf16 weights (no checkpoint)".into()
    }

    /// Only tensors asked for by shape exist (`require`): an untied head is not made.
    fn tensor(&self, _name: &str) -> Result<Option<HostWeight>, LoadError> {
        Ok(None)
    }

    fn require(&self, name: &str, shape: &[usize]) -> Result<HostWeight, LoadError> {
        let n: usize = shape.iter().product();
        let norm = name.contains("norm") || name.ends_with("layernorm.weight");
        let (center, amp) = match () {
            _ if norm => (1.0, 0.0),
            _ if name.ends_with("e_score_correction_bias") || name.ends_with(".bias") => {
                (0.0, 0.01)
            }
            _ => (0.0, 0.02),
        };
        Ok(HostWeight {
            name: name.to_owned(),
            shape: shape.to_vec(),
            data: WeightData::Ggml {
                ty: GgmlType::BF16,
                bytes: values(n, seed_of(name), center, amp).into(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensors_take_the_asked_shape_and_repeat() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("config.json"),
            r#"{"architectures":["LlamaForCausalLM"],"hidden_size":8,"intermediate_size":16,
               "num_hidden_layers":1,"num_attention_heads":2,"vocab_size":32}"#,
        )
        .unwrap();
        let src = RandomWeights::open(dir.path()).unwrap();
        let a = src
            .require("model.layers.0.mlp.up_proj.weight", &[16, 8])
            .unwrap();
        let b = src
            .require("model.layers.0.mlp.up_proj.weight", &[16, 8])
            .unwrap();
        assert_eq!(a.shape, vec![16, 8]);
        let (WeightData::Ggml { bytes: x, .. }, WeightData::Ggml { bytes: y, .. }) =
            (a.data, b.data)
        else {
            panic!("bf16 bytes")
        };
        assert_eq!(&x[..], &y[..]);
        assert!(x.chunks_exact(2).any(|v| v != [0, 0]));
        let norm = src.require("model.norm.weight", &[8]).unwrap();
        let WeightData::Ggml { bytes, .. } = norm.data else {
            panic!()
        };
        assert!(bytes
            .chunks_exact(2)
            .all(|v| half::bf16::from_le_bytes([v[0], v[1]]).to_f32() == 1.0));
    }
}
