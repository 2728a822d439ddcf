//! Launchers of the decode GEMVs (gemv.cu): one matrix, up to three sharing their input (Q, K
//! and V), and the SwiGLU pair; a one-row GEMV goes to the weight ring instead while it records
//! (ring.rs).

use super::ring::RingGemv;
use super::{
    cfg, Kernels, GEMV_FEATURES_PER_BLOCK, GEMV_MAX_ROWS, GEMV_SWIGLU_FEATURES, GEMV_WIDE_ROWS,
    GEMV_WIDE_ROWS_BF16,
};
use crate::BackendError;

/// The RMS norm before a Q/K/V or SwiGLU GEMV (gemv.cu's GemvNorm).
#[derive(Debug, Clone, Copy)]
pub enum GemvNorm {
    /// x is the input as it is.
    None,
    /// One row: x is the norm's input, and the GEMV folds the norm in (`weight`: f32, k values).
    Fold { weight: u64, eps: f32 },
    /// 2-8 rows: x is `gemv_norm_stats`' x * weight, and row m's outputs scale by inv[m].
    Scale { inv: u64 },
}

/// The kernel arguments of a GEMV's norm over k columns: (weight or 0, eps, inv or 0).
fn norm_args(norm: GemvNorm, rows: usize, k: usize) -> (u64, f32, u64) {
    match norm {
        GemvNorm::None => (0, 0.0, 0),
        GemvNorm::Fold { weight, eps } => {
            assert!(
                rows == 1 && k.is_multiple_of(8),
                "a folded norm takes one row, k % 8 == 0"
            );
            (weight, eps, 0)
        }
        GemvNorm::Scale { inv } => (0, 0.0, inv),
    }
}

impl Kernels {
    /// Whether the GEMVs over `k` columns fold the RMS norm before them: k % 8 == 0, and no
    /// weight ring, which stages a norm's output with the norm kernel's bits: the rows it
    /// serves must get those bits in a batch too.
    pub fn folds_norm(&self, k: usize) -> bool {
        self.norm_fold_on && k.is_multiple_of(8) && self.ring.is_none()
    }

    /// For a Q/K/V or SwiGLU GEMV of 2..=GEMV_MAX_ROWS rows after an RMS norm (weight `w`, f32 k
    /// values): xg[m, :] = x[m, :] * w and each row's inverse RMS, summed as the one-row GEMV
    /// folding the norm sums it. Returns the `GemvNorm::Scale` for the GEMV reading xg.
    pub fn gemv_norm_stats(
        &self,
        (x, w, xg): (u64, u64, u64),
        (rows, k): (usize, usize),
        eps: f32,
    ) -> Result<GemvNorm, BackendError> {
        assert!(
            (2..=GEMV_MAX_ROWS).contains(&rows) && k.is_multiple_of(8),
            "gemv_norm_stats takes 2..={GEMV_MAX_ROWS} rows of k % 8 == 0"
        );
        let inv = self.norm_inv.1;
        if self.skipping() {
            return Ok(GemvNorm::Scale { inv });
        }
        let k_i = k as i32;
        let mut b = self.launcher(&self.gemv_norm_stats)?;
        b.arg(&x).arg(&w).arg(&xg).arg(&inv).arg(&k_i).arg(&eps);
        // SAFETY: x and xg hold rows * k f32, w k f32, inv GEMV_MAX_ROWS f32 (norm_inv); the
        // arguments match gemv_norm_stats' signature; a block of GEMV_WARPS (4) warps a row.
        unsafe { b.launch(cfg((rows as u32, 1), 128)) }?;
        Ok(GemvNorm::Scale { inv })
    }

