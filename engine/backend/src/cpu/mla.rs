//! MLA over the latent cache on the CPU: every head of a query row attends over its sequence's
//! latent rows `[c | k_rope]` and sums `c`. One path for every row kind, a row at a time in
//! parallel, so results do not depend on the batch.

use rayon::prelude::*;

use super::CpuKvCache;
use crate::ops::{AttnMetadata, MlaShape};
use crate::quant::dot_f32;

pub(super) fn write_latent(
    cache: &mut CpuKvCache,
    layer: usize,
    latent: &[f32],
    k_rope: &[f32],
    slots: &[u32],
) {
    let width = cache.spec.head_dim;
    let rank = latent.len() / slots.len().max(1);
    let rope = width - rank;
    for (t, &slot) in slots.iter().enumerate() {
        if slot == crate::NO_SLOT {
            continue;
        }
        let off = cache.offset(layer, slot as usize);
        cache.k[off..off + rank].copy_from_slice(&latent[t * rank..(t + 1) * rank]);
        cache.k[off + rank..off + width].copy_from_slice(&k_rope[t * rope..(t + 1) * rope]);
    }
}

pub(super) fn attention(
    cache: &CpuKvCache,
    layer: usize,
    (q_lat, q_rope): (&[f32], &[f32]),
    shape: MlaShape,
    meta: &AttnMetadata,
    out: &mut Vec<f32>,
) {
    let MlaShape {
        n_heads,
        kv_lora_rank: rank,
        rope_dim,
        scale,
    } = shape;
    let width = rank + rope_dim;
    let bs = cache.spec.block_size;
    let mut rows = Vec::new();
    for (s, seq) in meta.seqs.iter().enumerate() {
        let first = seq.context_len - seq.query_len;
        rows.extend((0..seq.query_len).map(|i| (s, first + i)));
    }
    out.resize(rows.len() * n_heads * rank, 0.0);
    out.par_chunks_mut(n_heads * rank)
        .zip(rows.par_iter())
        .enumerate()
        .for_each(|(r, (o, &(s, pos)))| {
            let seq = &meta.seqs[s];
            let slot_of = |t: usize| seq.block_table[t / bs] as usize * bs + t % bs;
            let mut scores = vec![0f32; pos + 1];
            for h in 0..n_heads {
                let ql = &q_lat[(r * n_heads + h) * rank..(r * n_heads + h + 1) * rank];
                let qr = &q_rope[(r * n_heads + h) * rope_dim..(r * n_heads + h + 1) * rope_dim];
                let mut max = f32::NEG_INFINITY;
                for (t, sc) in scores.iter_mut().enumerate() {
                    let off = cache.offset(layer, slot_of(t));
                    let row = &cache.k[off..off + width];
                    *sc = (dot_f32(ql, &row[..rank]) + dot_f32(qr, &row[rank..])) * scale;
                    max = max.max(*sc);
                }
                let mut sum = 0f32;
                for sc in scores.iter_mut() {
                    *sc = (*sc - max).exp();
                    sum += *sc;
                }
                let oh = &mut o[h * rank..(h + 1) * rank];
                oh.fill(0.0);
                for (t, &p) in scores.iter().enumerate() {
                    let off = cache.offset(layer, slot_of(t));
                    let p = p / sum;
                    for (ov, &cv) in oh.iter_mut().zip(&cache.k[off..off + rank]) {
                        *ov += p * cv;
                    }
                }
            }
        });
}
