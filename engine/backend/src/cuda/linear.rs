//! The linear ops: GEMV kernels up to `gemv_rows` rows, matmuls past them (`weight_gemm`),
//! with the fused Q/K/V and gate/up forms (one read of weights stored back to back), and those
//! two GEMVs taking the RMS norm before them (folded into one-row launches, through
//! gemv_norm_stats for more). bf16 matmuls are cuBLASLt's; fp8 matrices take the fp8 GEMVs,
//! then past W8A8_AFTER_ROWS W8A8 on cuBLASLt where it has fp8 matmuls (the scales applied by
//! cuBLASLt or by a pass after it), else gemm_fp8 up to FP8_GEMM_MAX_ROWS rows (on Hopper
//! gate/up with the SwiGLU in the matmul's epilogue) and past that dequantized to bf16 for
//! cuBLASLt.

use super::buffers::CudaBuf;
use super::gemm::Out;
use super::kernels::GemvNorm;
use super::weights::{contiguous, CudaWeight};
use super::CudaBackend;
use crate::Backend;

/// Up to this many rows, Q, K and V come from one GEMM over their stored-together weights (read
/// once) and a split; past it (long prefill chunks, where even the narrow K and V GEMMs fill the
/// GPU) three GEMMs write them directly, which spares the split pass over the fused output.
const FUSED_QKV_MAX_ROWS: usize = 2048;

impl CudaBackend {
    /// Whether a matmul over `rows` rows runs on the GEMV kernels (each row's products on the
    /// CUDA cores, a row's bits the same at every row count they take) rather than a matmul.
    pub(super) fn gemv_takes(&self, rows: usize) -> bool {
        rows <= self.gemv_rows
    }

    /// Whether an op over `rows` rows whose output only feeds matmuls writes it in bf16 (the
    /// matmuls' input type; the GEMV kernels read f32).
    pub(super) fn matmul_input_bf16(&self, rows: usize) -> bool {
        !self.gemv_takes(rows)
    }

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
        let scales = w.scales();
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
        let r = if self.gemv_takes(m) {
            let xp = x.f32("linear (gemv)");
            self.kernels
                .gemv((ptr, scales), xp, bias_ptr, y, (m, n, k), add)
        } else {
            let mode = if add { Out::AddF32 } else { Out::F32 };
            self.weight_gemm((ptr, scales), x, y, (m, n, k), mode)
                .and_then(|_| match bias {
                    Some(b) => self.kernels.add_bias(out.ptr, b.ptr(), n, m * n),
                    None => Ok(()),
                })
        };
        let op = match (self.gemv_takes(m), prefill.iter().any(|p| *p)) {
            (true, _) => "linear (gemv)",
            (false, true) => "linear (matmul, prefill)",
            (false, false) => "linear (matmul, decode)",
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
        let fused = !self.gemv_takes(m) && m <= FUSED_QKV_MAX_ROWS;
        if let (true, Some((w, n, _))) = (fused, contiguous(&ws)) {
            // One GEMM over the three matrices stored back to back, then split.
            let t0 = self.prof_begin();
            let mut dst = [(0u64, 0u64, 0usize); 3];
            for (i, out) in outs.into_iter().enumerate() {
                self.ensure(out, m * shapes[i].1);
                dst[i] = (out.ptr, biases.map_or(0, |b| b[i].ptr()), shapes[i].1);
            }
            let scales = ws[0].scales();
            if biases.is_none()
                && scales != 0
                && self.kernels.fp8_epilogue_fits(m, k)
                && !self.w8a8_runs(m, n, k, scales)
            {
                // fp8 on Hopper: the matmul writes q, k and v itself.
                let r = self.bf16_copy(x, m * k).and_then(|xs| {
                    let outs = dst.map(|(ptr, _, cols)| (ptr, cols));
                    self.kernels.gemm_fp8_qkv((w, scales, xs), outs, (m, k))
                });
                return self.finish("linear qkv (matmul, fused)", t0, r);
            }
            let fused = self.fused_buf(m * n);
            let r = fused
                .and_then(|f| self.weight_gemm((w, ws[0].scales()), x, f, (m, n, k), Out::F32))
                .and_then(|f| self.kernels.split_qkv(f, dst, m));
            return self.finish("linear qkv (matmul, fused)", t0, r);
        }
        if !self.gemv_takes(m) || !same_k {
            for (i, out) in outs.into_iter().enumerate() {
                self.linear_op(x, prefill, ws[i], biases.map(|b| b[i]), out);
            }
            return;
        }
        self.qkv_gemv(x, m, ws, biases, outs, GemvNorm::None);
    }

