//! The matmul path's fixed device buffers: the bf16 copy of a cuBLASLt matmul's f32 input, a
//! fused matmul's output before it is split, and the decode attention's split buffer. Each is
//! grown (moving it, which makes the decode graphs be captured again) when a step needs more;
//! the memory plan reserves them up front so that serving never allocates.

use cudarc::driver::CudaSlice;

use super::gemm::{Fp8Scales, Gemm, Out};
use super::kernels::Kernels;
use super::{CudaBackend, CudaBuf, State};
use crate::ops::AttnShape;
use crate::BackendError;

impl CudaBackend {
    /// cuBLASLt path: x (converted to bf16 in the scratch buffer unless it is bf16 already),
    /// then one GEMM into `out` as `mode` says (f32, bf16, or added to in place).
    pub(super) fn gemm_as(
        &self,
        w: u64,
        x: &CudaBuf,
        out: u64,
        (m, n, k): (usize, usize, usize),
        mode: Out,
    ) -> Result<u64, BackendError> {
        let xs = self.bf16_copy(x, m * k)?;
        self.on_gemm(|g| g.run_as(w, xs, out, (m, n, k), mode))?;
        Ok(out)
    }

    /// Queues `f`'s cuBLASLt calls after the weight ring's pending launches (none while launches
    /// are being skipped).
    fn on_gemm(
        &self,
        f: impl FnOnce(&mut Gemm) -> Result<(), BackendError>,
    ) -> Result<(), BackendError> {
        if self.kernels.skipping() {
            return Ok(());
        }
        self.kernels.ring_flush()?;
        f(&mut self.state().gemm)
    }

    /// The fused scratch, holding at least `floats` f32 (its address).
    pub(super) fn fused_buf(&self, floats: usize) -> Result<u64, BackendError> {
        self.fixed_buf(|st| &mut st.fused, floats * 4)
    }

    /// The buffer an fp8 matrix of `values` values is dequantized into as bf16 for cuBLASLt
    /// (`bf16_weights`), grown to the largest fp8 upload group as the weights load.
    pub(super) fn dequant_buf(&self, values: usize) -> Result<u64, BackendError> {
        self.fixed_buf(|st| &mut st.dequant, values * 2)
    }

    /// The buffer gemm_fp8 keeps its partial sums in, of at least `bytes`; grown to the largest
    /// fp8 matrix's need as the weights load (`Kernels::fp8_gemm_parts_bytes`).
    pub(super) fn fp8_parts(&self, bytes: usize) -> Result<u64, BackendError> {
        self.fixed_buf(|st| &mut st.fp8_parts, bytes)
    }

    /// out (as `mode` says) = x . w^T for a bf16 or fp8 matrix (`scales` nonzero): fp8 takes
    /// W8A8 past `w8a8_after` rows where it runs, gemm_fp8 where the rows fit it, else the
    /// matrix goes to cuBLASLt (as bf16).
    pub(super) fn weight_gemm(
        &self,
        (w, scales): (u64, u64),
        x: &CudaBuf,
        out: u64,
        (m, n, k): (usize, usize, usize),
        mode: Out,
    ) -> Result<u64, BackendError> {
        if self.w8a8_runs(m, n, k, scales) {
            return self.gemm_w8a8((w, scales), x, out, (m, n, k), mode);
        }
        if scales == 0 || !self.kernels.fp8_gemm_fits(m, k) {
            let w = self.bf16_weights((w, scales), (n, k))?;
            return self.gemm_as(w, x, out, (m, n, k), mode);
        }
        let xs = self.bf16_copy(x, m * k)?;
        let parts = match self.kernels.fp8_gemm_parts_bytes(n, k) {
            0 => 0,
            bytes => self.fp8_parts(bytes)?,
        };
        self.kernels
            .gemm_fp8((w, scales, xs, out, parts), (m, n, k), mode)?;
        Ok(out)
    }

    /// Whether m rows of an fp8 [n, k] matrix run as W8A8: past `w8a8_after` rows where the
    /// matrix takes it (`w8a8_takes`).
    pub(super) fn w8a8_runs(&self, m: usize, n: usize, k: usize, scales: u64) -> bool {
        m > self.w8a8_after && self.w8a8_takes(n, k, scales)
    }

