//! Staging one step's metadata on the device: token ids, positions, cache slots, each token's
//! sequence, per-sequence (query_start, query_len, context_len, block-table offset), the block
//! tables, the logits rows, and attention's work split (rows of short queries for the per-row
//! kernel, 64-row tiles of prefill chunks for the tiled kernel), packed into one u32 buffer and
//! uploaded with one copy (decode graph steps into a buffer of their own). Also keeps
//! the rotary inverse frequencies on the device (uploaded once per distinct table).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use crate::ops::ForwardBatch;
use crate::BackendError;

/// Sections start on 64-element (256-byte) boundaries.
const SECTION: usize = 64;
/// Sequences with at least this many queries in a step take the tiled attention kernel.
pub const TILED_MIN_QUERIES: usize = 16;
/// Query rows per tile of the tiled attention kernel (FA_BQ in attention.cu).
pub const TILE_ROWS: usize = 64;

/// Device addresses of one step's metadata (see the module doc); valid until the next step.
#[derive(Debug, Clone)]
pub struct CudaStep {
    pub n_tokens: usize,
    pub n_logits: usize,
    pub tokens: u64,
    pub positions: u64,
    pub slots: u64,
    pub tok_seq: u64,
    pub seq_info: u64,
    pub block_tables: u64,
    pub logits_rows: u64,
    /// Every token row, in order (the per-row kernel over the whole batch).
    pub all_rows: u64,
    /// Rows of sequences with fewer than TILED_MIN_QUERIES queries, and how many.
    pub short_rows: u64,
    pub n_short_rows: usize,
    /// (sequence, first row) of each 64-row tile of the longer sequences, and how many.
    pub tiles: u64,
    pub n_tiles: usize,
    /// Each sequence's (query_start, query_len, context_len), on the host.
    pub seqs: Vec<[usize; 3]>,
}

#[derive(Default)]
pub struct Staging {
    host: Vec<u32>,
    device: Option<(CudaSlice<u32>, u64)>,
    graph_device: Option<(CudaSlice<u32>, u64)>,
    ropes: Vec<(Vec<f32>, CudaSlice<f32>, u64)>,
}

impl Staging {
    pub fn stage(
        &mut self,
        stream: &Arc<CudaStream>,
        b: &ForwardBatch,
        graph: bool,
    ) -> Result<(CudaStep, bool), BackendError> {
        let h = &mut self.host;
        h.clear();
        let section = |h: &mut Vec<u32>, values: &mut dyn Iterator<Item = u32>| -> usize {
            let start = h.len();
            h.extend(values);
            h.resize(h.len().div_ceil(SECTION) * SECTION, 0);
            start
        };
        let n = b.tokens.len();
        let tokens = section(h, &mut b.tokens.iter().copied());
        let positions = section(h, &mut b.positions.iter().copied());
        let slots = section(h, &mut b.attn.slot_mapping.iter().copied());
        let mut tok_seq = Vec::with_capacity(n);
        let mut info = Vec::with_capacity(4 * b.attn.seqs.len());
        let mut table_off = 0u32;
        for (i, s) in b.attn.seqs.iter().enumerate() {
            tok_seq.extend(std::iter::repeat_n(i as u32, s.query_len));
            info.extend([
                s.query_start as u32,
                s.query_len as u32,
                s.context_len as u32,
                table_off,
            ]);
            table_off += s.block_table.len() as u32;
        }
        let tok_seq_at = section(h, &mut tok_seq.into_iter());
        let info_at = section(h, &mut info.into_iter());
        let rows_at = section(h, &mut b.logits_rows.iter().map(|&r| r as u32));
        let all_at = section(h, &mut (0..n as u32));
        let long = |s: &&crate::ops::SeqAttn| s.query_len >= TILED_MIN_QUERIES;
        let short: Vec<u32> = b
            .attn
            .seqs
            .iter()
            .filter(|s| !long(s))
            .flat_map(|s| (s.query_start..s.query_start + s.query_len).map(|r| r as u32))
            .collect();
        let n_short = short.len();
        let short_at = section(h, &mut short.into_iter());
        let tiles = prefill_tiles(&b.attn.seqs);
        let n_tiles = tiles.len() / 2;
        let tiles_at = section(h, &mut tiles.into_iter());
        // Last, so every other section's offset depends only on the row and sequence counts
        // (what a decode graph's captured addresses need).
        let tables_at = section(
            h,
            &mut b
                .attn
                .seqs
                .iter()
                .flat_map(|s| s.block_table.iter().copied()),
        );

        // Graph steps stage into their own buffer, which only grows (and then moves, which the
        // caller learns from `moved`) when block tables outgrow it.
        let (target, min) = if graph {
            (&mut self.graph_device, 1 << 20)
        } else {
            (&mut self.device, 4096)
        };
        let mut moved = false;
        if target.as_ref().is_none_or(|(d, _)| d.len() < h.len()) {
            // SAFETY: the buffer is fully written by the copy below before any kernel reads it.
            let d = unsafe { stream.alloc::<u32>((2 * h.len()).next_power_of_two().max(min)) }?;
            let p = d.device_ptr(stream).0;
            *target = Some((d, p));
            moved = true;
        }
        let base = target
            .as_ref()
            .map(|(_, p)| *p)
            .expect("device staging was just ensured");
        // SAFETY: the device buffer holds at least h.len() u32; the host vector stays alive (it
        // is reused) and pageable copies are staged before the call returns.
        unsafe { cudarc::driver::result::memcpy_htod_async(base, h, stream.cu_stream()) }?;
        let at = |i: usize| base + 4 * i as u64;
        let step = CudaStep {
            n_tokens: n,
            n_logits: b.logits_rows.len(),
            tokens: at(tokens),
            positions: at(positions),
            slots: at(slots),
            tok_seq: at(tok_seq_at),
            seq_info: at(info_at),
            block_tables: at(tables_at),
            logits_rows: at(rows_at),
            all_rows: at(all_at),
            short_rows: at(short_at),
            n_short_rows: n_short,
            tiles: at(tiles_at),
            n_tiles,
            seqs: b
                .attn
                .seqs
                .iter()
                .map(|s| [s.query_start, s.query_len, s.context_len])
                .collect(),
        };
        Ok((step, moved))
    }