    /// y[m, n] = x[m, :] . W[n, :] (+ bias[n]) for m < rows <= GEMV_MAX_ROWS; W bf16 [n, k], or
    /// fp8 with row scales at `scales` (nonzero). With `add`, y[m, n] += that instead.
    pub fn gemv(
        &self,
        (w, scales): (u64, u64),
        x: u64,
        bias: u64,
        y: u64,
        (rows, n, k): (usize, usize, usize),
        add: bool,
    ) -> Result<(), BackendError> {
        assert!(
            (1..=GEMV_MAX_ROWS).contains(&rows),
            "gemv takes 1..={GEMV_MAX_ROWS} rows"
        );
        let (n_i, k_i, add_i) = (n as i32, k as i32, i32::from(add));
        // Wide outputs: 4 features per block (each x load feeds 4 weight rows), 8 from a few rows
        // on (the rows' x loads would outweigh the weights'); narrow ones keep more blocks so the
        // grid still covers every SM. A block's 4 warps split K.
        let wide_rows = if scales != 0 {
            GEMV_WIDE_ROWS
        } else {
            GEMV_WIDE_ROWS_BF16
        };
        let ri = match n {
            n if n >= 4096 && rows >= wide_rows => 3,
            n if n >= 4096 => 2,
            n if n >= 2048 => 1,
            _ => 0,
        };
        if self.skipping() {
            return Ok(());
        }
        let one = [(w, bias, y, n)];
        if rows == 1
            && scales == 0
            && self.ring_gemv(
                RingGemv {
                    mats: &one,
                    x,
                    k,
                    add,
                },
                false,
            )?
        {
            return Ok(());
        }
        let per_block = GEMV_FEATURES_PER_BLOCK[ri];
        let warps = 4;
        let mut b = self.launcher(&self.gemv[usize::from(scales != 0)][(rows - 1) * 4 + ri])?;
        b.arg(&w)
            .arg(&scales)
            .arg(&x)
            .arg(&bias)
            .arg(&y)
            .arg(&n_i)
            .arg(&k_i)
            .arg(&add_i);
        let c = cfg((n.div_ceil(per_block) as u32, 1), 32 * warps as u32);
        // SAFETY: w holds n*k bf16 (or fp8 with n f32 scales), x rows*k f32 (16-byte aligned
        // arena rows), y rows*n f32, bias n f32 or 0; the arguments match gemv_{bf16,fp8}_M_R's
        // signature.
        unsafe { b.launch(c) }
    }

    /// The Q, K and V projections in one launch: y_i[m, n] = x[m, :] . W_i[n, :] (+ b_i[n]) for
    /// rows <= GEMV_MAX_ROWS; `mats[i]` = (W_i, bias_i or 0, y_i, N_i), all with `k` columns,
    /// all bf16 or all fp8 with row scales `scales[i]` (zeros for bf16); after the RMS norm
    /// `norm` (see `folds_norm`).
    pub fn gemv3(
        &self,
        x: u64,
        mats: [(u64, u64, u64, usize); 3],
        scales: [u64; 3],
        (rows, k): (usize, usize),
        norm: GemvNorm,
    ) -> Result<(), BackendError> {
        if self.skipping() {
            return Ok(());
        }
        let (gamma, eps, inv) = norm_args(norm, rows, k);
        // linear_pair leaves the third matrix empty.
        let used = mats.iter().take_while(|m| m.3 > 0).count();
        let g = RingGemv {
            mats: &mats[..used],
            x,
            k,
            add: false,
        };
        let fp8 = scales[0] != 0;
        if rows == 1 && !fp8 && matches!(norm, GemvNorm::None) && self.ring_gemv(g, false)? {
            return Ok(());
        }
        let total: usize = mats.iter().map(|m| m.3).sum();
        // As for `gemv` (by the total width), but a warp must never straddle two matrices.
        let widest = match total {
            n if n >= 4096 && rows >= GEMV_WIDE_ROWS => 3,
            n if n >= 4096 => 2,
            n if n >= 2048 => 1,
            _ => 0,
        };
        let ri = (0..=widest)
            .rev()
            .find(|&i| {
                let r = GEMV_FEATURES_PER_BLOCK[i];
                mats[0].3.is_multiple_of(r) && mats[1].3.is_multiple_of(r)
            })
            .unwrap_or(0);
        let per_block = GEMV_FEATURES_PER_BLOCK[ri];
        let warps = 4;
        let [(w0, b0, y0, n0), (w1, b1, y1, n1), (w2, b2, y2, n2)] = mats;
        let (n0, n1, n2, k) = (n0 as i32, n1 as i32, n2 as i32, k as i32);
        let [s0, s1, s2] = scales;
        let mut b = self.launcher(&self.gemv3[usize::from(fp8)][(rows - 1) * 4 + ri])?;
        b.arg(&w0)
            .arg(&w1)
            .arg(&w2)
            .arg(&s0)
            .arg(&s1)
            .arg(&s2)
            .arg(&x);
        b.arg(&b0).arg(&b1).arg(&b2).arg(&y0).arg(&y1).arg(&y2);
        b.arg(&n0).arg(&n1).arg(&n2).arg(&k);
        b.arg(&gamma).arg(&eps).arg(&inv);
        let c = cfg((total.div_ceil(per_block) as u32, 1), 32 * warps as u32);
        // SAFETY: each W_i holds N_i * k bf16 (or fp8 with N_i f32 scales s_i), x rows * k f32
        // (16-byte aligned arena rows), y_i rows * N_i f32, b_i N_i f32 or 0, gamma k f32 or 0
        // (k % 8 == 0 when set), inv rows f32 or 0; the arguments match
        // gemv3_{bf16,fp8}_M_R's signature.
        unsafe { b.launch(c) }
    }

