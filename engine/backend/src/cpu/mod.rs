//! The CPU backend: f32 activations, weights kept in their checkpoint format (GGML blocks are
//! dotted as integers, see `quant::dot`), a private rayon pool, a paged f32 KV cache.

mod attention;
mod linear;
mod mla;
mod moe;

use rayon::prelude::*;

use crate::ops::{AttnShape, Backend, ForwardBatch, KvCacheSpec, MlaShape, MoeLayer, RopeSpec};
use crate::quant::{repack_q4, repack_q8, Q4Planes, Q8Planes};
use crate::{BackendError, GgmlType, HostWeight, WeightData};

/// A weight laid out for the CPU kernels.
#[derive(Debug)]
pub enum CpuWeight {
    F32 {
        rows: usize,
        cols: usize,
        data: Vec<f32>,
    },
    /// Q4_0 / Q4_1, repacked; `ty` is kept for logs.
    Q4 {
        rows: usize,
        cols: usize,
        ty: GgmlType,
        planes: Q4Planes,
    },
    /// Q8_0, repacked.
    Q8 {
        rows: usize,
        cols: usize,
        planes: Q8Planes,
    },
    /// K-quants: dequantized a row at a time.
    Ggml {
        rows: usize,
        cols: usize,
        ty: GgmlType,
        bytes: Vec<u8>,
    },
}

impl CpuWeight {
    pub fn rows(&self) -> usize {
        match self {
            CpuWeight::F32 { rows, .. }
            | CpuWeight::Q4 { rows, .. }
            | CpuWeight::Q8 { rows, .. }
            | CpuWeight::Ggml { rows, .. } => *rows,
        }
    }

    pub fn cols(&self) -> usize {
        match self {
            CpuWeight::F32 { cols, .. }
            | CpuWeight::Q4 { cols, .. }
            | CpuWeight::Q8 { cols, .. }
            | CpuWeight::Ggml { cols, .. } => *cols,
        }
    }

    /// Row `r` as f32 (embedding lookups).
    fn row_f32(&self, r: usize, out: &mut [f32]) {
        let cols = self.cols();
        match self {
            CpuWeight::F32 { data, .. } => out.copy_from_slice(&data[r * cols..(r + 1) * cols]),
            CpuWeight::Q4 { planes, .. } => planes.dequantize_row(r, out),
            CpuWeight::Q8 { planes, .. } => planes.dequantize_row(r, out),
            CpuWeight::Ggml { ty, bytes, .. } => {
                let rb = ty.bytes_for(cols);
                crate::quant::dequantize_row(*ty, &bytes[r * rb..(r + 1) * rb], out);
            }
        }
    }

    /// Dense values of a 1-D weight (norms, biases), dequantizing if needed.
    fn dense(&self) -> std::borrow::Cow<'_, [f32]> {
        match self {
            CpuWeight::F32 { data, .. } => std::borrow::Cow::Borrowed(data),
            _ => {
                let (rows, cols) = (self.rows(), self.cols());
                let mut out = vec![0f32; rows * cols];
                for (r, o) in out.chunks_exact_mut(cols).enumerate() {
                    self.row_f32(r, o);
                }
                std::borrow::Cow::Owned(out)
            }
        }
    }
}

/// Paged KV cache, f32, laid out `[layer][block][slot][kv_head][head_dim]`.
#[derive(Debug)]
pub struct CpuKvCache {
    spec: KvCacheSpec,
    k: Vec<f32>,
    v: Vec<f32>,
}

impl CpuKvCache {
    fn offset(&self, layer: usize, slot: usize) -> usize {
        let s = &self.spec;
        (layer * s.num_blocks * s.block_size + slot) * s.num_kv_heads * s.head_dim
    }
}

pub struct CpuBackend {
    pool: rayon::ThreadPool,
    threads: usize,
    /// The last deferred argmax's or sample's ids, the tokens of a step begun by
    /// `begin_fed_step`.
    last_ids: std::sync::Mutex<Vec<u32>>,
}

impl std::fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuBackend")
            .field("threads", &self.threads)
            .finish()
    }
}