    /// `Backend::norm_linear_qkv`: where the rows take the GEMV, the norm goes with it
    /// (`gemv_norm`), else the norm kernel and `linear_qkv`.
    pub(super) fn norm_linear_qkv_op(
        &self,
        norm: (&CudaBuf, &CudaWeight, f32),
        h: &mut CudaBuf,
        prefill: &[bool],
        ws: [&CudaWeight; 3],
        biases: Option<[&CudaWeight; 3]>,
        outs: [&mut CudaBuf; 3],
    ) {
        let m = prefill.len();
        let k = norm.1.len();
        let same_k = ws.iter().all(|w| w.matrix().is_some_and(|s| s.2 == k));
        if m >= 1 && self.gemv_takes(m) && same_k && self.kernels.folds_norm(k) {
            let (x, g) = self.gemv_norm(norm, h, m);
            return self.qkv_gemv(x, m, ws, biases, outs, g);
        }
        self.rms_norm(norm.0, norm.1, norm.2, h);
        self.linear_qkv_op(h, prefill, ws, biases, outs);
    }

    /// The RMS norm of x before a Q/K/V or SwiGLU GEMV of m rows (`Kernels::folds_norm`): one
    /// row folds it in; more take gemv_norm_stats' x * w, in `h`, and each row's inverse RMS.
    /// Returns what the GEMV reads and its `GemvNorm`.
    fn gemv_norm<'a>(
        &self,
        (x, w, eps): (&'a CudaBuf, &CudaWeight, f32),
        h: &'a mut CudaBuf,
        m: usize,
    ) -> (&'a CudaBuf, GemvNorm) {
        if m == 1 {
            let weight = w.ptr();
            return (x, GemvNorm::Fold { weight, eps });
        }
        let t0 = self.prof_begin();
        self.ensure(h, m * w.len());
        let ptrs = (x.f32("rms_norm (gemv stats)"), w.ptr(), h.ptr);
        let r = self.kernels.gemv_norm_stats(ptrs, (m, w.len()), eps);
        let g = r.as_ref().map_or(GemvNorm::None, |g| *g);
        self.finish("rms_norm (gemv stats)", t0, r.map(|_| ()));
        (h, g)
    }

    /// Q, K and V (all of x's width) for the GEMVs' m rows in one gemv3 launch.
    fn qkv_gemv(
        &self,
        x: &CudaBuf,
        m: usize,
        ws: [&CudaWeight; 3],
        biases: Option<[&CudaWeight; 3]>,
        outs: [&mut CudaBuf; 3],
        norm: GemvNorm,
    ) {
        let t0 = self.prof_begin();
        let mut mats = [(0u64, 0u64, 0u64, 0usize); 3];
        let mut k = 0;
        for (i, out) in outs.into_iter().enumerate() {
            let (w, n, cols) = ws[i].matrix().expect("linear weight must be a matrix");
            self.ensure(out, m * n);
            let bias = biases.map_or(0, |b| b[i].ptr());
            mats[i] = (w, bias, out.ptr, n);
            k = cols;
        }
        let scales = ws.map(|w| w.scales());
        let r = self
            .kernels
            .gemv3(x.f32("linear_qkv (gemv)"), mats, scales, (m, k), norm);
        let op = match norm {
            GemvNorm::Fold { .. } => "rms_norm + linear qkv (gemv)",
            _ => "linear qkv (gemv)",
        };
        self.finish(op, t0, r);
    }