    /// y[m, n] = silu(x[m] . Wg[n]) * (x[m] . Wu[n]) for rows <= GEMV_MAX_ROWS; Wg, Wu bf16
    /// [n, k], or fp8 with row scales (sg, su) (zeros for bf16); after the RMS norm `norm` (as
    /// for `gemv3`).
    pub fn gemv_swiglu(
        &self,
        (wg, wu): (u64, u64),
        (sg, su): (u64, u64),
        x: u64,
        y: u64,
        (rows, n, k): (usize, usize, usize),
        norm: GemvNorm,
    ) -> Result<(), BackendError> {
        if self.skipping() {
            return Ok(());
        }
        let (gamma, eps, inv) = norm_args(norm, rows, k);
        let pair = [(wg, 0, y, n), (wu, 0, 0, n)];
        let fp8 = sg != 0;
        if rows == 1
            && !fp8
            && matches!(norm, GemvNorm::None)
            && self.ring_gemv(
                RingGemv {
                    mats: &pair,
                    x,
                    k,
                    add: false,
                },
                true,
            )?
        {
            return Ok(());
        }
        // 4 features a block at 2-7 rows with fp8 weights, but 2 at 8: with 4 that kernel needs
        // 173 registers, two blocks an SM instead of three. bf16 weights take 4 only at 8 rows:
        // at 2-7, 2 was faster. (Qwen3-8B's gate/up alone, `run.sh gemvrows` on a lent H200, in
        // three commands: fp8 at 8 rows 68 against 100 us; bf16 at 2 / 4 / 7 rows 49.0 / 55.5 /
        // 67.9 against 51.3 / 56.6 / 76.9. In the engine bf16 at 8 concurrent lost 1.5% with 2.)
        let wide = if fp8 {
            (GEMV_WIDE_ROWS..GEMV_MAX_ROWS).contains(&rows)
        } else {
            rows == GEMV_MAX_ROWS
        };
        let ri = match n {
            n if n >= 4096 && wide => 2,
            n if n >= 4096 => 1,
            _ => 0,
        };
        let per_block = GEMV_SWIGLU_FEATURES[ri];
        let warps = 4;
        let (n_i, k_i) = (n as i32, k as i32);
        let mut b = self.launcher(&self.gemv_swiglu[usize::from(fp8)][(rows - 1) * 3 + ri])?;
        b.arg(&wg)
            .arg(&wu)
            .arg(&sg)
            .arg(&su)
            .arg(&x)
            .arg(&y)
            .arg(&n_i)
            .arg(&k_i);
        b.arg(&gamma).arg(&eps).arg(&inv);
        let c = cfg((n.div_ceil(per_block) as u32, 1), 32 * warps as u32);
        // SAFETY: wg and wu hold n*k bf16 (or fp8 with n f32 scales each), x rows*k f32, y
        // rows*n f32, gamma k f32 or 0 (k % 8 == 0 when set), inv rows f32 or 0; the arguments
        // match gemv_swiglu_{bf16,fp8}_M_R's signature.
        unsafe { b.launch(c) }
    }
}