    /// The device copy of a rotary inverse-frequency table, uploaded on first use.
    pub fn inv_freq(
        &mut self,
        stream: &Arc<CudaStream>,
        inv_freq: &[f32],
    ) -> Result<u64, BackendError> {
        if let Some((_, _, p)) = self.ropes.iter().find(|(v, _, _)| v == inv_freq) {
            return Ok(*p);
        }
        let d = stream.clone_htod(inv_freq)?;
        let p = d.device_ptr(stream).0;
        self.ropes.push((inv_freq.to_vec(), d, p));
        Ok(p)
    }
}

/// The tiled prefill kernels' work list: (sequence, first row) of each TILE_ROWS-row tile of
/// every sequence with at least TILED_MIN_QUERIES queries, flattened. Tiles that see the most
/// keys come first, so that the causal grid's heavy blocks start in its first wave and the light
/// ones fill the tail (pp8192 on Qwen3-8B: see the README).
fn prefill_tiles(seqs: &[crate::ops::SeqAttn]) -> Vec<u32> {
    let mut tiles: Vec<(usize, u32, u32)> = seqs
        .iter()
        .enumerate()
        .filter(|(_, s)| s.query_len >= TILED_MIN_QUERIES)
        .flat_map(|(i, s)| {
            let first_pos = s.context_len - s.query_len;
            (s.query_start..s.query_start + s.query_len)
                .step_by(TILE_ROWS)
                .map(move |r| (first_pos + r - s.query_start, i as u32, r as u32))
        })
        .collect();
    tiles.sort_by_key(|&(keys, i, r)| (std::cmp::Reverse(keys), i, r));
    tiles.iter().flat_map(|&(_, i, r)| [i, r]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::SeqAttn;

    fn seq(query_start: usize, query_len: usize, context_len: usize) -> SeqAttn {
        SeqAttn {
            query_start,
            query_len,
            context_len,
            block_table: vec![],
        }
    }

    #[test]
    fn prefill_tiles_cover_long_chunks_heaviest_first() {
        // A 130-query chunk after 100 cached tokens (rows 0..130: three tiles), a decode row,
        // and a 64-query chunk with nothing cached (rows 131..195: one tile).
        let seqs = [seq(0, 130, 230), seq(130, 1, 7), seq(131, 64, 64)];
        let tiles = prefill_tiles(&seqs);
        // Keys before each tile's first row: 228, 164, 100 for sequence 0; 0 for sequence 2.
        assert_eq!(tiles, vec![0, 128, 0, 64, 0, 0, 2, 131]);
    }
}