    /// `Backend::linear_pair`: the GEMVs' rows, one gemv3 launch with two matrices.
    pub(super) fn linear_pair_op(
        &self,
        x: &CudaBuf,
        prefill: &[bool],
        ws: [&CudaWeight; 2],
        outs: [&mut CudaBuf; 2],
    ) {
        let m = prefill.len();
        let shapes = ws.map(|w| w.matrix().expect("linear weight must be a matrix"));
        if m == 0 || !self.gemv_takes(m) || shapes[0].2 != shapes[1].2 {
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
        let r = self.kernels.gemv3(
            x.f32("linear_pair (gemv)"),
            mats,
            [ws[0].scales(), ws[1].scales(), 0],
            (m, shapes[0].2),
            GemvNorm::None,
        );
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
        if let (true, Some((w, n2, _))) = (!self.gemv_takes(m), contiguous(&[gate, up])) {
            // One GEMM over gate and up stored back to back.
            let t0 = self.prof_begin();
            self.ensure_as(out, m * n, true);
            if gate.scales() != 0
                && self.kernels.fp8_epilogue_fits(m, *k)
                && !self.w8a8_runs(m, n2, *k, gate.scales())
            {
                debug_assert_eq!(n2, 2 * *n, "gate and up of one width");
                // fp8 on Hopper: the SwiGLU in the matmul's epilogue.
                let r = self.bf16_copy(x, m * k).and_then(|xs| {
                    let bufs = (w, gate.scales(), xs, out.ptr);
                    self.kernels.gemm_fp8_swiglu(bufs, (m, *n, *k))
                });
                return self.finish("linear swiglu (matmul, fused)", t0, r);
            }
            let r = self
                .fused_buf(m * n2)
                .and_then(|f| self.weight_gemm((w, gate.scales()), x, f, (m, n2, *k), Out::Bf16))
                .and_then(|f| {
                    self.kernels
                        .silu_mul_pair((f, out.ptr), (m, *n), (true, true))
                });
            return self.finish("linear swiglu (matmul, fused)", t0, r);
        }
        if !self.gemv_takes(m) {
            // Gate and up stored apart: two GEMMs into the halves of the fused scratch.
            let t0 = self.prof_begin();
            self.ensure_as(out, m * n, true);
            let half = (m * n * 4) as u64;
            let r = self.fused_buf(2 * m * n).and_then(|f| {
                self.weight_gemm((*g, gate.scales()), x, f, (m, *n, *k), Out::F32)?;
                let dims = (m, *n, *k);
                self.weight_gemm((*u, up.scales()), x, f + half, dims, Out::F32)?;
                self.kernels.silu_mul((f, f + half, out.ptr), m * n, true)
            });
            return self.finish("linear swiglu (matmul)", t0, r);
        }
        self.swiglu_gemv(x, m, (gate, up), out, GemvNorm::None);
    }

    /// `Backend::norm_linear_swiglu`: as `norm_linear_qkv_op`.
    pub(super) fn norm_linear_swiglu_op(
        &self,
        norm: (&CudaBuf, &CudaWeight, f32),
        h: &mut CudaBuf,
        prefill: &[bool],
        (gate, up): (&CudaWeight, &CudaWeight),
        out: &mut CudaBuf,
    ) {
        let m = prefill.len();
        let k = norm.1.len();
        let same_k = [gate, up]
            .iter()
            .all(|w| w.matrix().is_some_and(|s| s.2 == k));
        if m >= 1 && self.gemv_takes(m) && same_k && self.kernels.folds_norm(k) {
            let (x, g) = self.gemv_norm(norm, h, m);
            return self.swiglu_gemv(x, m, (gate, up), out, g);
        }
        self.rms_norm(norm.0, norm.1, norm.2, h);
        self.linear_swiglu_op(h, prefill, gate, up, out);
    }

    /// silu(x . gate^T) * (x . up^T) for the GEMVs' m rows in one launch.
    fn swiglu_gemv(
        &self,
        x: &CudaBuf,
        m: usize,
        (gate, up): (&CudaWeight, &CudaWeight),
        out: &mut CudaBuf,
        norm: GemvNorm,
    ) {
        let t0 = self.prof_begin();
        let (g, n, k) = gate.matrix().expect("linear weight must be a matrix");
        let (u, ..) = up.matrix().expect("linear weight must be a matrix");
        self.ensure(out, m * n);
        let r = self.kernels.gemv_swiglu(
            (g, u),
            (gate.scales(), up.scales()),
            x.f32("linear_swiglu (gemv)"),
            out.ptr,
            (m, n, k),
            norm,
        );
        let op = match norm {
            GemvNorm::Fold { .. } => "rms_norm + linear swiglu (gemv)",
            _ => "linear swiglu (gemv)",
        };
        self.finish(op, t0, r);
    }
}
