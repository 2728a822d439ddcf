//! GGUF v2/v3 reader: header, metadata key/values, tensor index, and zero-copy tensor bytes from an mmap.
//!
//! Owns the file format only. Turning GGUF tensors into model weights (names, llama.cpp's Q/K row
//! permutation) is `gguf_weights.rs`; turning the vocabulary metadata into a tokenizer is hearth-text's.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use hearth_backend::GgmlType;
use memmap2::Mmap;

use crate::error::LoadError;

const MAGIC: &[u8; 4] = b"GGUF";
const DEFAULT_ALIGNMENT: u64 = 32;

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum GgufValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    Array(Vec<GgufValue>),
}

impl GgufValue {
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            GgufValue::U8(v) => Some(v.into()),
            GgufValue::U16(v) => Some(v.into()),
            GgufValue::U32(v) => Some(v.into()),
            GgufValue::U64(v) => Some(v),
            GgufValue::I8(v) => u64::try_from(v).ok(),
            GgufValue::I16(v) => u64::try_from(v).ok(),
            GgufValue::I32(v) => u64::try_from(v).ok(),
            GgufValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            GgufValue::F32(v) => Some(v.into()),
            GgufValue::F64(v) => Some(v),
            _ => self.as_u64().map(|v| v as f64),
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            GgufValue::Bool(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[GgufValue]> {
        match self {
            GgufValue::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// Where one tensor lives in the file.
#[derive(Debug, Clone)]
pub struct GgufTensorInfo {
    pub name: String,
    /// GGUF order: `dims[0]` is the innermost (contiguous) dimension.
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Absolute byte offset in the file.
    pub offset: usize,
    pub n_bytes: usize,
}

impl GgufTensorInfo {
    /// Shape in row-major (PyTorch) order: outermost first.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }

    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }
}

/// An opened GGUF file: metadata and tensor index parsed, data mmap'd.
pub struct GgufFile {
    pub path: PathBuf,
    pub version: u32,
    pub metadata: BTreeMap<String, GgufValue>,
    pub tensors: Vec<GgufTensorInfo>,
    mmap: Mmap,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

impl GgufFile {
    pub fn open(path: &Path) -> Result<Self, LoadError> {
        let file = File::open(path).map_err(|e| LoadError::io(path, e))?;
        // SAFETY: the file is opened read-only and Hearth never writes to model files; a
        // concurrent external truncation is the one hazard, as with every mmap-based loader.
        let mmap = unsafe { Mmap::map(&file) }.map_err(|e| LoadError::io(path, e))?;
        let mut r = Reader {
            buf: &mmap,
            pos: 0,
            path,
        };
        let magic = r.take(4)?;
        if magic != MAGIC {
            return Err(LoadError::format(
                path,
                format!("not a GGUF file (magic {magic:02x?})"),
            ));
        }
        let version = r.u32()?;
        if !(2..=3).contains(&version) {
            return Err(LoadError::format(
                path,
                format!("GGUF version {version} is not supported (supported: 2, 3)"),
            ));
        }
        let n_tensors = r.u64()?;
        let n_kv = r.u64()?;
        let mut metadata = BTreeMap::new();
        for _ in 0..n_kv {
            let key = r.string()?;
            let ty = r.u32()?;
            let value = r.value(ty).map_err(|e| e.in_context(&key))?;
            metadata.insert(key, value);
        }
        let alignment = metadata
            .get("general.alignment")
            .and_then(GgufValue::as_u64)
            .unwrap_or(DEFAULT_ALIGNMENT);
        let mut infos = Vec::with_capacity(n_tensors as usize);
        for _ in 0..n_tensors {
            let name = r.string()?;
            let n_dims = r.u32()?;
            if n_dims > 4 {
                return Err(LoadError::format(
                    path,
                    format!("tensor {name}: {n_dims} dimensions"),
                ));
            }
            let dims = (0..n_dims)
                .map(|_| r.u64())
                .collect::<Result<Vec<_>, _>>()?;
            let type_id = r.u32()?;
            let offset = r.u64()?;
            let ggml_type = GgmlType::from_id(type_id).ok_or_else(|| {
                LoadError::format(
                    path,
                    format!(
                        "tensor {name}: ggml type {type_id} is not supported (supported: {})",
                        GgmlType::supported_names()
                    ),
                )
            })?;
            infos.push((name, dims, ggml_type, offset));
        }
        let data_start = r.pos.div_ceil(alignment as usize) * alignment as usize;
        let mut tensors = Vec::with_capacity(infos.len());
        for (name, dims, ggml_type, offset) in infos {
            let n_elements: u64 = dims.iter().product();
            if !n_elements.is_multiple_of(ggml_type.block_elems() as u64) {
                return Err(LoadError::format(
                    path,
                    format!(
                        "tensor {name}: {n_elements} elements is not a multiple of the {} block \
                         size {}",
                        ggml_type.name(),
                        ggml_type.block_elems()
                    ),
                ));
            }
            let n_bytes = ggml_type.bytes_for(n_elements as usize);
            let start = data_start + offset as usize;
            if start + n_bytes > mmap.len() {
                return Err(LoadError::format(
                    path,
                    format!(
                        "tensor {name}: data [{start}, {}) runs past the end of the file ({} \
                         bytes): the file is truncated",
                        start + n_bytes,
                        mmap.len()
                    ),
                ));
            }
            tensors.push(GgufTensorInfo {
                name,
                dims,
                ggml_type,
                offset: start,
                n_bytes,
            });
        }
        Ok(GgufFile {
            path: path.to_path_buf(),
            version,
            metadata,
            tensors,
            mmap,
        })
    }

    pub fn tensor(&self, name: &str) -> Option<&GgufTensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The raw bytes of a tensor, straight from the mmap.
    pub fn bytes(&self, info: &GgufTensorInfo) -> &[u8] {
        &self.mmap[info.offset..info.offset + info.n_bytes]
    }

    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        self.metadata.get(key)
    }

    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(GgufValue::as_str)
    }

    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key).and_then(GgufValue::as_u64)
    }

