//! transformers checkpoint directories as a `WeightSource`: config.json plus one
//! `model.safetensors` or shards listed in `model.safetensors.index.json`, each mmap'd once.
//! Dense f32/f16/bf16 tensors are handed over as views of the mapping (no copy); each backend
//! picks its layout.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hearth_backend::{GgmlType, HostBytes, HostWeight, WeightData};
use memmap2::Mmap;
use safetensors::{Dtype, SafeTensors};

use crate::config::HfConfig;
use crate::source::WeightSource;
use crate::LoadError;

struct Entry {
    shard: usize,
    dtype: Dtype,
    shape: Vec<usize>,
    start: usize,
    end: usize,
}

pub struct SafetensorsWeights {
    dir: PathBuf,
    config: HfConfig,
    shards: Vec<(PathBuf, Arc<Mmap>)>,
    index: HashMap<String, Entry>,
}

impl SafetensorsWeights {
    pub fn open(dir: &Path) -> Result<Self, LoadError> {
        let config = HfConfig::from_file(&dir.join("config.json"))?;
        let files = shard_files(dir)?;
        let mut shards = Vec::with_capacity(files.len());
        let mut index = HashMap::new();
        for (i, path) in files.into_iter().enumerate() {
            let file = File::open(&path).map_err(|e| LoadError::io(&path, e))?;
            // SAFETY: read-only map of a checkpoint file Hearth never writes.
            let mmap = unsafe { Mmap::map(&file) }.map_err(|e| LoadError::io(&path, e))?;
            let (header_len, meta) = SafeTensors::read_metadata(&mmap).map_err(|e| {
                LoadError::format(
                    &path,
                    format!("safetensors header: {e} (the file is truncated or corrupt)"),
                )
            })?;
            let data_start = 8 + header_len;
            for (name, info) in meta.tensors() {
                let (start, end) = (
                    data_start + info.data_offsets.0,
                    data_start + info.data_offsets.1,
                );
                if end > mmap.len() {
                    return Err(LoadError::format(
                        &path,
                        format!("tensor {name}: data runs past the end of the file (truncated)"),
                    ));
                }
                index.insert(
                    name,
                    Entry {
                        shard: i,
                        dtype: info.dtype,
                        shape: info.shape.clone(),
                        start,
                        end,
                    },
                );
            }
            shards.push((path, Arc::new(mmap)));
        }
        Ok(SafetensorsWeights {
            dir: dir.to_path_buf(),
            config,
            shards,
            index,
        })
    }
}

fn shard_files(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let index_path = dir.join("model.safetensors.index.json");
    if index_path.exists() {
        let text =
            std::fs::read_to_string(&index_path).map_err(|e| LoadError::io(&index_path, e))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| LoadError::format(&index_path, e.to_string()))?;
        let map = v
            .get("weight_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| LoadError::missing_field(&index_path, "weight_map"))?;
        let mut files: Vec<String> = map
            .values()
            .filter_map(|f| f.as_str().map(str::to_owned))
            .collect();
        files.sort();
        files.dedup();
        return Ok(files.into_iter().map(|f| dir.join(f)).collect());
    }
    let single = dir.join("model.safetensors");
    if single.exists() {
        return Ok(vec![single]);
    }
    Err(LoadError::format(
        dir,
        "no model.safetensors or model.safetensors.index.json in this directory",
    ))
}

impl WeightSource for SafetensorsWeights {
    fn path(&self) -> &Path {
        &self.dir
    }

    fn config(&self) -> &HfConfig {
        &self.config
    }

    fn describe(&self) -> String {
        let mut kinds: Vec<String> = self
            .index
            .values()
            .map(|e| format!("{:?}", e.dtype))
            .collect();
        kinds.sort();
        kinds.dedup();
        format!(
            "safetensors ({} shards, {})",
            self.shards.len(),
            kinds.join("/")
        )
    }

    fn tensor(&self, name: &str) -> Result<Option<HostWeight>, LoadError> {
        let Some(e) = self.index.get(name) else {
            return Ok(None);
        };
        let (path, mmap) = &self.shards[e.shard];
        let bytes = &mmap[e.start..e.end];
        let ty = match e.dtype {
            Dtype::F32 => GgmlType::F32,
            Dtype::F16 => GgmlType::F16,
            Dtype::BF16 => GgmlType::BF16,
            other => {
                return Err(LoadError::Unsupported {
                    path: path.clone(),
                    what: format!("tensor {name} of dtype {other:?}"),
                    supported: "F32, F16, BF16".into(),
                })
            }
        };
        let n: usize = e.shape.iter().product();
        if bytes.len() != ty.bytes_for(n) {
            return Err(LoadError::format(
                path,
                format!(
                    "tensor {name}: {} bytes for shape {:?} of {:?}",
                    bytes.len(),
                    e.shape,
                    e.dtype
                ),
            ));
        }
        // Raw bytes: each backend widens or keeps them (the CPU widens to f32, CUDA keeps bf16).
        Ok(Some(HostWeight {
            name: name.to_owned(),
            shape: e.shape.clone(),
            data: WeightData::Ggml {
                ty,
                bytes: HostBytes::Mapped {
                    map: mmap.clone(),
                    range: e.start..e.end,
                },
            },
        }))
    }
}
