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

/// YaRN frequency scaling (DeepSeek-V3, GLM-4.7-Flash), as transformers computes it: each
/// frequency blends interpolation (divided by `factor`) and extrapolation along a ramp between
/// the dimensions that make `beta_fast` and `beta_slow` rotations over the original context.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct YarnScaling {
    pub factor: f32,
    pub original_max_position_embeddings: f32,
    pub beta_fast: f32,
    pub beta_slow: f32,
    /// Round the ramp's ends outwards to whole dimensions (transformers' default).
    pub truncate: bool,
}

impl RopeSpec {
    /// A rotary embedding with YaRN-scaled frequencies.
    pub fn yarn(
        theta: f32,
        head_dim: usize,
        rotary_dim: usize,
        neox: bool,
        y: YarnScaling,
    ) -> Self {
        let dim = rotary_dim as f64;
        let base = theta as f64;
        let correction = |rotations: f64| {
            dim * (y.original_max_position_embeddings as f64
                / (rotations * 2.0 * std::f64::consts::PI))
                .ln()
                / (2.0 * base.ln())
        };
        let (mut low, mut high) = (
            correction(y.beta_fast as f64),
            correction(y.beta_slow as f64),
        );
        if y.truncate {
            (low, high) = (low.floor(), high.ceil());
        }
        let (low, mut high) = (low.max(0.0), high.min(dim - 1.0));
        if low == high {
            high += 0.001;
        }
        let inv_freq = (0..rotary_dim / 2)
            .map(|i| {
                let pos_freq = base.powf(2.0 * i as f64 / dim);
                let ramp = ((i as f64 - low) / (high - low)).clamp(0.0, 1.0);
                let extrapolate = 1.0 - ramp;
                let f = (1.0 / (y.factor as f64 * pos_freq)) * (1.0 - extrapolate)
                    + (1.0 / pos_freq) * extrapolate;
                f as f32
            })
            .collect();
        RopeSpec {
            theta,
            head_dim,
            rotary_dim,
            neox,
            llama3_scaling: None,
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

/// Element type of the KV cache where the backend has a choice (CUDA; the CPU backend keeps
/// f32): bf16, or fp8 e4m3 (values stored as they are: a per-tensor scale of 1, until
/// checkpoints carry calibrated scales).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvDtype {
    #[default]
    Bf16,
    Fp8E4m3,
}

impl KvDtype {
    pub fn bytes(self) -> usize {
        match self {
            KvDtype::Bf16 => 2,
            KvDtype::Fp8E4m3 => 1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            KvDtype::Bf16 => "bf16",
            KvDtype::Fp8E4m3 => "fp8_e4m3",
        }
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
    pub dtype: KvDtype,
    /// MLA's latent cache: one row per token (the compressed KV and the rotary key, written by
    /// `write_latent`, read by `mla_attention`), no separate values.
    pub latent: bool,
}

impl KvCacheSpec {
    /// Bytes one token takes across all layers (K and V, or the latent row; f32 on the CPU
    /// backend).
    pub fn bytes_per_token(&self, elem_bytes: usize) -> usize {
        let tensors = if self.latent { 1 } else { 2 };
        tensors * self.num_layers * self.num_kv_heads * self.head_dim * elem_bytes
    }

    /// The same cache with elements of `dtype`.
    pub fn with_dtype(self, dtype: KvDtype) -> Self {
        KvCacheSpec { dtype, ..self }
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

/// Cache slot of a padding row: its K and V are not written anywhere.
pub const NO_SLOT: u32 = u32::MAX;

impl ForwardBatch {
    /// Whether this is a decode step: one new token per sequence, rows in sequence order, every
    /// row sampled.
    pub fn is_decode(&self) -> bool {
        let n = self.tokens.len();
        self.attn.seqs.len() == n
            && self
                .attn
                .seqs
                .iter()
                .enumerate()
                .all(|(i, s)| s.query_len == 1 && s.query_start == i)
            && self.logits_rows.iter().copied().eq(0..n)
    }

    /// Pads a decode step up to the smallest of `sizes` that holds it (a backend's graph
    /// sizes, ascending), with rows that see no key, write no cache slot and whose outputs the
    /// caller ignores (they come after the real rows). Other batches are left alone.
    pub fn pad_decode(&mut self, sizes: &[usize]) {
        let n = self.tokens.len();
        let Some(&to) = sizes.iter().find(|&&s| s >= n) else {
            return;
        };
        if to == n || !self.is_decode() {
            return;
        }
        for i in n..to {
            self.tokens.push(0);
            self.positions.push(0);
            self.attn.slot_mapping.push(NO_SLOT);
            self.attn.prefill.push(false);
            self.attn.seqs.push(SeqAttn {
                query_start: i,
                query_len: 1,
                context_len: 0,
                block_table: Vec::new(),
            });
            self.logits_rows.push(i);
        }
    }
}

/// Attention head layout of one layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttnShape {
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub scale: f32,
}

/// Multi-head latent attention (DeepSeek-V3's MLA) in its absorbed form: every head attends
/// over the one latent row per token, `[kv_lora_rank | rope_dim]`; queries come as the
/// latent-space part (`q_nope` times the absorbed key projection) and the rotary part.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MlaShape {
    pub n_heads: usize,
    pub kv_lora_rank: usize,
    pub rope_dim: usize,
    pub scale: f32,
}

/// One MoE layer's weights, as `moe` reads them.
pub struct MoeLayer<'a, W> {
    pub routing: &'a crate::MoeRouting,
    /// `[n_experts, hidden]`.
    pub router: &'a W,
    /// Per-expert selection bias of sigmoid routers (`e_score_correction_bias`).
    pub score_bias: Option<&'a W>,
    /// Each routed expert's gate, up and down projections.
    pub experts: &'a [[W; 3]],
    /// The shared expert (always on, unweighted), when the architecture has one.
    pub shared: Option<&'a [W; 3]>,
}

/// What `rope_write_kv` needs besides the tensors: one layer's q/k norms and head layout.
pub struct RopeWrite<'a, W> {
    /// Per-head RMS norm weights of q and k (Qwen3), applied before the rotation.
    pub qk_norm: Option<[&'a W; 2]>,
    pub eps: f32,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub rope: &'a RopeSpec,
    pub layer: usize,
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
    /// A step's greedy token ids on their way to the host (`argmax_deferred`).
    type Ids: Send;

    fn name(&self) -> &'static str;
    /// Runs `f` (a whole forward pass) in the backend's execution context: the CPU backend runs
    /// it on its own thread pool so the ops inside fork and join without cross-pool wakeups.
    fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        f()
    }
    fn upload(&self, w: HostWeight) -> Result<Self::Weight, BackendError>;
    /// Uploads weights used together on the same input (a layer's Q, K and V; gate and up): a
    /// backend may store them back to back and run them as one matrix (see `linear_qkv`,
    /// `linear_swiglu`). `upload` of each by default.
    fn upload_group(&self, ws: Vec<HostWeight>) -> Result<Vec<Self::Weight>, BackendError> {
        ws.into_iter().map(|w| self.upload(w)).collect()
    }
    /// Which kernel path a weight uses, for the startup log.
    fn describe(&self, w: &Self::Weight) -> String;
    /// Which kernel runs the attention of long prefill chunks (GQA), for the startup log.
    fn describe_prefill_attention(&self) -> String;
    fn alloc_kv(&self, spec: KvCacheSpec) -> Result<Self::KvCache, BackendError>;

    /// Starts a forward pass over `batch`: stages its metadata for the ops below. Buffers from
    /// `buf` live until the next `begin_step`.
    fn begin_step(&self, batch: &ForwardBatch) -> Self::Step;
    /// `begin_step` for a step whose row i takes as its token row i of the last
    /// `argmax_deferred`'s ids, where they were computed (`batch.tokens` is ignored): a decode
    /// step can be queued before the host has read the tokens it consumes.
    fn begin_fed_step(&self, batch: &ForwardBatch) -> Self::Step;
    /// Lets decode steps run as captured graphs from now on (a GPU backend's CUDA graphs) and
    /// returns the batch sizes decode steps must then be padded to (`ForwardBatch::pad_decode`);
    /// empty when the backend has none. Only for callers whose forward passes read results back
    /// once, at the end (the model runner): a graph step defers its work until then.
    fn enable_decode_graphs(&self) -> &'static [usize] {
        &[]
    }
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
    /// residual[rows, w.rows] += x[rows, w.cols] * w^T: a projection straight into the residual
    /// stream (attention's output projection, the MLP's down projection), summed as `linear`
    /// followed by the add in `add_rms_norm` would be; what follows is then a plain `rms_norm`.
    fn linear_residual(
        &self,
        x: &Self::Buf,
        prefill: &[bool],
        w: &Self::Weight,
        residual: &mut Self::Buf,
    );
    /// The Q, K and V projections of one layer: `linear` for each of `ws` on the same `x`
    /// (a GPU backend reads x once and launches once).
    fn linear_qkv(
        &self,
        x: &Self::Buf,
        prefill: &[bool],
        ws: [&Self::Weight; 3],
        biases: Option<[&Self::Weight; 3]>,
        outs: [&mut Self::Buf; 3],
    ) {
        for (i, out) in outs.into_iter().enumerate() {
            self.linear(x, prefill, ws[i], biases.map(|b| b[i]), out);
        }
    }
    /// Two projections of the same `x`, without biases (a GPU backend reads x once and
    /// launches once).
    fn linear_pair(
        &self,
        x: &Self::Buf,
        prefill: &[bool],
        ws: [&Self::Weight; 2],
        outs: [&mut Self::Buf; 2],
    ) {
        for (w, out) in ws.into_iter().zip(outs) {
            self.linear(x, prefill, w, None, out);
        }
    }
    /// out = silu(x W_gate^T) * (x W_up^T): a SwiGLU MLP's first half.
    fn linear_swiglu(
        &self,
        x: &Self::Buf,
        prefill: &[bool],
        gate: &Self::Weight,
        up: &Self::Weight,
        out: &mut Self::Buf,
    ) {
        let (mut g, mut u) = (self.buf(0), self.buf(0));
        self.linear(x, prefill, gate, None, &mut g);
        self.linear(x, prefill, up, None, &mut u);
        self.silu_mul(&g, &u, out);
    }
    /// A layer's attention input and projections: `rms_norm(x, w, eps)` into `h`, then
    /// `linear_qkv` of `h` (x is the residual stream). A GPU backend may fold the norm into the
    /// projections' kernel (rounding differently from the two ops, but the same for a row
    /// alone and in a batch); `h` is scratch.
    fn norm_linear_qkv(
        &self,
        (x, w, eps): (&Self::Buf, &Self::Weight, f32),
        h: &mut Self::Buf,
        prefill: &[bool],
        ws: [&Self::Weight; 3],
        biases: Option<[&Self::Weight; 3]>,
        outs: [&mut Self::Buf; 3],
    ) {
        self.rms_norm(x, w, eps, h);
        self.linear_qkv(h, prefill, ws, biases, outs);
    }
    /// A dense MLP's input and first half: `rms_norm(x, w, eps)` into `h`, then `linear_swiglu`
    /// of `h` (folded as in `norm_linear_qkv`).
    fn norm_linear_swiglu(
        &self,
        (x, w, eps): (&Self::Buf, &Self::Weight, f32),
        h: &mut Self::Buf,
        prefill: &[bool],
        (gate, up): (&Self::Weight, &Self::Weight),
        out: &mut Self::Buf,
    ) {
        self.rms_norm(x, w, eps, h);
        self.linear_swiglu(h, prefill, gate, up, out);
    }
    /// Between a layer's projections and its attention: the optional q/k norms, rotary
    /// embedding of q and k in place, then k and v into the cache.
    fn rope_write_kv(
        &self,
        (q, k, v): (&mut Self::Buf, &mut Self::Buf, &Self::Buf),
        p: &RopeWrite<'_, Self::Weight>,
        cache: &mut Self::KvCache,
        step: &Self::Step,
    ) {
        if let Some([qn, kn]) = p.qk_norm {
            let mut normed = self.buf(0);
            self.rms_norm(q, qn, p.eps, &mut normed);
            std::mem::swap(q, &mut normed);
            self.rms_norm(k, kn, p.eps, &mut normed);
            std::mem::swap(k, &mut normed);
        }
        self.rope(q, step, p.n_heads, p.rope);
        self.rope(k, step, p.n_kv_heads, p.rope);
        self.write_kv(cache, p.layer, k, v, step);
    }
    /// A layer's attention from its projections: `rope_write_kv`, then `attention` of the
    /// rotated q into `out`. A backend may run both in one launch and leave q and k as they
    /// came: the caller reads only `out` and the cache after it.
    #[allow(clippy::too_many_arguments)]
    fn rope_attention(
        &self,
        (q, k, v): (&mut Self::Buf, &mut Self::Buf, &Self::Buf),
        p: &RopeWrite<'_, Self::Weight>,
        shape: AttnShape,
        cache: &mut Self::KvCache,
        step: &Self::Step,
        out: &mut Self::Buf,
    ) {
        self.rope_write_kv((q, k, v), p, cache, step);
        self.attention(cache, p.layer, q, shape, step, out);
    }
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
    /// A mixture-of-experts FFN: routes each row of `x` (`MoeRouting`), and writes the
    /// weighted sum of its experts' SwiGLU outputs plus the shared expert's into `out`.
    fn moe(
        &self,
        x: &Self::Buf,
        prefill: &[bool],
        layer: &MoeLayer<'_, Self::Weight>,
        out: &mut Self::Buf,
    );
    /// One matrix per head: `w` is `n_heads` matrices of `[n, k]` stacked (`[n_heads * n, k]`);
    /// `out[r, h*n..(h+1)*n] = x[r, h*k..(h+1)*k] . w_h^T` (MLA's absorbed projections).
    fn linear_heads(
        &self,
        x: &Self::Buf,
        prefill: &[bool],
        w: &Self::Weight,
        n_heads: usize,
        out: &mut Self::Buf,
    );
    /// MLA: writes each token's latent row `[latent | k_rope]` into a latent cache.
    fn write_latent(
        &self,
        cache: &mut Self::KvCache,
        layer: usize,
        latent: &Self::Buf,
        k_rope: &Self::Buf,
        step: &Self::Step,
    );
    /// MLA's per-token preparation: `latent = rms_norm(k, kv_norm)`, RoPE on `q_rope`
    /// (`n_heads` heads) and on `k_rope`, `write_latent`, and the absorbed query `q_latent =
    /// linear_heads(q_nope, w_uk)` (a GPU backend launches once for decode rows).
    #[allow(clippy::too_many_arguments)]
    fn mla_prep(
        &self,
        cache: &mut Self::KvCache,
        layer: usize,
        (k, kv_norm, eps): (&Self::Buf, &Self::Weight, f32),
        latent: &mut Self::Buf,
        (q_rope, k_rope): (&mut Self::Buf, &mut Self::Buf),
        (q_nope, w_uk, q_latent): (&Self::Buf, &Self::Weight, &mut Self::Buf),
        n_heads: usize,
        rope: &RopeSpec,
        prefill: &[bool],
        step: &Self::Step,
    ) {
        self.rms_norm(k, kv_norm, eps, latent);
        self.rope(q_rope, step, n_heads, rope);
        self.rope(k_rope, step, 1, rope);
        self.write_latent(cache, layer, latent, k_rope, step);
        self.linear_heads(q_nope, prefill, w_uk, n_heads, q_latent);
    }
    /// Causal MLA over the latent cache: per head, score = scale * (q_latent . c + q_rope .
    /// k_rope) over the cached rows `[c | k_rope]`, output = softmax-weighted sum of c.
    /// `q_latent` is `[tokens, n_heads * kv_lora_rank]`, `q_rope` `[tokens, n_heads *
    /// rope_dim]`, `out` `[tokens, n_heads * kv_lora_rank]`.
    #[allow(clippy::too_many_arguments)]
    fn mla_attention(
        &self,
        cache: &Self::KvCache,
        layer: usize,
        q_latent: &Self::Buf,
        q_rope: &Self::Buf,
        shape: MlaShape,
        step: &Self::Step,
        out: &mut Self::Buf,
    );
    /// `mla_attention` into `attn`, then `out = linear_heads(attn, w_uv)`: MLA's output by W_UV.
    /// A GPU backend may merge the attention's splits inside W_UV's launch for decode rows; what
    /// `attn` holds afterwards is then unspecified (it is scratch).
    #[allow(clippy::too_many_arguments)]
    fn mla_attention_uv(
        &self,
        cache: &Self::KvCache,
        layer: usize,
        (q_latent, q_rope): (&Self::Buf, &Self::Buf),
        shape: MlaShape,
        (step, prefill): (&Self::Step, &[bool]),
        w_uv: &Self::Weight,
        (attn, out): (&mut Self::Buf, &mut Self::Buf),
    ) {
        self.mla_attention(cache, layer, q_latent, q_rope, shape, step, attn);
        self.linear_heads(attn, prefill, w_uv, shape.n_heads, out);
    }
    /// The index of the largest value of each `cols`-long row of `x` (the first on ties): greedy
    /// sampling where the backend can do it without copying whole rows to the host.
    fn argmax_rows(&self, x: &Self::Buf, cols: usize) -> Vec<u32> {
        let ids = self.argmax_deferred(x, cols);
        self.read_ids(ids)
    }
    /// `argmax_rows` without waiting for the result: `read_ids` brings the ids to the host, and
    /// a step begun by `begin_fed_step` takes its tokens from them where they are. Each call
    /// overwrites the ids of the call two before it, so at most two may wait unread.
    fn argmax_deferred(&self, x: &Self::Buf, cols: usize) -> Self::Ids;
    /// Waits for `ids` and returns them.
    fn read_ids(&self, ids: Self::Ids) -> Vec<u32>;
    /// Samples a token from each `cols`-long row of `x` under `rows[i]` (see `sample`): where
    /// the backend can, without copying whole rows to the host.
    fn sample_rows(&self, x: &Self::Buf, cols: usize, rows: &[crate::SampleRow]) -> Vec<u32> {
        let ids = self.sample_rows_deferred(x, cols, rows);
        self.read_ids(ids)
    }
    /// `sample_rows` without waiting for the result, as `argmax_deferred` (and sharing its
    /// slots: a step begun by `begin_fed_step` takes the last of either's ids).
    fn sample_rows_deferred(
        &self,
        x: &Self::Buf,
        cols: usize,
        rows: &[crate::SampleRow],
    ) -> Self::Ids;
    /// Whether `sample_rows` runs on the device (so the engine prefers it to host sampling).
    fn samples_on_device(&self) -> bool {
        false
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

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(n: usize) -> ForwardBatch {
        ForwardBatch {
            tokens: (0..n as u32).map(|i| 10 + i).collect(),
            positions: vec![5; n],
            attn: AttnMetadata {
                seqs: (0..n)
                    .map(|i| SeqAttn {
                        query_start: i,
                        query_len: 1,
                        context_len: 6,
                        block_table: vec![i as u32],
                    })
                    .collect(),
                prefill: vec![false; n],
                slot_mapping: (0..n as u32).map(|i| i * 16 + 5).collect(),
            },
            logits_rows: (0..n).collect(),
        }
    }

    #[test]
    fn decode_steps_pad_to_the_next_size_with_inert_rows() {
        let mut b = decode(3);
        b.pad_decode(&[1, 2, 4, 8]);
        assert_eq!(b.tokens.len(), 4);
        assert_eq!(&b.tokens[..3], &[10, 11, 12]);
        assert_eq!(b.attn.slot_mapping[3], NO_SLOT);
        assert_eq!(b.attn.seqs[3].context_len, 0);
        assert_eq!(b.attn.seqs[3].query_start, 3);
        assert_eq!(b.logits_rows, vec![0, 1, 2, 3]);
        assert!(b.is_decode());
    }

    #[test]
    fn other_batches_and_exact_or_oversized_ones_stay() {
        let mut exact = decode(4);
        exact.pad_decode(&[1, 2, 4]);
        assert_eq!(exact, decode(4));
        let mut big = decode(9);
        big.pad_decode(&[1, 2, 4, 8]);
        assert_eq!(big, decode(9));
        // A prefill chunk (two tokens of one sequence) is not a decode step.
        let mut prefill = decode(2);
        prefill.attn.seqs = vec![SeqAttn {
            query_start: 0,
            query_len: 2,
            context_len: 2,
            block_table: vec![0],
        }];
        prefill.logits_rows = vec![1];
        let before = prefill.clone();
        prefill.pad_decode(&[4]);
        assert_eq!(prefill, before);
    }
}