    pub fn get_f64(&self, key: &str) -> Option<f64> {
        self.get(key).and_then(GgufValue::as_f64)
    }

    /// A required integer field, with an error naming the file and key.
    pub fn require_u64(&self, key: &str) -> Result<u64, LoadError> {
        self.get_u64(key)
            .ok_or_else(|| LoadError::missing_field(&self.path, key))
    }

    pub fn string_array(&self, key: &str) -> Option<Vec<String>> {
        let arr = self.get(key)?.as_array()?;
        arr.iter().map(|v| v.as_str().map(str::to_owned)).collect()
    }

    pub fn f32_array(&self, key: &str) -> Option<Vec<f32>> {
        let arr = self.get(key)?.as_array()?;
        arr.iter().map(|v| v.as_f64().map(|x| x as f32)).collect()
    }

    pub fn i64_array(&self, key: &str) -> Option<Vec<i64>> {
        let arr = self.get(key)?.as_array()?;
        arr.iter()
            .map(|v| match *v {
                GgufValue::I32(x) => Some(x.into()),
                GgufValue::I64(x) => Some(x),
                _ => v.as_u64().map(|x| x as i64),
            })
            .collect()
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    path: &'a Path,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], LoadError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| {
                LoadError::format(
                    self.path,
                    format!(
                        "header is truncated at byte {} (wanted {n} more bytes)",
                        self.pos
                    ),
                )
            })?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], LoadError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u32(&mut self) -> Result<u32, LoadError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, LoadError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn string(&mut self) -> Result<String, LoadError> {
        let n = self.u64()? as usize;
        let bytes = self.take(n)?;
        // Some converters wrote token strings that are not valid UTF-8; keep them lossy rather
        // than refusing the file.
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }

    fn value(&mut self, ty: u32) -> Result<GgufValue, LoadError> {
        Ok(match ty {
            0 => GgufValue::U8(self.array::<1>()?[0]),
            1 => GgufValue::I8(self.array::<1>()?[0] as i8),
            2 => GgufValue::U16(u16::from_le_bytes(self.array()?)),
            3 => GgufValue::I16(i16::from_le_bytes(self.array()?)),
            4 => GgufValue::U32(self.u32()?),
            5 => GgufValue::I32(i32::from_le_bytes(self.array()?)),
            6 => GgufValue::F32(f32::from_le_bytes(self.array()?)),
            7 => GgufValue::Bool(self.array::<1>()?[0] != 0),
            8 => GgufValue::String(self.string()?),
            9 => {
                let elem_ty = self.u32()?;
                let n = self.u64()? as usize;
                if n > self.buf.len() {
                    return Err(LoadError::format(
                        self.path,
                        format!("array of {n} elements"),
                    ));
                }
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(self.value(elem_ty)?);
                }
                GgufValue::Array(v)
            }
            10 => GgufValue::U64(self.u64()?),
            11 => GgufValue::I64(i64::from_le_bytes(self.array()?)),
            12 => GgufValue::F64(f64::from_le_bytes(self.array()?)),
            other => {
                return Err(LoadError::format(
                    self.path,
                    format!("unknown value type {other}"),
                ))
            }
        })
    }
}
