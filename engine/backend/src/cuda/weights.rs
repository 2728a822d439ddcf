//! Weights on the device: matrices in bf16 (bf16 checkpoints copied as they are, other formats
//! converted on the host first), norms and biases in f32. Matrices uploaded as a group (a
//! layer's Q, K and V; gate and up) share one allocation, back to back, so that `contiguous`
//! lets a matmul read them as one matrix.

use std::sync::Arc;

use cudarc::driver::CudaSlice;
use half::{bf16, f16};

use super::{upload, CudaBackend};
use crate::{BackendError, GgmlType, HostWeight, WeightData};

/// A weight on the device: matrices in bf16, vectors (norms, biases) in f32.
pub enum CudaWeight {
    Matrix {
        /// The allocation holding the bf16 values (row-major) at `ptr`: the matrix's own, or
        /// one shared with the rest of its `upload_group`, back to back.
        _data: Arc<CudaSlice<u8>>,
        ptr: u64,
        rows: usize,
        cols: usize,
    },
    Vector {
        data: CudaSlice<f32>,
        ptr: u64,
    },
}

impl CudaWeight {
    pub(super) fn ptr(&self) -> u64 {
        match self {
            CudaWeight::Matrix { ptr, .. } | CudaWeight::Vector { ptr, .. } => *ptr,
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            CudaWeight::Matrix { rows, cols, .. } => rows * cols,
            CudaWeight::Vector { data, .. } => data.len(),
        }
    }

    /// (address, rows, cols) of a matrix.
    pub(super) fn matrix(&self) -> Option<(u64, usize, usize)> {
        match *self {
            CudaWeight::Matrix {
                ptr, rows, cols, ..
            } => Some((ptr, rows, cols)),
            CudaWeight::Vector { .. } => None,
        }
    }
}

/// Whether `ws` are matrices of one width stored back to back (an `upload_group`): then they
/// are one matrix of their summed heights at the first one's address.
pub(super) fn contiguous(ws: &[&CudaWeight]) -> Option<(u64, usize, usize)> {
    let (ptr, mut rows, cols) = ws.first()?.matrix()?;
    for w in &ws[1..] {
        let (p, r, c) = w.matrix()?;
        if c != cols || p != ptr + (rows * cols * 2) as u64 {
            return None;
        }
        rows += r;
    }
    Some((ptr, rows, cols))
}

impl CudaBackend {
    /// A matrix's values as bf16 bytes: borrowed from a bf16 checkpoint, converted otherwise.
    fn bf16_bytes(w: &HostWeight) -> Result<std::borrow::Cow<'_, [u8]>, BackendError> {
        let (rows, cols) = (w.rows(), w.cols());
        let bf = |x: f32| bf16::from_f32(x).to_le_bytes();
        let bytes: std::borrow::Cow<'_, [u8]> = match &w.data {
            WeightData::Ggml {
                ty: GgmlType::BF16,
                bytes,
            } => std::borrow::Cow::Borrowed(&bytes[..]),
            WeightData::F32(v) => v.iter().flat_map(|x| bf(*x)).collect(),
            WeightData::Ggml {
                ty: GgmlType::F16,
                bytes,
            } => bytes
                .chunks_exact(2)
                .flat_map(|b| bf(f16::from_le_bytes([b[0], b[1]]).to_f32()))
                .collect(),
            WeightData::Ggml { ty, bytes } => {
                let mut row = vec![0f32; cols];
                let row_bytes = ty.bytes_for(cols);
                let mut out = Vec::with_capacity(rows * cols * 2);
                for r in bytes.chunks_exact(row_bytes) {
                    crate::quant::dequantize_row(*ty, r, &mut row);
                    out.extend(row.iter().flat_map(|x| bf(*x)));
                }
                out.into()
            }
        };
        if bytes.len() != rows * cols * 2 {
            return Err(BackendError::Weight {
                name: w.name.clone(),
                message: format!("{} values for shape {:?}", bytes.len() / 2, w.shape),
            });
        }
        Ok(bytes)
    }

    /// Matrices uploaded back to back into one allocation (bf16 checkpoints are read in place
    /// from their mmap; everything else is converted first).
    pub(super) fn upload_matrices(
        &self,
        ws: &[HostWeight],
    ) -> Result<Vec<CudaWeight>, BackendError> {
        let total: usize = ws.iter().map(|w| w.rows() * w.cols() * 2).sum();
        // SAFETY: every byte is written by the copies below before anything reads it.
        let data = Arc::new(unsafe { self.stream.alloc::<u8>(total) }?);
        let base = self.dptr(&data);
        let mut at = 0;
        let mut out = Vec::with_capacity(ws.len());
        for w in ws {
            let bytes = Self::bf16_bytes(w)?;
            let ptr = base + at as u64;
            self.copy_to_device(ptr, &bytes)?;
            at += bytes.len();
            out.push(CudaWeight::Matrix {
                _data: data.clone(),
                ptr,
                rows: w.rows(),
                cols: w.cols(),
            });
        }
        Ok(out)
    }

    /// Copies `bytes` to device address `dst` through the pinned staging buffers.
    fn copy_to_device(&self, dst: u64, bytes: &[u8]) -> Result<(), BackendError> {
        let mut st = self.state();
        if st.uploader.is_none() {
            st.uploader = Some(upload::Uploader::new(&self.ctx)?);
        }
        let up = st.uploader.as_mut().expect("the uploader was just made");
        up.copy(&self.stream, dst, bytes)
    }

    pub(super) fn upload_vector(&self, w: &HostWeight) -> Result<CudaWeight, BackendError> {
        let n = w.cols();
        let v = match &w.data {
            WeightData::F32(v) => v.clone(),
            WeightData::Ggml { ty, bytes } => {
                let mut v = vec![0f32; n];
                crate::quant::dequantize_row(*ty, bytes, &mut v);
                v
            }
        };
        let data = self.stream.clone_htod(&v)?;
        let ptr = self.dptr(&data);
        Ok(CudaWeight::Vector { data, ptr })
    }
}
