//! Weights on the device: matrices in bf16 (bf16 checkpoints copied as they are, other formats
//! converted on the host first) or fp8 e4m3 with an f32 scale a row (`quant::fp8`), norms and
//! biases in f32. Matrices uploaded as a group (a layer's Q, K and V; gate and up) share one
//! allocation, back to back (an fp8 group's scales after its values, back to back too), so that
//! `contiguous` lets a matmul read them as one matrix.

use std::sync::Arc;

use cudarc::driver::CudaSlice;
use half::{bf16, f16};

use super::kernels::FP8_GEMM_MAX_ROWS;
use super::{upload, CudaBackend};
use crate::{BackendError, GgmlType, HostWeight, WeightData};

/// A weight on the device: matrices in bf16 or fp8, vectors (norms, biases) in f32.
pub enum CudaWeight {
    Matrix {
        /// The allocation holding the values (row-major) at `ptr`: the matrix's own, or one
        /// shared with the rest of its `upload_group`, back to back.
        _data: Arc<CudaSlice<u8>>,
        ptr: u64,
        rows: usize,
        cols: usize,
        /// fp8 e4m3 values with one f32 scale a row at this address; bf16 values when `None`.
        fp8_scales: Option<u64>,
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

    /// The row scales of an fp8 matrix (0 for a bf16 one, as the GEMV kernels take it).
    pub(super) fn scales(&self) -> u64 {
        match *self {
            CudaWeight::Matrix { fp8_scales, .. } => fp8_scales.unwrap_or(0),
            CudaWeight::Vector { .. } => 0,
        }
    }
}

/// Whether `ws` are matrices of one width and format stored back to back (an `upload_group`):
/// then they are one matrix of their summed heights at the first one's address (an fp8 group's
/// scales, back to back too, at the first one's `scales`).
pub(super) fn contiguous(ws: &[&CudaWeight]) -> Option<(u64, usize, usize)> {
    let (ptr, mut rows, cols) = ws.first()?.matrix()?;
    let scales = ws[0].scales();
    let elem = if scales == 0 { 2 } else { 1 };
    for w in &ws[1..] {
        let (p, r, c) = w.matrix()?;
        let s = w.scales();
        let scales_follow = (s == 0) == (scales == 0) && (s == 0 || s == scales + rows as u64 * 4);
        if c != cols || p != ptr + (rows * cols * elem) as u64 || !scales_follow {
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
            WeightData::Fp8 { bytes, scales } => {
                crate::quant::fp8::dequantize_rows(bytes, scales, cols)
                    .into_iter()
                    .flat_map(bf)
                    .collect()
            }
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
    /// from their mmap; everything else is converted first). fp8 matrices (all of the group or
    /// none) keep their bytes, with their scales after them.
    pub(super) fn upload_matrices(
        &self,
        ws: &[HostWeight],
    ) -> Result<Vec<CudaWeight>, BackendError> {
        let fp8 = ws
            .iter()
            .filter(|w| matches!(w.data, WeightData::Fp8 { .. }))
            .count();
        if fp8 > 0 {
            if fp8 < ws.len() {
                return Err(BackendError::Weight {
                    name: ws[0].name.clone(),
                    message: "an upload group mixes fp8 and other matrices".into(),
                });
            }
            return self.upload_fp8(ws);
        }
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
                fp8_scales: None,
            });
        }
        Ok(out)
    }

