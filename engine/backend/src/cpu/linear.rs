//! `linear` on the CPU: out[m, n] = x[m, :] . w[n, :].
//!
//! Two paths, chosen per row by its kind (`AttnMetadata::prefill`), never by batch shape, so a
//! row's result does not depend on its neighbours. Generated tokens (decode): integer dot products
//! straight on the quantized weights, parallel over tiles of output features, so the weights
//! stream from memory once. Prompt tokens (prefill): each task dequantizes a panel of weight rows
//! to f32 and runs an f32 GEMM (matrixmultiply's register-tiled AVX2/FMA kernels) against all
//! prompt rows; the dequantization is amortized over the rows, and the f32 arithmetic is the
//! float reference's. A mixed batch gathers each kind, runs both, and scatters back.

use rayon::prelude::*;

use super::{CpuWeight, OutPtr};
use crate::quant::{dequantize_row, dot_f32, dot_q4, dot_q4_x4, dot_q8, QActs};

/// Weight rows per task: small enough to spread 576-row matrices over the pool, large enough
/// that task overhead stays negligible.
const TILE: usize = 32;

/// The inner loop for one weight format, with the activations prepared for it.
enum Kernel<'a> {
    F32 {
        x: &'a [f32],
        data: &'a [f32],
    },
    Q4 {
        acts: Vec<QActs>,
        w: &'a crate::quant::Q4Planes,
    },
    Q8 {
        acts: Vec<QActs>,
        w: &'a crate::quant::Q8Planes,
    },
    Dequant {
        x: &'a [f32],
        ty: crate::GgmlType,
        bytes: &'a [u8],
    },
}

impl Kernel<'_> {
    /// Fills `tile` ([m, nt] row-major) with rows n0..n0+nt of the output.
    fn tile(&self, n0: usize, m: usize, k: usize, tile: &mut [f32]) {
        let nt = tile.len() / m;
        match self {
            Kernel::F32 { x, data } => {
                for j in 0..nt {
                    let wr = &data[(n0 + j) * k..(n0 + j + 1) * k];
                    for i in 0..m {
                        tile[i * nt + j] = dot_f32(&x[i * k..(i + 1) * k], wr);
                    }
                }
            }
            Kernel::Q4 { acts, w } => {
                for j in 0..nt {
                    let wr = w.row(n0 + j);
                    let mut quads = acts.chunks_exact(4);
                    for (q, four) in quads.by_ref().enumerate() {
                        let r = dot_q4_x4(wr, [&four[0], &four[1], &four[2], &four[3]]);
                        for (k, v) in r.into_iter().enumerate() {
                            tile[(4 * q + k) * nt + j] = v;
                        }
                    }
                    let done = acts.len() - quads.remainder().len();
                    for (i, a) in quads.remainder().iter().enumerate() {
                        tile[(done + i) * nt + j] = dot_q4(wr, a);
                    }
                }
            }
            Kernel::Q8 { acts, w } => {
                for j in 0..nt {
                    let wr = w.row(n0 + j);
                    for (i, a) in acts.iter().enumerate() {
                        tile[i * nt + j] = dot_q8(wr, a);
                    }
                }
            }
            Kernel::Dequant { x, ty, bytes } => {
                let rb = ty.bytes_for(k);
                let mut row = vec![0f32; k];
                for j in 0..nt {
                    dequantize_row(*ty, &bytes[(n0 + j) * rb..(n0 + j + 1) * rb], &mut row);
                    for i in 0..m {
                        tile[i * nt + j] = dot_f32(&x[i * k..(i + 1) * k], &row);
                    }
                }
            }
        }
    }
}

fn quantize_rows(x: &[f32], k: usize) -> Vec<QActs> {
    x.par_chunks_exact(k).map(QActs::quantize).collect()
}

/// Weight rows dequantized per GEMM task.
const PANEL: usize = 64;

