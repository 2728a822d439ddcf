//! The Backend op set: what a model may ask of a device. Not a tensor library: each op is one
//! step of a transformer layer, so CUDA can implement each as one kernel (or a cuBLASLt call).
//!
//! Activations are row-major f32 buffers (`Backend::Buf`) whose row counts are passed alongside;
//! the KV cache is paged (`KvCacheSpec`), addressed through the plain-data `AttnMetadata`.

use crate::{BackendError, HostWeight};

/// Rotary embedding parameters, shared by all layers.
#[derive(Debug, Clone, PartialEq)]
pub struct RopeSpec {
    pub theta: f32,
    pub head_dim: usize,
    /// Dimensions rotated per head (partial rotary when < head_dim).
    pub rotary_dim: usize,
    /// NeoX style (rotate halves) when true; interleaved pairs (GPT-J) otherwise.
    pub neox: bool,
    /// Llama 3 frequency scaling, when the checkpoint asks for it.
    pub llama3_scaling: Option<Llama3RopeScaling>,
    /// Inverse frequency of each rotated pair, computed once by `new` (kernels read it every
    /// step).
    pub inv_freq: Vec<f32>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Llama3RopeScaling {
    pub factor: f32,
    pub low_freq_factor: f32,
    pub high_freq_factor: f32,
    pub original_max_position_embeddings: f32,
}

impl RopeSpec {
    pub fn new(
        theta: f32,
        head_dim: usize,
        rotary_dim: usize,
        neox: bool,
        llama3_scaling: Option<Llama3RopeScaling>,
    ) -> Self {
        let inv_freq = (0..rotary_dim / 2)
            .map(|i| {
                let f = 1.0 / theta.powf(2.0 * i as f32 / rotary_dim as f32);
                match llama3_scaling {
                    Some(s) => llama3_scale(f, s),
                    None => f,
                }
            })
            .collect();
        RopeSpec {
            theta,
            head_dim,
            rotary_dim,
            neox,
            llama3_scaling,
            inv_freq,
        }
    }
}

fn llama3_scale(freq: f32, s: Llama3RopeScaling) -> f32 {
    let low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
    let high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
    let wavelen = 2.0 * std::f32::consts::PI / freq;
    if wavelen < high_wavelen {
        freq
    } else if wavelen > low_wavelen {
        freq / s.factor
    } else {
        let smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor)
            / (s.high_freq_factor - s.low_freq_factor);
        (1.0 - smooth) * freq / s.factor + smooth * freq
    }
}

/// Shape of the paged KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvCacheSpec {
    pub num_layers: usize,
    pub num_blocks: usize,
    pub block_size: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
}

impl KvCacheSpec {
    /// Bytes one token takes across all layers (K and V, f32 on the CPU backend).
    pub fn bytes_per_token(&self, elem_bytes: usize) -> usize {
        2 * self.num_layers * self.num_kv_heads * self.head_dim * elem_bytes
    }
}

/// One sequence's slice of a batch, for attention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeqAttn {
    /// First row of this sequence's queries in the batch.
    pub query_start: usize,
    /// Number of new tokens (queries) this step.
    pub query_len: usize,
    /// Tokens in the cache after this step's tokens are written (cached prefix + query_len).
    pub context_len: usize,
    /// Physical block ids holding this sequence's KV, in order.
    pub block_table: Vec<u32>,
}

/// Everything attention needs besides the tensors: plain data, built by the model runner.
#[derive(Debug, Clone, PartialEq)]
pub struct AttnMetadata {
    pub seqs: Vec<SeqAttn>,
    /// For each token in the batch: true for prompt tokens, false for generated ones. Each kind
    /// always takes the same arithmetic path (prompt rows: f32 GEMMs; generated rows: integer
    /// dots and per-row attention), so a token's numerics never depend on what else is in the
    /// batch or how its prompt was chunked: greedy output is batch-invariant.
    pub prefill: Vec<bool>,
    /// For each token in the batch, its cache slot: `block_id * block_size + offset`.
    pub slot_mapping: Vec<u32>,
}

/// One step's tokens, the plain data a model runner hands a model: mixed prefill chunks and
/// decode rows, concatenated per sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct ForwardBatch {
    pub tokens: Vec<u32>,
    pub positions: Vec<u32>,
    pub attn: AttnMetadata,
    /// Rows of `tokens` whose logits are wanted (usually each sequence's last token).
    pub logits_rows: Vec<usize>,
}

