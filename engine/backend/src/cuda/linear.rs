//! The linear ops: GEMV kernels up to GEMV_MAX_ROWS rows, cuBLASLt past them, with the fused
//! Q/K/V and gate/up forms (one read of weights stored back to back).

use super::buffers::CudaBuf;
use super::gemm::Out;
use super::kernels::GEMV_MAX_ROWS;
use super::weights::{contiguous, CudaWeight};
use super::CudaBackend;

/// Up to this many rows, Q, K and V come from one GEMM over their stored-together weights (read
/// once) and a split; past it (long prefill chunks, where even the narrow K and V GEMMs fill the
/// GPU) three GEMMs write them directly, which spares the split pass over the fused output.
const FUSED_QKV_MAX_ROWS: usize = 2048;

impl CudaBackend {
    /// `Backend::linear`.
    pub(super) fn linear_op(
        &self,
        x: &CudaBuf,
        prefill: &[bool],
        w: &CudaWeight,
        bias: Option<&CudaWeight>,
        out: &mut CudaBuf,
    ) {
        self.linear_into(x, prefill, w, bias, out, false);
    }

    /// `Backend::linear_residual`.
    pub(super) fn linear_residual_op(
        &self,
        x: &CudaBuf,
        prefill: &[bool],
        w: &CudaWeight,
        residual: &mut CudaBuf,
    ) {
        self.linear_into(x, prefill, w, None, residual, true);
    }

    /// out = x . w^T (+ bias), or out += x . w^T with `add` (out then holds every row already,
    /// in f32; no bias).
    fn linear_into(
        &self,
        x: &CudaBuf,
        prefill: &[bool],
        w: &CudaWeight,
        bias: Option<&CudaWeight>,
        out: &mut CudaBuf,
        add: bool,
    ) {
        let t0 = self.prof_begin();
        let CudaWeight::Matrix {
            ptr,
            rows: n,
            cols: k,
            ..
        } = *w
        else {
            panic!("linear weight must be a matrix");
        };
        let m = prefill.len();
        debug_assert_eq!(x.len, m * k);
        let y = if add {
            assert!(bias.is_none(), "a residual matmul has no bias");
            assert_eq!(out.len, m * n, "the residual holds every row");
            out.f32("linear_residual")
        } else {
            self.ensure(out, m * n);
            out.ptr
        };
        let bias_ptr = bias.map_or(0, |b| b.ptr());
        let r = if m <= GEMV_MAX_ROWS {
            let xp = x.f32("linear (gemv)");
            self.kernels.gemv(ptr, xp, bias_ptr, y, (m, n, k), add)
        } else {
            let mode = if add { Out::AddF32 } else { Out::F32 };
            self.gemm_as(ptr, x, y, (m, n, k), mode)
                .and_then(|_| match bias {
                    Some(b) => self.kernels.add_bias(out.ptr, b.ptr(), n, m * n),
                    None => Ok(()),
                })
        };
        let op = match (m <= GEMV_MAX_ROWS, prefill.iter().any(|p| *p)) {
            (true, _) => "linear (gemv)",
            (false, true) => "linear (cuBLASLt, prefill)",
            (false, false) => "linear (cuBLASLt, decode)",
        };
        self.finish(op, t0, r);
    }

    /// `Backend::linear_qkv`.
    pub(super) fn linear_qkv_op(
        &self,
        x: &CudaBuf,
        prefill: &[bool],
        ws: [&CudaWeight; 3],
        biases: Option<[&CudaWeight; 3]>,
        outs: [&mut CudaBuf; 3],
    ) {
        let m = prefill.len();
        let shapes = ws.map(|w| match w {
            CudaWeight::Matrix {
                ptr, rows, cols, ..
            } => (*ptr, *rows, *cols),
            CudaWeight::Vector { .. } => panic!("linear weight must be a matrix"),
        });
        let k = shapes[0].2;
        let same_k = shapes.iter().all(|s| s.2 == k);
        let fused = m > GEMV_MAX_ROWS && m <= FUSED_QKV_MAX_ROWS;
        if let (true, Some((w, n, _))) = (fused, contiguous(&ws)) {
            // One GEMM over the three matrices stored back to back, then split.
            let t0 = self.prof_begin();
            let fused = self.fused_buf(m * n);
            let mut dst = [(0u64, 0u64, 0usize); 3];
            for (i, out) in outs.into_iter().enumerate() {
                self.ensure(out, m * shapes[i].1);
                dst[i] = (out.ptr, biases.map_or(0, |b| b[i].ptr()), shapes[i].1);
            }
            let r = fused
                .and_then(|f| self.gemm(w, x, f, (m, n, k)))
                .and_then(|f| self.kernels.split_qkv(f, dst, m));
            return self.finish("linear qkv (cuBLASLt, fused)", t0, r);
        }
        if m > GEMV_MAX_ROWS || !same_k {
            for (i, out) in outs.into_iter().enumerate() {
                self.linear_op(x, prefill, ws[i], biases.map(|b| b[i]), out);
            }
            return;
        }
        let t0 = self.prof_begin();
        let [q, kk, v] = outs;
        let mut mats = [(0u64, 0u64, 0u64, 0usize); 3];
        for (i, out) in [q, kk, v].into_iter().enumerate() {
            let (w, n, _) = shapes[i];
            self.ensure(out, m * n);
            let bias = biases.map_or(0, |b| b[i].ptr());
            mats[i] = (w, bias, out.ptr, n);
        }
        let r = self.kernels.gemv3(x.f32("linear_qkv (gemv)"), mats, (m, k));
        self.finish("linear qkv (gemv)", t0, r);
    }

