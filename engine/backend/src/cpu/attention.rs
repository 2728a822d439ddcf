//! Causal paged attention on the CPU: each query row reads its sequence's cached keys and values
//! through the block table (prefill with a cached prefix and decode are the same loop). GQA maps
//! query head h to kv head h / (n_heads / n_kv_heads). Parallel over query rows.

use rayon::prelude::*;

use super::CpuKvCache;
use crate::ops::{AttnMetadata, AttnShape};
use crate::quant::dot_f32;

pub(super) fn paged_attention(
    cache: &CpuKvCache,
    layer: usize,
    q: &[f32],
    shape: AttnShape,
    meta: &AttnMetadata,
    out: &mut Vec<f32>,
) {
    let AttnShape {
        n_heads,
        n_kv_heads,
        head_dim: hd,
        scale,
    } = shape;
    let row = n_heads * hd;
    let kv_row = n_kv_heads * hd;
    let group = n_heads / n_kv_heads;
    let bs = cache.spec.block_size;
    out.resize(q.len(), 0.0);
    // (sequence index, position of the query) for every row of the batch.
    let mut rows = Vec::with_capacity(q.len() / row);
    for (s, seq) in meta.seqs.iter().enumerate() {
        let first_pos = seq.context_len - seq.query_len;
        for i in 0..seq.query_len {
            rows.push((s, first_pos + i));
        }
    }
    out.par_chunks_mut(row)
        .zip(q.par_chunks(row))
        .zip(rows.par_iter())
        .for_each(|((o, qr), &(s, pos))| {
            let seq = &meta.seqs[s];
            let n_ctx = pos + 1;
            let slot_of = |t: usize| seq.block_table[t / bs] as usize * bs + t % bs;
            let mut scores = vec![0f32; n_ctx];
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
            debug_assert_eq!(kv_row, n_kv_heads * hd);
        });
}