    /// Whether an fp8 [n, k] matrix (`scales` its row scales' address, nonzero) takes W8A8
    /// (`gemm_w8a8`) past `w8a8_after` rows: cuBLASLt has fp8 matmuls (`Gemm::w8a8`) and the
    /// rows of w, x and y and the scale vectors are 16-byte aligned.
    pub(super) fn w8a8_takes(&self, n: usize, k: usize, scales: u64) -> bool {
        self.w8a8.is_some()
            && scales != 0
            && scales.is_multiple_of(16)
            && k.is_multiple_of(16)
            && n.is_multiple_of(8)
    }

    /// W8A8: x's rows quantized to e4m3 with a scale each into the scratch buffer (the values,
    /// then the scales), then one fp8 matmul with w's row scales applied by cuBLASLt
    /// (`Gemm::run_fp8`), or unscaled and the scales applied by `fp8_rescale` after it: in
    /// place, except that a sum for the residual stream goes to the fused buffer first (free
    /// between ops, and as wide as the residual stream: `ModelInfo::fused_floats_per_token`).
    fn gemm_w8a8(
        &self,
        (w, sw): (u64, u64),
        x: &CudaBuf,
        out: u64,
        (m, n, k): (usize, usize, usize),
        mode: Out,
    ) -> Result<u64, BackendError> {
        // k % 16 == 0, so the scales after the values are 16-byte aligned.
        let xq = self.fixed_buf(|st| &mut st.scratch, m * k + 4 * m)?;
        let sx = xq + (m * k) as u64;
        self.kernels
            .quantize_rows_fp8((x.ptr, x.bf16), (xq, sx), (m, k))?;
        if self.w8a8 == Some(Fp8Scales::Rows) {
            self.on_gemm(|g| g.run_fp8((w, sw), (xq, sx), out, (m, n, k), mode))?;
            return Ok(out);
        }
        let (raw, raw_mode) = match mode {
            Out::AddF32 => (self.fused_buf(m * n)?, Out::F32),
            _ => (out, mode),
        };
        self.on_gemm(|g| g.run_fp8_unscaled(w, xq, raw, (m, n, k), raw_mode))?;
        self.kernels
            .fp8_rescale((raw, out, mode), (sx, sw), (m, n))?;
        Ok(out)
    }

    /// A matrix as bf16 for cuBLASLt: its own address, or for fp8 (`scales` nonzero) its values
    /// times their row's scale, rounded to bf16, in the dequantization buffer.
    pub(super) fn bf16_weights(
        &self,
        (w, scales): (u64, u64),
        (rows, cols): (usize, usize),
    ) -> Result<u64, BackendError> {
        if scales == 0 {
            return Ok(w);
        }
        let out = self.dequant_buf(rows * cols)?;
        self.kernels
            .fp8_rows_to_bf16((w, scales, out), (rows, cols))?;
        Ok(out)
    }

    /// The address of the first `n` values of x as bf16: x's own when it is bf16, else a copy
    /// in the scratch buffer.
    pub(super) fn bf16_copy(&self, x: &CudaBuf, n: usize) -> Result<u64, BackendError> {
        if x.bf16 {
            return Ok(x.ptr);
        }
        let xs = self.fixed_buf(|st| &mut st.scratch, 2 * n)?;
        self.kernels.f32_to_bf16(x.ptr, xs, n)?;
        Ok(xs)
    }

    /// A fixed device buffer of State of at least `bytes`, grown (moving it, so graphs are
    /// captured again) when too small.
    pub(super) fn fixed_buf(
        &self,
        which: impl Fn(&mut State) -> &mut Option<(CudaSlice<u8>, u64)>,
        bytes: usize,
    ) -> Result<u64, BackendError> {
        let mut st = self.state();
        if let Some((b, p)) = which(&mut st) {
            if b.len() >= bytes {
                return Ok(*p);
            }
        }
        // SAFETY: fixed buffers are written by the kernels that use them before being read.
        let b = unsafe { self.stream.alloc::<u8>(bytes.max(256).next_power_of_two()) }?;
        let p = self.dptr(&b);
        *which(&mut st) = Some((b, p));
        st.moves += 1;
        Ok(p)
    }

    /// The decode attention split buffer, grown (moving it) when a layout needs more.
    pub(super) fn attn_parts(&self, shape: AttnShape) -> Result<u64, BackendError> {
        let need = Kernels::decode_parts_bytes(shape.n_heads, shape.head_dim);
        self.fixed_buf(|st| &mut st.attn_parts, need)
    }
}