    /// `Backend::linear_pair`: up to GEMV_MAX_ROWS rows, one gemv3 launch with two matrices.
    pub(super) fn linear_pair_op(
        &self,
        x: &CudaBuf,
        prefill: &[bool],
        ws: [&CudaWeight; 2],
        outs: [&mut CudaBuf; 2],
    ) {
        let m = prefill.len();
        let shapes = ws.map(|w| w.matrix().expect("linear weight must be a matrix"));
        if m == 0 || m > GEMV_MAX_ROWS || shapes[0].2 != shapes[1].2 {
            for (w, out) in ws.into_iter().zip(outs) {
                self.linear_op(x, prefill, w, None, out);
            }
            return;
        }
        let t0 = self.prof_begin();
        let mut mats = [(0u64, 0u64, 0u64, 0usize); 3];
        for (i, out) in outs.into_iter().enumerate() {
            let (w, n, _) = shapes[i];
            self.ensure(out, m * n);
            mats[i] = (w, 0, out.ptr, n);
        }
        let r = self
            .kernels
            .gemv3(x.f32("linear_pair (gemv)"), mats, (m, shapes[0].2));
        self.finish("linear pair (gemv)", t0, r);
    }

    /// `Backend::linear_swiglu`.
    pub(super) fn linear_swiglu_op(
        &self,
        x: &CudaBuf,
        prefill: &[bool],
        gate: &CudaWeight,
        up: &CudaWeight,
        out: &mut CudaBuf,
    ) {
        let m = prefill.len();
        let (
            CudaWeight::Matrix {
                ptr: g,
                rows: n,
                cols: k,
                ..
            },
            CudaWeight::Matrix { ptr: u, .. },
        ) = (gate, up)
        else {
            panic!("linear weight must be a matrix");
        };
        if let (true, Some((w, n2, _))) = (m > GEMV_MAX_ROWS, contiguous(&[gate, up])) {
            // One GEMM over gate and up stored back to back.
            let t0 = self.prof_begin();
            self.ensure_as(out, m * n, true);
            let r = self
                .fused_buf(m * n2)
                .and_then(|f| self.gemm_as(w, x, f, (m, n2, *k), Out::Bf16))
                .and_then(|f| {
                    self.kernels
                        .silu_mul_pair((f, out.ptr), (m, *n), (true, true))
                });
            return self.finish("linear swiglu (cuBLASLt, fused)", t0, r);
        }
        if m > GEMV_MAX_ROWS {
            // Gate and up stored apart: two GEMMs into the halves of the fused scratch.
            let t0 = self.prof_begin();
            self.ensure_as(out, m * n, true);
            let half = (m * n * 4) as u64;
            let r = self.fused_buf(2 * m * n).and_then(|f| {
                self.gemm(*g, x, f, (m, *n, *k))?;
                self.gemm(*u, x, f + half, (m, *n, *k))?;
                self.kernels.silu_mul((f, f + half, out.ptr), m * n, true)
            });
            return self.finish("linear swiglu (cuBLASLt)", t0, r);
        }
        let t0 = self.prof_begin();
        self.ensure(out, m * n);
        let r = self.kernels.gemv_swiglu(
            (*g, *u),
            x.f32("linear_swiglu (gemv)"),
            out.ptr,
            (m, *n, *k),
        );
        self.finish("linear swiglu (gemv)", t0, r);
    }
}