fn linear_gemm(x: &[f32], m: usize, w: &CpuWeight, out: &mut [f32]) {
    let (n, k) = (w.rows(), w.cols());
    assert!(x.len() >= m * k && out.len() >= m * n);
    let out_ptr = OutPtr(out.as_mut_ptr());
    (0..n.div_ceil(PANEL)).into_par_iter().for_each(|p| {
        let n0 = p * PANEL;
        let np = PANEL.min(n - n0);
        let owned;
        let panel: &[f32] = match w {
            CpuWeight::F32 { data, .. } => &data[n0 * k..(n0 + np) * k],
            _ => {
                let mut v = vec![0f32; np * k];
                for (j, row) in v.chunks_exact_mut(k).enumerate() {
                    w.row_f32(n0 + j, row);
                }
                owned = v;
                &owned
            }
        };
        let c = out_ptr.get();
        // SAFETY: A is x, [m, k] row-major; B is the panel transposed, [k, np] with row stride 1
        // and column stride k; C is out[.., n0..n0 + np] with row stride n. All three lie inside
        // their slices (asserted above), and this task alone writes columns n0..n0 + np.
        unsafe {
            matrixmultiply::sgemm(
                m,
                k,
                np,
                1.0,
                x.as_ptr(),
                k as isize,
                1,
                panel.as_ptr(),
                1,
                k as isize,
                0.0,
                c.add(n0),
                n as isize,
                1,
            );
        }
    });
}

pub(super) fn linear(x: &[f32], prefill: &[bool], w: &CpuWeight, out: &mut Vec<f32>) {
    let (m, n, k) = (prefill.len(), w.rows(), w.cols());
    debug_assert_eq!(x.len(), m * k, "linear input is not [{m}, {k}]");
    out.resize(m * n, 0.0);
    let n_prefill = prefill.iter().filter(|&&p| p).count();
    if n_prefill == m {
        linear_gemm(x, m, w, out);
    } else if n_prefill == 0 {
        linear_int(x, m, w, out);
    } else {
        let gather = |kind: bool| -> (Vec<usize>, Vec<f32>) {
            let idx: Vec<usize> = (0..m).filter(|&r| prefill[r] == kind).collect();
            let xs = idx
                .iter()
                .flat_map(|&r| x[r * k..(r + 1) * k].iter().copied())
                .collect();
            (idx, xs)
        };
        let (pi, px) = gather(true);
        let (di, dx) = gather(false);
        let mut po = vec![0f32; pi.len() * n];
        let mut d_out = vec![0f32; di.len() * n];
        linear_gemm(&px, pi.len(), w, &mut po);
        linear_int(&dx, di.len(), w, &mut d_out);
        for (rows, vals) in [(pi, po), (di, d_out)] {
            for (i, r) in rows.into_iter().enumerate() {
                out[r * n..(r + 1) * n].copy_from_slice(&vals[i * n..(i + 1) * n]);
            }
        }
    }
}

/// Integer dot products (f32 dots for dense weights) of every row, tiled over output features.
fn linear_int(x: &[f32], m: usize, w: &CpuWeight, out: &mut [f32]) {
    let (n, k) = (w.rows(), w.cols());
    let kernel = match w {
        CpuWeight::F32 { data, .. } => Kernel::F32 { x, data },
        CpuWeight::Q4 { planes, .. } => Kernel::Q4 {
            acts: quantize_rows(x, k),
            w: planes,
        },
        CpuWeight::Q8 { planes, .. } => Kernel::Q8 {
            acts: quantize_rows(x, k),
            w: planes,
        },
        CpuWeight::Ggml { ty, bytes, .. } => Kernel::Dequant { x, ty: *ty, bytes },
    };
    if m == 1 {
        out.par_chunks_mut(TILE)
            .enumerate()
            .for_each(|(t, tile)| kernel.tile(t * TILE, 1, k, tile));
        return;
    }
    // Tiles are computed as [m, tile] blocks, then scattered into the [m, n] output.
    let tiles: Vec<(usize, Vec<f32>)> = (0..n.div_ceil(TILE))
        .into_par_iter()
        .map(|t| {
            let n0 = t * TILE;
            let mut tile = vec![0f32; m * TILE.min(n - n0)];
            kernel.tile(n0, m, k, &mut tile);
            (n0, tile)
        })
        .collect();
    for (n0, tile) in tiles {
        let nt = tile.len() / m;
        for i in 0..m {
            out[i * n + n0..i * n + n0 + nt].copy_from_slice(&tile[i * nt..(i + 1) * nt]);
        }
    }
}