impl CpuBackend {
    /// A backend with `threads` workers (0 = one per available core).
    pub fn new(threads: usize) -> Result<Self, BackendError> {
        let threads = if threads == 0 {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        } else {
            threads
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("hearth-cpu-{i}"))
            .build()
            .map_err(|e| BackendError::Unsupported {
                backend: "cpu",
                what: format!("a pool of {threads} threads: {e}"),
            })?;
        Ok(CpuBackend {
            pool,
            threads,
            last_ids: Default::default(),
        })
    }

    pub fn threads(&self) -> usize {
        self.threads
    }
}

fn rms_norm_row(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let ss: f32 = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    let inv = 1.0 / (ss + eps).sqrt();
    for ((o, &xv), &wv) in out.iter_mut().zip(x).zip(w) {
        *o = xv * inv * wv;
    }
}

impl Backend for CpuBackend {
    type Weight = CpuWeight;
    type Buf = Vec<f32>;
    type KvCache = CpuKvCache;
    type Step = ForwardBatch;
    /// Computed at once: the host is where they are.
    type Ids = Vec<u32>;

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.pool.install(f)
    }

    fn upload(&self, w: HostWeight) -> Result<CpuWeight, BackendError> {
        let (rows, cols) = (w.rows(), w.cols());
        let bad = |message: String| BackendError::Weight {
            name: w.name.clone(),
            message,
        };
        match w.data {
            WeightData::F32(data) => {
                if data.len() != rows * cols {
                    return Err(bad(format!(
                        "{} values for shape {:?}",
                        data.len(),
                        w.shape
                    )));
                }
                Ok(CpuWeight::F32 { rows, cols, data })
            }
            WeightData::Fp8 { bytes, scales } => {
                if bytes.len() != rows * cols || scales.len() != rows {
                    return Err(bad(format!(
                        "{} fp8 values and {} scales for shape {:?}",
                        bytes.len(),
                        scales.len(),
                        w.shape
                    )));
                }
                let data = crate::quant::fp8::dequantize_rows(&bytes, &scales, cols);
                Ok(CpuWeight::F32 { rows, cols, data })
            }
            WeightData::Ggml { ty, bytes } => {
                if cols % ty.block_elems() != 0 || bytes.len() != rows * ty.bytes_for(cols) {
                    return Err(bad(format!(
                        "{} bytes of {} do not fit shape {:?}",
                        bytes.len(),
                        ty.name(),
                        w.shape
                    )));
                }
                Ok(match ty {
                    GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => {
                        let mut data = vec![0f32; rows * cols];
                        crate::quant::dequantize_row(ty, &bytes, &mut data);
                        CpuWeight::F32 { rows, cols, data }
                    }
                    GgmlType::Q4_0 | GgmlType::Q4_1 => CpuWeight::Q4 {
                        rows,
                        cols,
                        ty,
                        planes: repack_q4(ty, &bytes, cols),
                    },
                    GgmlType::Q8_0 => CpuWeight::Q8 {
                        rows,
                        cols,
                        planes: repack_q8(&bytes, cols),
                    },
                    _ => CpuWeight::Ggml {
                        rows,
                        cols,
                        ty,
                        bytes: bytes.to_vec(),
                    },
                })
            }
        }
    }

    fn describe_prefill_attention(&self) -> String {
        "paged attention in f32 (simd)".into()
    }

    fn describe(&self, w: &CpuWeight) -> String {
        match w {
            CpuWeight::F32 { .. } => "f32 dot (simd)".into(),
            CpuWeight::Q4 { ty, .. } => format!("{} x q16 integer dot (simd)", ty.name()),
            CpuWeight::Q8 { .. } => "Q8_0 x q16 integer dot (simd)".into(),
            CpuWeight::Ggml { ty, .. } => format!("{} dequantize-row + f32 dot", ty.name()),
        }
    }

    fn alloc_kv(&self, spec: KvCacheSpec) -> Result<CpuKvCache, BackendError> {
        let n =
            spec.num_layers * spec.num_blocks * spec.block_size * spec.num_kv_heads * spec.head_dim;
        let nv = if spec.latent { 0 } else { n };
        let mut k = Vec::new();
        let mut v = Vec::new();
        k.try_reserve_exact(n)
            .and_then(|_| v.try_reserve_exact(nv))
            .map_err(|_| BackendError::OutOfMemory(format!("KV cache of {n} + {nv} f32")))?;
        k.resize(n, 0.0);
        v.resize(nv, 0.0);
        Ok(CpuKvCache { spec, k, v })
    }

    fn begin_step(&self, batch: &ForwardBatch) -> ForwardBatch {
        batch.clone()
    }

    fn begin_fed_step(&self, batch: &ForwardBatch) -> ForwardBatch {
        let last = self.last_ids.lock().unwrap_or_else(|p| p.into_inner());
        assert!(
            last.len() >= batch.tokens.len(),
            "a fed step of {} rows after greedy ids of {}",
            batch.tokens.len(),
            last.len()
        );
        let mut step = batch.clone();
        let n = step.tokens.len();
        step.tokens.copy_from_slice(&last[..n]);
        step
    }

    fn argmax_deferred(&self, x: &Vec<f32>, cols: usize) -> Vec<u32> {
        let ids: Vec<u32> = x
            .chunks_exact(cols.max(1))
            .map(crate::ops::argmax)
            .collect();
        ids.clone_into(&mut self.last_ids.lock().unwrap_or_else(|p| p.into_inner()));
        ids
    }

    fn sample_rows_deferred(
        &self,
        x: &Vec<f32>,
        cols: usize,
        rows: &[crate::SampleRow],
    ) -> Vec<u32> {
        let ids: Vec<u32> = x
            .chunks_exact(cols.max(1))
            .zip(rows)
            .map(|(r, p)| crate::sample::sample_row(r, p))
            .collect();
        ids.clone_into(&mut self.last_ids.lock().unwrap_or_else(|p| p.into_inner()));
        ids
    }

    fn read_ids(&self, ids: Vec<u32>) -> Vec<u32> {
        ids
    }

    fn buf(&self, len: usize) -> Vec<f32> {
        vec![0.0; len]
    }

    fn to_host(&self, x: &Vec<f32>) -> Vec<f32> {
        x.clone()
    }

    fn embedding(&self, table: &CpuWeight, step: &ForwardBatch, out: &mut Vec<f32>) {
        let ids = &step.tokens;
        let cols = table.cols();
        out.resize(ids.len() * cols, 0.0);
        for (row, &id) in out.chunks_exact_mut(cols).zip(ids) {
            table.row_f32(id as usize, row);
        }
    }

    fn linear(
        &self,
        x: &Vec<f32>,
        prefill: &[bool],
        w: &CpuWeight,
        bias: Option<&CpuWeight>,
        out: &mut Vec<f32>,
    ) {
        self.pool.install(|| linear::linear(x, prefill, w, out));
        if let Some(b) = bias {
            let b = b.dense();
            for row in out.chunks_exact_mut(b.len()) {
                for (o, bv) in row.iter_mut().zip(b.iter()) {
                    *o += bv;
                }
            }
        }
    }

    fn linear_residual(
        &self,
        x: &Vec<f32>,
        prefill: &[bool],
        w: &CpuWeight,
        residual: &mut Vec<f32>,
    ) {
        let mut y = Vec::new();
        self.linear(x, prefill, w, None, &mut y);
        assert_eq!(y.len(), residual.len(), "the residual holds every row");
        for (r, v) in residual.iter_mut().zip(&y) {
            *r += v;
        }
    }

    fn rms_norm(&self, x: &Vec<f32>, w: &CpuWeight, eps: f32, out: &mut Vec<f32>) {
        let w = w.dense();
        out.resize(x.len(), 0.0);
        for (xr, or) in x.chunks_exact(w.len()).zip(out.chunks_exact_mut(w.len())) {
            rms_norm_row(xr, &w, eps, or);
        }
    }

    fn add_rms_norm(
        &self,
        residual: &mut Vec<f32>,
        x: &Vec<f32>,
        w: &CpuWeight,
        eps: f32,
        out: &mut Vec<f32>,
    ) {
        for (r, v) in residual.iter_mut().zip(x) {
            *r += v;
        }
        self.rms_norm(residual, w, eps, out);
    }

    fn rope(&self, x: &mut Vec<f32>, step: &ForwardBatch, n_heads: usize, rope: &RopeSpec) {
        let positions = &step.positions;
        let inv_freq = &rope.inv_freq;
        let hd = rope.head_dim;
        let half = rope.rotary_dim / 2;
        let row_len = n_heads * hd;
        let mut cos = vec![0f32; half];
        let mut sin = vec![0f32; half];
        for (row, &pos) in x.chunks_exact_mut(row_len).zip(positions) {
            for i in 0..half {
                let (s, c) = (pos as f32 * inv_freq[i]).sin_cos();
                cos[i] = c;
                sin[i] = s;
            }
            for head in row.chunks_exact_mut(hd) {
                for i in 0..half {
                    let (a, b) = if rope.neox {
                        (i, i + half)
                    } else {
                        (2 * i, 2 * i + 1)
                    };
                    let (x0, x1) = (head[a], head[b]);
                    head[a] = x0 * cos[i] - x1 * sin[i];
                    head[b] = x1 * cos[i] + x0 * sin[i];
                }
            }
        }
    }

    fn silu_mul(&self, gate: &Vec<f32>, up: &Vec<f32>, out: &mut Vec<f32>) {
        out.resize(gate.len(), 0.0);
        for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
            *o = g / (1.0 + (-g).exp()) * u;
        }
    }

    fn write_kv(
        &self,
        cache: &mut CpuKvCache,
        layer: usize,
        k: &Vec<f32>,
        v: &Vec<f32>,
        step: &ForwardBatch,
    ) {
        let slot_mapping = &step.attn.slot_mapping;
        let row = cache.spec.num_kv_heads * cache.spec.head_dim;
        for (t, &slot) in slot_mapping.iter().enumerate() {
            let off = cache.offset(layer, slot as usize);
            cache.k[off..off + row].copy_from_slice(&k[t * row..(t + 1) * row]);
            cache.v[off..off + row].copy_from_slice(&v[t * row..(t + 1) * row]);
        }
    }

    fn attention(
        &self,
        cache: &CpuKvCache,
        layer: usize,
        q: &Vec<f32>,
        shape: AttnShape,
        step: &ForwardBatch,
        out: &mut Vec<f32>,
    ) {
        self.pool
            .install(|| attention::paged_attention(cache, layer, q, shape, &step.attn, out));
    }

    fn moe(
        &self,
        x: &Vec<f32>,
        prefill: &[bool],
        layer: &MoeLayer<'_, CpuWeight>,
        out: &mut Vec<f32>,
    ) {
        moe::moe(self, x, prefill, layer, out);
    }

    fn linear_heads(
        &self,
        x: &Vec<f32>,
        prefill: &[bool],
        w: &CpuWeight,
        n_heads: usize,
        out: &mut Vec<f32>,
    ) {
        self.pool
            .install(|| moe::linear_heads(x, prefill.len(), w, n_heads, out));
    }

    fn write_latent(
        &self,
        cache: &mut CpuKvCache,
        layer: usize,
        latent: &Vec<f32>,
        k_rope: &Vec<f32>,
        step: &ForwardBatch,
    ) {
        mla::write_latent(cache, layer, latent, k_rope, &step.attn.slot_mapping);
    }

    fn mla_attention(
        &self,
        cache: &CpuKvCache,
        layer: usize,
        q_latent: &Vec<f32>,
        q_rope: &Vec<f32>,
        shape: MlaShape,
        step: &ForwardBatch,
        out: &mut Vec<f32>,
    ) {
        self.pool
            .install(|| mla::attention(cache, layer, (q_latent, q_rope), shape, &step.attn, out));
    }

    fn gather_logits_rows(
        &self,
        x: &Vec<f32>,
        cols: usize,
        step: &ForwardBatch,
        out: &mut Vec<f32>,
    ) {
        let rows = &step.logits_rows;
        out.clear();
        for &r in rows {
            out.extend_from_slice(&x[r * cols..(r + 1) * cols]);
        }
    }
}

/// An output pointer shared by parallel tasks that write disjoint parts of one buffer (GEMM
/// panels, attention heads). Whoever creates one states why the parts are disjoint.
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: every user writes only its own disjoint part of the buffer (see each call site), so
// sending the pointer to another thread cannot create a data race.
unsafe impl Send for OutPtr {}
// SAFETY: as above; the pointer itself is only copied.
unsafe impl Sync for OutPtr {}

impl OutPtr {
    /// Taking `self` makes closures capture the whole (Send) wrapper, not the raw field.
    fn get(self) -> *mut f32 {
        self.0
    }
}

/// Adds `b` into `a` elementwise (residual connections outside fused ops).
pub fn add_inplace(a: &mut [f32], b: &[f32]) {
    a.par_iter_mut()
        .zip(b.par_iter())
        .for_each(|(x, y)| *x += y);
}
