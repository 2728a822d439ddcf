//! Weights as the loaders hand them over: a row-major shape and the bytes in their storage format.
//! A backend `upload`s a `HostWeight` into whatever layout its kernels want.

use std::ops::{Deref, Range};
use std::sync::Arc;

use crate::GgmlType;

/// A weight's bytes: owned, or a range of a memory-mapped checkpoint file, read in place (a
/// loader hands out views of its mapping instead of copying every tensor first).
#[derive(Clone)]
pub enum HostBytes {
    Owned(Vec<u8>),
    Mapped {
        map: Arc<dyn AsRef<[u8]> + Send + Sync>,
        range: Range<usize>,
    },
}

impl Deref for HostBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            HostBytes::Owned(v) => v,
            HostBytes::Mapped { map, range } => &(**map).as_ref()[range.clone()],
        }
    }
}

impl From<Vec<u8>> for HostBytes {
    fn from(v: Vec<u8>) -> Self {
        HostBytes::Owned(v)
    }
}

impl std::fmt::Debug for HostBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostBytes::Owned(v) => write!(f, "{} owned bytes", v.len()),
            HostBytes::Mapped { range, .. } => write!(f, "{} mapped bytes", range.len()),
        }
    }
}

/// Storage format of a weight on the host.
#[derive(Debug, Clone)]
pub enum WeightData {
    /// Dense f32 values (dense f16/bf16 checkpoints are widened by the loader for the CPU).
    F32(Vec<f32>),
    /// GGML blocks, rows contiguous: each row is `cols / block_elems` blocks.
    Ggml { ty: GgmlType, bytes: HostBytes },
    /// FP8 e4m3 values, row-major, and one f32 scale a row (`quant::fp8`).
    Fp8 { bytes: Vec<u8>, scales: Vec<f32> },
}

/// A weight in row-major order: `shape[0]` rows (output features) of `shape[1]` columns.
/// 1-D weights (norms, biases) have a single dimension.
#[derive(Debug, Clone)]
pub struct HostWeight {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: WeightData,
}

impl HostWeight {
    pub fn f32(name: impl Into<String>, shape: Vec<usize>, values: Vec<f32>) -> Self {
        HostWeight {
            name: name.into(),
            shape,
            data: WeightData::F32(values),
        }
    }

    pub fn rows(&self) -> usize {
        if self.shape.len() == 1 {
            1
        } else {
            self.shape[0]
        }
    }

    pub fn cols(&self) -> usize {
        *self.shape.last().unwrap_or(&0)
    }

    pub fn format_name(&self) -> &'static str {
        match &self.data {
            WeightData::F32(_) => "F32",
            WeightData::Ggml { ty, .. } => ty.name(),
            WeightData::Fp8 { .. } => "FP8_E4M3",
        }
    }

    /// This matrix as fp8 e4m3 with a scale a row (`quant::fp8`); anything else is unchanged.
    pub fn to_fp8(self) -> HostWeight {
        if self.shape.len() != 2 || matches!(self.data, WeightData::Fp8 { .. }) {
            return self;
        }
        let (rows, cols) = (self.rows(), self.cols());
        let (bytes, scales) =
            crate::quant::fp8::quantize_rows(rows, cols, |r, out| match &self.data {
                WeightData::F32(v) => out.copy_from_slice(&v[r * cols..(r + 1) * cols]),
                WeightData::Ggml { ty, bytes } => {
                    let rb = ty.bytes_for(cols);
                    crate::quant::dequantize_row(*ty, &bytes[r * rb..(r + 1) * rb], out)
                }
                WeightData::Fp8 { .. } => unreachable!("returned above"),
            });
        HostWeight {
            name: self.name,
            shape: self.shape,
            data: WeightData::Fp8 { bytes, scales },
        }
    }
}
