//! `ForwardBatch`: the plain data a model runner hands a model for one step.

use hearth_backend::AttnMetadata;

/// One step's tokens: mixed prefill chunks and decode rows, concatenated per sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct ForwardBatch {
    pub tokens: Vec<u32>,
    pub positions: Vec<u32>,
    pub attn: AttnMetadata,
    /// Rows of `tokens` whose logits are wanted (usually each sequence's last token).
    pub logits_rows: Vec<usize>,
}
