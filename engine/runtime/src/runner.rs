//! The model runner's data step: a `SchedulerOutput` becomes a `ForwardBatch` (mixed prefill
//! chunks and decode rows, positions, slot mapping, block tables, row kinds, logits rows).

use hearth_backend::{AttnMetadata, SeqAttn};
use hearth_models::ForwardBatch;
use hearth_sched::{SchedulerOutput, SeqId};

/// Builds the batch; `prompt_len(id)` gives each sequence's original prompt length (tokens
/// before it are prompt rows, the rest generated ones). Returns the batch and, in logits-row
/// order, the ids of the sequences to sample.
pub fn build_batch(
    out: &SchedulerOutput,
    block_size: usize,
    prompt_len: impl Fn(SeqId) -> usize,
) -> (ForwardBatch, Vec<SeqId>) {
    let n = out.num_tokens;
    let mut batch = ForwardBatch {
        tokens: Vec::with_capacity(n),
        positions: Vec::with_capacity(n),
        attn: AttnMetadata {
            seqs: Vec::with_capacity(out.seqs.len()),
            slot_mapping: Vec::with_capacity(n),
            prefill: Vec::with_capacity(n),
        },
        logits_rows: Vec::new(),
    };
    let mut sampled = Vec::new();
    for s in &out.seqs {
        let query_start = batch.tokens.len();
        let end = s.start + s.tokens.len();
        let plen = prompt_len(s.id);
        batch.tokens.extend_from_slice(&s.tokens);
        for pos in s.start..end {
            batch.positions.push(pos as u32);
            let block = s.block_table[pos / block_size];
            batch
                .attn
                .slot_mapping
                .push(block * block_size as u32 + (pos % block_size) as u32);
            batch.attn.prefill.push(pos < plen);
        }
        batch.attn.seqs.push(SeqAttn {
            query_start,
            query_len: s.tokens.len(),
            context_len: end,
            block_table: s.block_table.clone(),
        });
        if s.sample {
            batch.logits_rows.push(batch.tokens.len() - 1);
            sampled.push(s.id);
        }
    }
    (batch, sampled)
}

#[cfg(test)]
mod tests {
    use hearth_sched::ScheduledSeq;

    use super::*;

    #[test]
    fn mixed_prefill_and_decode_rows() {
        let out = SchedulerOutput {
            seqs: vec![
                ScheduledSeq {
                    id: 7,
                    start: 5,
                    tokens: vec![42],
                    block_table: vec![4, 5, 3],
                    sample: true,
                },
                ScheduledSeq {
                    id: 9,
                    start: 0,
                    tokens: vec![1, 2, 3],
                    block_table: vec![0, 1],
                    sample: false,
                },
            ],
            preempted: vec![],
            num_tokens: 4,
        };
        let (b, sampled) = build_batch(&out, 2, |id| if id == 7 { 4 } else { 10 });
        assert_eq!(b.tokens, vec![42, 1, 2, 3]);
        assert_eq!(b.positions, vec![5, 0, 1, 2]);
        // seq 7: position 5 in block 3 (block_size 2) -> slot 7; seq 9: blocks 0, 1.
        assert_eq!(b.attn.slot_mapping, vec![7, 0, 1, 2]);
        assert_eq!(b.attn.prefill, vec![false, true, true, true]);
        assert_eq!(b.attn.seqs[1].query_start, 1);
        assert_eq!(b.attn.seqs[0].context_len, 6);
        assert_eq!(b.logits_rows, vec![0]);
        assert_eq!(sampled, vec![7]);
    }
}
