//! Causal paged attention on the CPU. Keys and values are read through each sequence's block
//! table; GQA maps query head h to kv head h / (n_heads / n_kv_heads).
//!
//! Two paths, by row kind (`AttnMetadata::prefill`), never by batch shape: generated-token rows
//! loop over their keys one row at a time, in parallel; each sequence's run of prompt rows
//! gathers its keys and values once per head and computes scores and outputs as f32 GEMMs over
//! blocks of queries, skipping the keys the causal mask hides.

use rayon::prelude::*;

use super::{CpuKvCache, OutPtr};
use crate::ops::{AttnMetadata, AttnShape, SeqAttn};
use crate::quant::dot_f32;

/// Query rows per score block in the GEMM path.
const QUERY_BLOCK: usize = 64;

pub(super) fn paged_attention(
    cache: &CpuKvCache,
    layer: usize,
    q: &[f32],
    shape: AttnShape,
    meta: &AttnMetadata,
    out: &mut Vec<f32>,
) {
    out.resize(q.len(), 0.0);
    rows_path(cache, layer, q, shape, meta, out);
    for seq in &meta.seqs {
        // Prompt rows come first in a sequence's query range (a recomputed sequence's
        // generated tokens follow its prompt).
        let rows = &meta.prefill[seq.query_start..seq.query_start + seq.query_len];
        let run = rows.iter().take_while(|&&p| p).count();
        if run > 0 {
            gemm_path(cache, layer, q, shape, seq, run, out);
        }
    }
}

/// One query row at a time, for generated-token rows.
fn rows_path(
    cache: &CpuKvCache,
    layer: usize,
    q: &[f32],
    shape: AttnShape,
    meta: &AttnMetadata,
    out: &mut [f32],
) {
    let AttnShape {
        n_heads,
        n_kv_heads,
        head_dim: hd,
        scale,
    } = shape;
    let row = n_heads * hd;
    let group = n_heads / n_kv_heads;
    let bs = cache.spec.block_size;
    // (sequence index, position of the query) for every row of the batch; None = GEMM path.
    let mut rows = Vec::with_capacity(q.len() / row);
    for (s, seq) in meta.seqs.iter().enumerate() {
        let first_pos = seq.context_len - seq.query_len;
        let kinds = &meta.prefill[seq.query_start..seq.query_start + seq.query_len];
        rows.extend(
            kinds
                .iter()
                .enumerate()
                .map(|(i, &p)| (!p).then_some((s, first_pos + i))),
        );
    }
    out.par_chunks_mut(row)
        .zip(q.par_chunks(row))
        .zip(rows.par_iter())
        .for_each(|((o, qr), which)| {
            let Some((s, pos)) = *which else { return };
            let seq = &meta.seqs[s];
            let slot_of = |t: usize| seq.block_table[t / bs] as usize * bs + t % bs;
            let mut scores = vec![0f32; pos + 1];
            for h in 0..n_heads {
                let kvh = h / group;
                let qh = &qr[h * hd..(h + 1) * hd];
                let mut max = f32::NEG_INFINITY;
                for (t, sc) in scores.iter_mut().enumerate() {
                    let off = cache.offset(layer, slot_of(t)) + kvh * hd;
                    *sc = dot_f32(qh, &cache.k[off..off + hd]) * scale;
                    max = max.max(*sc);
                }
                let mut sum = 0f32;
                for sc in scores.iter_mut() {
                    *sc = (*sc - max).exp();
                    sum += *sc;
                }
                let oh = &mut o[h * hd..(h + 1) * hd];
                oh.fill(0.0);
                for (t, &p) in scores.iter().enumerate() {
                    let off = cache.offset(layer, slot_of(t)) + kvh * hd;
                    let p = p / sum;
                    for (ov, &vv) in oh.iter_mut().zip(&cache.v[off..off + hd]) {
                        *ov += p * vv;
                    }
                }
            }
        });
}

/// The first `qlen` query rows of `seq` (its prompt rows): per head, S = scale * Q K^T and
/// O = softmax(S) V as GEMMs.
fn gemm_path(
    cache: &CpuKvCache,
    layer: usize,
    q: &[f32],
    shape: AttnShape,
    seq: &SeqAttn,
    qlen: usize,
    out: &mut [f32],
) {
    let AttnShape {
        n_heads,
        n_kv_heads,
        head_dim: hd,
        scale,
    } = shape;
    let row = n_heads * hd;
    let group = n_heads / n_kv_heads;
    let bs = cache.spec.block_size;
    let first = seq.context_len - seq.query_len;
    // Keys and values up to the last prompt row's position.
    let ctx = first + qlen;
    assert!(q.len() >= (seq.query_start + qlen) * row && out.len() >= q.len());
    let out_ptr = OutPtr(out.as_mut_ptr());
    (0..n_heads).into_par_iter().for_each(|h| {
        let kvh = h / group;
        let mut kmat = vec![0f32; ctx * hd];
        let mut vmat = vec![0f32; ctx * hd];
        for t in 0..ctx {
            let slot = seq.block_table[t / bs] as usize * bs + t % bs;
            let off = cache.offset(layer, slot) + kvh * hd;
            kmat[t * hd..(t + 1) * hd].copy_from_slice(&cache.k[off..off + hd]);
            vmat[t * hd..(t + 1) * hd].copy_from_slice(&cache.v[off..off + hd]);
        }
        let mut s = Vec::new();
        for qb in (0..qlen).step_by(QUERY_BLOCK) {
            let nq = QUERY_BLOCK.min(qlen - qb);
            // Keys up to the last query of the block; later ones are masked for all of it.
            let nk = first + qb + nq;
            s.clear();
            s.resize(nq * nk, 0.0);
            let q0 = (seq.query_start + qb) * row + h * hd;
            // SAFETY: A = q rows q0.. with row stride `row` (nq x hd, inside q: asserted above);
            // B = K^T from kmat (hd x nk, column stride hd); C = s (nq x nk, contiguous).
            unsafe {
                matrixmultiply::sgemm(
                    nq,
                    hd,
                    nk,
                    scale,
                    q.as_ptr().add(q0),
                    row as isize,
                    1,
                    kmat.as_ptr(),
                    1,
                    hd as isize,
                    0.0,
                    s.as_mut_ptr(),
                    nk as isize,
                    1,
                );
            }
            for (i, sr) in s.chunks_exact_mut(nk).enumerate() {
                let visible = first + qb + i + 1;
                let max = sr[..visible]
                    .iter()
                    .fold(f32::NEG_INFINITY, |m, &v| m.max(v));
                let mut sum = 0f32;
                for v in &mut sr[..visible] {
                    *v = (*v - max).exp();
                    sum += *v;
                }
                let inv = 1.0 / sum;
                sr[..visible].iter_mut().for_each(|v| *v *= inv);
                sr[visible..].fill(0.0);
            }
            let c = out_ptr.get();
            // SAFETY: A = s (nq x nk); B = vmat (nk x hd, row stride hd); C = out rows of this
            // block at columns h*hd..(h+1)*hd with row stride `row`, inside `out` (asserted
            // above). Only this head's task writes these columns.
            unsafe {
                matrixmultiply::sgemm(
                    nq,
                    nk,
                    hd,
                    1.0,
                    s.as_ptr(),
                    nk as isize,
                    1,
                    vmat.as_ptr(),
                    hd as isize,
                    1,
                    0.0,
                    c.add(q0),
                    row as isize,
                    1,
                );
            }
        }
    });
}
