//! Weights as the loaders hand them over: a row-major shape and the bytes in their storage format.
//! A backend `upload`s a `HostWeight` into whatever layout its kernels want.

use crate::GgmlType;

/// Storage format of a weight on the host.
#[derive(Debug, Clone)]
pub enum WeightData {
    /// Dense f32 values (dense f16/bf16 checkpoints are widened by the loader for the CPU).
    F32(Vec<f32>),
    /// GGML blocks, rows contiguous: each row is `cols / block_elems` blocks.
    Ggml { ty: GgmlType, bytes: Vec<u8> },
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
        }
    }
}