    /// fp8 matrices back to back, then their scales back to back. The dequantization buffer
    /// the GEMM path reads (`dequant_buf`) grows here to the group's size in bf16 where a
    /// matrix of it needs one, so the memory plan, made after the weights, counts it.
    fn upload_fp8(&self, ws: &[HostWeight]) -> Result<Vec<CudaWeight>, BackendError> {
        let values: usize = ws.iter().map(|w| w.rows() * w.cols()).sum();
        let rows: usize = ws.iter().map(|w| w.rows()).sum();
        let scales_at = values.next_multiple_of(256);
        // SAFETY: every byte read is written by the copies below first (the padding between
        // the values and the scales is never read).
        let data = Arc::new(unsafe { self.stream.alloc::<u8>(scales_at + rows * 4) }?);
        let base = self.dptr(&data);
        let (mut at, mut row) = (0, 0);
        let mut out = Vec::with_capacity(ws.len());
        for w in ws {
            let WeightData::Fp8 { bytes, scales } = &w.data else {
                unreachable!("checked by upload_matrices");
            };
            let (r, c) = (w.rows(), w.cols());
            if !c.is_multiple_of(8) || bytes.len() != r * c || scales.len() != r {
                return Err(BackendError::Weight {
                    name: w.name.clone(),
                    message: format!(
                        "{} fp8 values and {} scales for shape {:?} (fp8 matrices need a \
                         multiple of 8 columns)",
                        bytes.len(),
                        scales.len(),
                        w.shape
                    ),
                });
            }
            let (ptr, sp) = (base + at as u64, base + (scales_at + row * 4) as u64);
            self.copy_to_device(ptr, bytes)?;
            let sb: Vec<u8> = scales.iter().flat_map(|s| s.to_le_bytes()).collect();
            self.copy_to_device(sp, &sb)?;
            at += r * c;
            row += r;
            out.push(CudaWeight::Matrix {
                _data: data.clone(),
                ptr,
                rows: r,
                cols: c,
                fp8_scales: Some(sp),
            });
        }
        // Each matrix alone and the group as one (fused Q/K/V or gate/up: stored back to back).
        let k = ws[0].cols();
        let shapes: Vec<_> = out
            .iter()
            .filter_map(|w| w.matrix().map(|(_, n, k)| (n, k, w.scales())))
            .chain(
                ws.iter()
                    .all(|w| w.cols() == k)
                    .then_some((rows, k, base + scales_at as u64)),
            )
            .collect();
        // Dequantized only where W8A8 or gemm_fp8 does not take a matrix (weight_gemm).
        if shapes.iter().any(|&(n, k, scales)| {
            !(self.w8a8_takes(n, k, scales) && self.kernels.fp8_gemm_fits(FP8_GEMM_MAX_ROWS, k))
        }) {
            self.dequant_buf(values)?;
        }
        // gemm_fp8's partial sums.
        let parts = shapes
            .iter()
            .map(|&(n, k, _)| self.kernels.fp8_gemm_parts_bytes(n, k))
            .max()
            .unwrap_or(0);
        if parts > 0 {
            self.fp8_parts(parts)?;
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
            WeightData::Fp8 { bytes, scales } => {
                crate::quant::fp8::dequantize_rows(bytes, scales, n)
            }
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

impl CudaBackend {
    /// Which kernels a weight's matmuls take, for the startup log's kernel path lines.
    pub(super) fn weight_path(&self, w: &CudaWeight) -> String {
        match w {
            CudaWeight::Matrix {
                fp8_scales: Some(_),
                ..
            } => format!(
                "fp8 e4m3, a scale a row: gemv kernel (<= {} rows), {} (<= {} rows), {} \
                 (more rows)",
                self.gemv_rows,
                self.kernels.fp8_gemm_kernel(),
                if self.w8a8.is_some() {
                    self.w8a8_after
                } else {
                    FP8_GEMM_MAX_ROWS
                },
                self.w8a8_path
            ),
            CudaWeight::Matrix { .. } => format!(
                "bf16: {}gemv kernel (<= {} rows), cuBLASLt bf16 x bf16 -> f32 (more rows)",
                if self.kernels.ring_launches().is_some() {
                    "weight ring (1-row decode graph, HEARTH_RING_DECODE=1), "
                } else {
                    ""
                },
                self.gemv_rows
            ),
            CudaWeight::Vector { .. } => "f32 vector".into(),
        }
    }
}
