//! Mixture-of-experts and MLA's per-head projections on the CPU. Each expert runs `linear` on
//! the rows routed to it, with their kinds, so a row's arithmetic does not depend on which other
//! rows share its experts; a row's expert outputs are summed in expert order.

use rayon::prelude::*;

use super::{linear, CpuBackend, CpuWeight};
use crate::ops::{Backend, MoeLayer};
use crate::quant::dot_f32;

// `x` is the backend's Buf (`linear_swiglu` takes it as one for the shared expert).
#[allow(clippy::ptr_arg)]
pub(super) fn moe(
    b: &CpuBackend,
    x: &Vec<f32>,
    prefill: &[bool],
    layer: &MoeLayer<'_, CpuWeight>,
    out: &mut Vec<f32>,
) {
    let rows = prefill.len();
    let hidden = x.len() / rows.max(1);
    let mut logits = Vec::new();
    b.pool
        .install(|| linear::linear(x, prefill, layer.router, &mut logits));
    let bias = layer.score_bias.map(|w| w.dense());
    let n_experts = layer.routing.n_experts;
    let routes: Vec<_> = logits
        .chunks_exact(n_experts)
        .map(|l| crate::route(l, bias.as_deref(), layer.routing))
        .collect();
    out.clear();
    out.resize(rows * hidden, 0.0);
    // (row, weight) per expert, rows ascending.
    let mut assigned: Vec<Vec<(usize, f32)>> = vec![Vec::new(); n_experts];
    for (r, route) in routes.iter().enumerate() {
        for &(e, w) in route {
            assigned[e as usize].push((r, w));
        }
    }
    let (mut act, mut y) = (Vec::new(), Vec::new());
    for (e, rows_of) in assigned.iter().enumerate() {
        if rows_of.is_empty() {
            continue;
        }
        let xs: Vec<f32> = rows_of
            .iter()
            .flat_map(|&(r, _)| x[r * hidden..(r + 1) * hidden].iter().copied())
            .collect();
        let kinds: Vec<bool> = rows_of.iter().map(|&(r, _)| prefill[r]).collect();
        let [gate, up, down] = &layer.experts[e];
        b.linear_swiglu(&xs, &kinds, gate, up, &mut act);
        b.linear(&act, &kinds, down, None, &mut y);
        for (i, &(r, w)) in rows_of.iter().enumerate() {
            let o = &mut out[r * hidden..(r + 1) * hidden];
            for (ov, yv) in o.iter_mut().zip(&y[i * hidden..(i + 1) * hidden]) {
                *ov += w * yv;
            }
        }
    }
    if let Some([gate, up, down]) = layer.shared {
        b.linear_swiglu(x, prefill, gate, up, &mut act);
        b.linear(&act, prefill, down, None, &mut y);
        super::add_inplace(out, &y);
    }
}

/// `linear` per head with f32 dots (one path for every row kind): out[r, h] = x[r, h] . w_h^T.
pub(super) fn linear_heads(
    x: &[f32],
    rows: usize,
    w: &CpuWeight,
    n_heads: usize,
    out: &mut Vec<f32>,
) {
    let CpuWeight::F32 {
        data,
        rows: wr,
        cols: k,
    } = w
    else {
        panic!("linear_heads needs a dense weight (MLA checkpoints are unquantized)");
    };
    let (k, n) = (*k, wr / n_heads);
    debug_assert_eq!(x.len(), rows * n_heads * k);
    out.resize(rows * n_heads * n, 0.0);
    out.par_chunks_mut(n).enumerate().for_each(|(i, o)| {
        let (r, h) = (i / n_heads, i % n_heads);
        let xh = &x[(r * n_heads + h) * k..(r * n_heads + h + 1) * k];
        for (j, ov) in o.iter_mut().enumerate() {
            *ov = dot_f32(xh, &data[(h * n + j) * k..(h * n + j + 1) * k]);
        }
    });
}