/// Attention head layout of one layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttnShape {
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub scale: f32,
}

/// Index of the largest value (the lowest index on ties, like torch.argmax): greedy sampling.
pub fn argmax(values: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] {
            best = i;
        }
    }
    best as u32
}

/// The LLM op set. Models are written once against it.
pub trait Backend: Send + Sync {
    /// A weight in the backend's own layout.
    type Weight: Send + Sync;
    /// A row-major f32 activation buffer.
    type Buf: Send;
    /// The paged KV cache of all layers.
    type KvCache: Send;
    /// One step's batch metadata as the ops read it (on the device for a GPU backend: token
    /// ids, positions, slots, block tables), staged once by `begin_step`.
    type Step: Send;

    fn name(&self) -> &'static str;
    /// Runs `f` (a whole forward pass) in the backend's execution context: the CPU backend runs
    /// it on its own thread pool so the ops inside fork and join without cross-pool wakeups.
    fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        f()
    }
    fn upload(&self, w: HostWeight) -> Result<Self::Weight, BackendError>;
    /// Which kernel path a weight uses, for the startup log.
    fn describe(&self, w: &Self::Weight) -> String;
    fn alloc_kv(&self, spec: KvCacheSpec) -> Result<Self::KvCache, BackendError>;

    /// Starts a forward pass over `batch`: stages its metadata for the ops below. Buffers from
    /// `buf` live until the next `begin_step`.
    fn begin_step(&self, batch: &ForwardBatch) -> Self::Step;
    fn buf(&self, len: usize) -> Self::Buf;
    fn to_host(&self, x: &Self::Buf) -> Vec<f32>;

    /// out[i] = table[tokens[i]] for the step's tokens.
    fn embedding(&self, table: &Self::Weight, step: &Self::Step, out: &mut Self::Buf);
    /// out[rows, w.rows] = x[rows, w.cols] * w^T (+ bias); `prefill[r]` says row r's kind (see
    /// `AttnMetadata::prefill`), and its length is the row count.
    fn linear(
        &self,
        x: &Self::Buf,
        prefill: &[bool],
        w: &Self::Weight,
        bias: Option<&Self::Weight>,
        out: &mut Self::Buf,
    );
    /// RMS norm of each `w.len()`-long chunk of `x`.
    fn rms_norm(&self, x: &Self::Buf, w: &Self::Weight, eps: f32, out: &mut Self::Buf);
    /// residual += x; out = rms_norm(residual).
    fn add_rms_norm(
        &self,
        residual: &mut Self::Buf,
        x: &Self::Buf,
        w: &Self::Weight,
        eps: f32,
        out: &mut Self::Buf,
    );
    /// In place rotary embedding of `x` = [rows, n_heads * head_dim] at the step's positions.
    fn rope(&self, x: &mut Self::Buf, step: &Self::Step, n_heads: usize, rope: &RopeSpec);
    /// out[r] = silu(gate[r]) * up[r], elementwise.
    fn silu_mul(&self, gate: &Self::Buf, up: &Self::Buf, out: &mut Self::Buf);
    /// Writes this step's K and V rows into their cache slots.
    fn write_kv(
        &self,
        cache: &mut Self::KvCache,
        layer: usize,
        k: &Self::Buf,
        v: &Self::Buf,
        step: &Self::Step,
    );
    /// Causal paged attention: queries [tokens, n_heads * head_dim] against the cache.
    fn attention(
        &self,
        cache: &Self::KvCache,
        layer: usize,
        q: &Self::Buf,
        shape: AttnShape,
        step: &Self::Step,
        out: &mut Self::Buf,
    );
    /// The index of the largest value of each `cols`-long row of `x` (the first on ties): greedy
    /// sampling where the backend can do it without copying whole rows to the host.
    fn argmax_rows(&self, x: &Self::Buf, cols: usize) -> Vec<u32> {
        self.to_host(x)
            .chunks_exact(cols.max(1))
            .map(argmax)
            .collect()
    }
    /// Copies the step's logits rows of `x` (row length `cols`) into `out`.
    fn gather_logits_rows(
        &self,
        x: &Self::Buf,
        cols: usize,
        step: &Self::Step,
        out: &mut Self::Buf,
    );
}
