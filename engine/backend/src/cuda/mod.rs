//! The CUDA backend: bf16 weights in device memory (`weights`), activations in a per-step arena
//! (`buffers`, `arena`), a bf16 or fp8 paged KV cache, our kernels (hearth-kernels' fatbin,
//! loaded once; launchers in `kernels`) for every op but the large GEMMs, which go to cuBLASLt
//! (`gemm`, with its fixed buffers in `scratch`); the larger ops live in `linear`, `attention`
//! and `moe` (MoE and MLA). Libraries are loaded at run time (cudarc
//! dynamic loading), so the same binary runs on machines without a GPU; `CudaBackend::probe`
//! (in `device`, with the backend's construction and memory facts) says whether one is usable.
//!
//! Row kinds: rows of a `linear` with at most `gemv_rows` rows (`GEMV_ROWS` in `device`) take the
//! GEMV kernels, whose per-row arithmetic does not depend on the row count; larger batches take
//! the matmuls (cuBLASLt, gemm_fp8).
//!
//! Decode steps of the sizes in `DECODE_BATCH_SIZES` run as CUDA graphs (see `graph`);
//! HEARTH_CUDA_GRAPHS=0 turns them off.

mod arena;
mod attention;
mod buffers;
mod device;
mod gemm;
mod graph;
mod ids;
mod kernels;
mod linear;
mod moe;
mod scratch;
mod step;
mod upload;
mod weights;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use half::bf16;

use crate::ops::{
    AttnShape, Backend, ForwardBatch, KvCacheSpec, MlaShape, MoeLayer, RopeSpec, RopeWrite,
};
use crate::{BackendError, HostWeight};
use arena::Arena;
pub use buffers::{CudaBuf, CudaKvCache};
pub use device::CudaDeviceInfo;
use gemm::{Fp8Scales, Gemm};
pub use graph::DECODE_BATCH_SIZES;
use graph::{DecodeGraphs, Mode};
use kernels::{Kernels, RopeShape};
pub use step::CudaStep;
pub use weights::CudaWeight;

/// What the backend mutates while running ops on its one stream.
struct State {
    arena: Arena,
    gemm: Gemm,
    step: step::Staging,
    /// bf16 copy of a GEMM's input rows.
    scratch: Option<(CudaSlice<u8>, u64)>,
    /// A fused GEMM's output (Q/K/V, gate/up) before the next kernel splits or combines it.
    fused: Option<(CudaSlice<u8>, u64)>,
    /// An fp8 matrix dequantized to bf16 for cuBLASLt (`bf16_weights`).
    dequant: Option<(CudaSlice<u8>, u64)>,
    /// gemm_fp8's partial sums where it splits K (`fp8_parts`).
    fp8_parts: Option<(CudaSlice<u8>, u64)>,
    /// Pinned staging for weight uploads, made on the first upload.
    uploader: Option<upload::Uploader>,
    /// The decode attention kernel's split buffer.
    attn_parts: Option<(CudaSlice<u8>, u64)>,
    /// A MoE layer's router logits, routes, expert activations and shared expert output.
    moe: Option<(CudaSlice<u8>, u64)>,
    /// The grouped (prefill) MoE path's routes, gathered rows and expert outputs.
    moe_grouped: Option<(CudaSlice<u8>, u64)>,
    /// MLA's GEMM path: gathered latent rows, packed queries, scores and probabilities.
    mla: Option<(CudaSlice<u8>, u64)>,
    /// MLA's per-row kernel's split partials.
    mla_parts: Option<(CudaSlice<u8>, u64)>,
    graphs: DecodeGraphs,
    /// Greedy ids on their way to the host.
    ids: ids::IdSlots,
    /// Bumped when a fixed buffer a graph may have captured moves (scratch, split buffer,
    /// graph staging) or a new KV cache is allocated; with the arena's moves, the graphs' epoch.
    moves: u64,
}

impl State {
    fn epoch(&self) -> u64 {
        self.moves + self.arena.moves()
    }
}

pub struct CudaBackend {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    kernels: Kernels,
    device_name: String,
    /// How fp8 matrices past `w8a8_after` rows run as W8A8 on cuBLASLt (`Gemm::w8a8`), or None
    /// where they keep gemm_fp8 up to FP8_GEMM_MAX_ROWS and are dequantized to bf16 past it.
    w8a8: Option<Fp8Scales>,
    /// Rows past which W8A8 runs, where it does (see device.rs).
    w8a8_after: usize,
    /// Rows up to which decode matmuls take the GEMV kernels (see device.rs).
    gemv_rows: usize,
    /// `Gemm::w8a8_path`, for the startup log.
    w8a8_path: String,
    // The Backend trait's ops take &self (models share one backend); the engine thread is the
    // only caller, so this lock is never contended. It guards the arena, staging and cuBLASLt.
    state: Mutex<State>,
    /// Whether decode steps may run as CUDA graphs (not while profiling or when
    /// HEARTH_CUDA_GRAPHS=0), and whether the runtime turned them on.
    graphs_allowed: bool,
    graphs: std::sync::atomic::AtomicBool,
    /// Per-op (calls, seconds) when HEARTH_CUDA_PROFILE=1 (each op then synchronizes, so only
    /// the split is meaningful, not the total); printed to stderr when the backend is dropped.
    profile: Option<Mutex<HashMap<&'static str, (u64, f64)>>>,
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        let Some(p) = &self.profile else { return };
        let p = p.lock().unwrap_or_else(|e| e.into_inner());
        let total: f64 = p.values().map(|v| v.1).sum();
        let mut rows: Vec<_> = p.iter().collect();
        rows.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
        eprintln!("HEARTH_CUDA_PROFILE: {total:.3} s in ops");
        for (op, (n, secs)) in rows {
            eprintln!(
                "  {op:<20} {n:>9} calls {secs:>9.3} s {:>5.1}%",
                100.0 * secs / total.max(1e-12)
            );
        }
    }
}

impl CudaBackend {
    /// The size of a decode graph step this batch is, if graphs are on and it is one.
    fn graph_size(&self, b: &ForwardBatch) -> Option<usize> {
        let n = b.tokens.len();
        let on = self.graphs.load(std::sync::atomic::Ordering::Relaxed);
        (on && DECODE_BATCH_SIZES.contains(&n) && b.is_decode()).then_some(n)
    }

    /// Queues the current step's graph (ending its capture first) before its results are read.
    fn flush_graph(&self) {
        let mut st = self.state();
        self.kernels
            .skip
            .store(false, std::sync::atomic::Ordering::Relaxed);
        self.kernels
            .capturing
            .store(false, std::sync::atomic::Ordering::Relaxed);
        let r = self
            .kernels
            .ring_record(false)
            .and_then(|_| st.graphs.flush(&self.stream));
        drop(st);
        self.check("decode graph", r);
    }

    /// `begin_step`, or with `fed` `begin_fed_step`.
    fn begin(&self, batch: &ForwardBatch, fed: bool) -> CudaStep {
        // A step that never read its results back (a panic mid-forward) ends its graph here.
        self.flush_graph();
        let mut st = self.state();
        self.check("arena reset", st.arena.reset());
        self.check(
            "bind context",
            self.ctx.bind_to_thread().map_err(Into::into),
        );
        let size = self.graph_size(batch);
        let (step, moved) = st
            .step
            .stage(&self.stream, batch, size.is_some())
            .unwrap_or_else(|e| panic!("CUDA step metadata upload: {e}"));
        st.moves += u64::from(moved);
        if fed {
            // Queued after the metadata upload and before the capture below begins: a graph
            // does not hold this copy, whose source is wherever the last ids went.
            let (src, rows) = st.ids.last().expect("a fed step follows argmax_deferred");
            assert!(
                rows >= step.n_tokens,
                "a fed step of {} rows after greedy ids of {rows}",
                step.n_tokens
            );
            // SAFETY: both are device buffers of at least n_tokens u32 (the last ids' slot, the
            // step's token section); the copy runs in stream order.
            let r = unsafe {
                cudarc::driver::result::memcpy_dtod_async(
                    step.tokens,
                    src,
                    4 * step.n_tokens,
                    self.stream.cu_stream(),
                )
            };
            self.check("feeding the last greedy ids", r.map_err(Into::into));
        }
        if let Some(n) = size {
            let epoch = st.epoch();
            let long = n == 1 && attention::long_row(&step);
            let mode = st.graphs.begin(&self.stream, (n, long), epoch);
            let mode = mode.unwrap_or_else(|e| panic!("CUDA decode graph of {n} rows: {e}"));
            self.kernels.skip.store(
                matches!(mode, Mode::Replay(_)),
                std::sync::atomic::Ordering::Relaxed,
            );
            self.kernels.capturing.store(
                matches!(mode, Mode::Capture(_)),
                std::sync::atomic::Ordering::Relaxed,
            );
            // The weight ring runs one-row decodes: recorded into the graph of size 1.
            let r = self
                .kernels
                .ring_record(matches!(mode, Mode::Capture((1, _))));
            self.check("decode ring", r);
        }
        step
    }

    /// Queues `rows` token ids, written by `fill` to the device address it is given after the
    /// step's graph is launched, and their copy to the host (`Backend::argmax_deferred`,
    /// `sample_rows_deferred`; `op` names it for the profile and errors).
    fn defer_ids(
        &self,
        op: &'static str,
        rows: usize,
        fill: impl FnOnce(u64) -> Result<(), BackendError>,
    ) -> ids::CudaIds {
        self.flush_graph();
        let t0 = self.prof_begin();
        let ids = self.state().ids.write(&self.ctx, &self.stream, rows, fill);
        match ids {
            Ok(ids) => {
                self.finish(op, t0, Ok(()));
                ids
            }
            Err(e) => panic!("CUDA {op}: {e}"),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn dptr<T>(&self, s: &CudaSlice<T>) -> u64 {
        s.device_ptr(&self.stream).0
    }

    /// Makes `out` hold `len` f32, from the arena when it is too small.
    fn ensure(&self, out: &mut CudaBuf, len: usize) {
        self.ensure_as(out, len, false);
    }

    /// Makes `out` hold `len` values of bf16 (`bf16`) or f32, from the arena when too small.
    fn ensure_as(&self, out: &mut CudaBuf, len: usize, bf16: bool) {
        let bytes = len * if bf16 { 2 } else { 4 };
        if bytes > out.cap {
            *out = self.alloc_buf(len);
        }
        out.len = len;
        out.bf16 = bf16;
    }

    /// `len` f32 from the arena.
    fn alloc_buf(&self, len: usize) -> CudaBuf {
        let ptr = self.state().arena.alloc(len * 4).unwrap_or_else(|e| {
            panic!("activation arena: {e} (the memory plan reserved too little)")
        });
        CudaBuf {
            ptr,
            len,
            cap: len * 4,
            bf16: false,
        }
    }

    /// An activation buffer holding `values`, valid until the next step (tests and tools; the
    /// engine's buffers are written by ops).
    pub fn buf_from_host(&self, values: &[f32]) -> CudaBuf {
        self.flush_graph();
        let b = self.alloc_buf(values.len());
        // SAFETY: b was just allocated for values.len() f32; the copy completes before the
        // synchronize returns.
        let r = unsafe {
            cudarc::driver::result::memcpy_htod_async(b.ptr, values, self.stream.cu_stream())
        }
        .map_err(BackendError::from)
        .and_then(|_| self.synchronize());
        self.check("copy to device", r);
        b
    }

    fn copy_to_host<T: cudarc::driver::DeviceRepr>(
        &self,
        src: u64,
        dst: &mut [T],
    ) -> Result<(), BackendError> {
        // SAFETY: src is an arena address holding at least dst.len() values of T written by
        // earlier launches on this stream; the copy is synchronous with respect to the host.
        unsafe {
            cudarc::driver::result::memcpy_dtoh_async(dst, src, self.stream.cu_stream())?;
        }
        self.stream.synchronize()?;
        Ok(())
    }

    /// Copies `src` to device address `dst` on the stream (pageable: staged before return).
    fn copy_to_device_async<T: cudarc::driver::DeviceRepr>(
        &self,
        dst: u64,
        src: &[T],
    ) -> Result<(), BackendError> {
        self.kernels.ring_flush()?;
        // SAFETY: dst is a fixed buffer holding at least src.len() values of T (carved by the
        // caller); pageable host memory is staged by the driver before the call returns.
        unsafe { cudarc::driver::result::memcpy_htod_async(dst, src, self.stream.cu_stream()) }?;
        Ok(())
    }

    fn check(&self, what: &str, r: Result<(), BackendError>) {
        if let Err(e) = r {
            panic!("CUDA {what}: {e}");
        }
    }

    /// With HEARTH_CUDA_PROFILE=1: waits for the GPU to be idle and starts the op's clock.
    fn prof_begin(&self) -> Option<Instant> {
        self.profile.as_ref().map(|_| {
            let _ = self.stream.synchronize();
            Instant::now()
        })
    }

    /// Checks an op's launch result; when profiling, waits for it and adds its time.
    fn finish(&self, op: &'static str, t0: Option<Instant>, r: Result<(), BackendError>) {
        self.check(op, r);
        if let (Some(t0), Some(p)) = (t0, &self.profile) {
            let _ = self.stream.synchronize();
            let mut p = p.lock().unwrap_or_else(|e| e.into_inner());
            let e = p.entry(op).or_default();
            e.0 += 1;
            e.1 += t0.elapsed().as_secs_f64();
        }
    }
}

impl Backend for CudaBackend {
    type Weight = CudaWeight;
    type Buf = CudaBuf;
    type KvCache = CudaKvCache;
    type Step = CudaStep;
    type Ids = ids::CudaIds;

    fn name(&self) -> &'static str {
        "cuda"
    }

    fn upload(&self, w: HostWeight) -> Result<CudaWeight, BackendError> {
        if w.shape.len() == 1 {
            self.upload_vector(&w)
        } else {
            let mut m = self.upload_matrices(std::slice::from_ref(&w))?;
            Ok(m.pop().expect("one matrix in, one out"))
        }
    }

    fn upload_group(&self, ws: Vec<HostWeight>) -> Result<Vec<CudaWeight>, BackendError> {
        let cols = ws.first().map(|w| w.cols());
        if ws
            .iter()
            .all(|w| w.shape.len() == 2 && Some(w.cols()) == cols)
        {
            self.upload_matrices(&ws)
        } else {
            ws.into_iter().map(|w| self.upload(w)).collect()
        }
    }

    fn describe(&self, w: &CudaWeight) -> String {
        self.weight_path(w)
    }

    fn describe_prefill_attention(&self) -> String {
        self.kernels.prefill_attention_kernel().into()
    }

    fn alloc_kv(&self, spec: KvCacheSpec) -> Result<CudaKvCache, BackendError> {
        let n = spec.num_layers
            * spec.num_blocks
            * spec.block_size
            * spec.num_kv_heads
            * spec.head_dim
            * spec.dtype.bytes();
        let k = self.stream.alloc_zeros::<u8>(n)?;
        // A latent cache (MLA) has no separate values.
        let v = self
            .stream
            .alloc_zeros::<u8>(if spec.latent { 1 } else { n })?;
        let (kp, vp) = (self.dptr(&k), self.dptr(&v));
        self.state().moves += 1;
        Ok(CudaKvCache {
            spec,
            _k: k,
            _v: v,
            k: kp,
            v: vp,
        })
    }

    fn begin_step(&self, batch: &ForwardBatch) -> CudaStep {
        self.begin(batch, false)
    }

    fn begin_fed_step(&self, batch: &ForwardBatch) -> CudaStep {
        self.begin(batch, true)
    }

    fn enable_decode_graphs(&self) -> &'static [usize] {
        if !self.graphs_allowed {
            return &[];
        }
        self.graphs
            .store(true, std::sync::atomic::Ordering::Relaxed);
        DECODE_BATCH_SIZES
    }

    fn buf(&self, len: usize) -> CudaBuf {
        self.alloc_buf(len)
    }

    fn to_host(&self, x: &CudaBuf) -> Vec<f32> {
        self.flush_graph();
        let t0 = self.prof_begin();
        let (out, r) = if x.bf16 {
            let mut raw = vec![0u16; x.len];
            let r = self.copy_to_host(x.ptr, &mut raw);
            (
                raw.into_iter()
                    .map(|b| bf16::from_bits(b).to_f32())
                    .collect(),
                r,
            )
        } else {
            let mut out = vec![0f32; x.len];
            let r = self.copy_to_host(x.ptr, &mut out);
            (out, r)
        };
        self.finish("copy to host", t0, r);
        out
    }

    fn embedding(&self, table: &CudaWeight, step: &CudaStep, out: &mut CudaBuf) {
        let t0 = self.prof_begin();
        let CudaWeight::Matrix { cols, .. } = table else {
            panic!("embedding table must be a matrix");
        };
        self.ensure(out, step.n_tokens * cols);
        let r = self
            .kernels
            .embedding(table.ptr(), step.tokens, out.ptr, step.n_tokens, *cols);
        self.finish("embedding", t0, r);
    }

    fn linear(
        &self,
        x: &CudaBuf,
        prefill: &[bool],
        w: &CudaWeight,
        bias: Option<&CudaWeight>,
        out: &mut CudaBuf,
    ) {
        self.linear_op(x, prefill, w, bias, out);
    }

    fn linear_residual(
        &self,
        x: &CudaBuf,
        prefill: &[bool],
        w: &CudaWeight,
        residual: &mut CudaBuf,
    ) {
        self.linear_residual_op(x, prefill, w, residual);
    }

    fn linear_qkv(
        &self,
        x: &CudaBuf,
        prefill: &[bool],
        ws: [&CudaWeight; 3],
        biases: Option<[&CudaWeight; 3]>,
        outs: [&mut CudaBuf; 3],
    ) {
        self.linear_qkv_op(x, prefill, ws, biases, outs);
    }

    fn linear_pair(
        &self,
        x: &CudaBuf,
        prefill: &[bool],
        ws: [&CudaWeight; 2],
        outs: [&mut CudaBuf; 2],
    ) {
        self.linear_pair_op(x, prefill, ws, outs);
    }

    fn linear_swiglu(
        &self,
        x: &CudaBuf,
        prefill: &[bool],
        gate: &CudaWeight,
        up: &CudaWeight,
        out: &mut CudaBuf,
    ) {
        self.linear_swiglu_op(x, prefill, gate, up, out);
    }

    fn norm_linear_qkv(
        &self,
        norm: (&CudaBuf, &CudaWeight, f32),
        h: &mut CudaBuf,
        prefill: &[bool],
        ws: [&CudaWeight; 3],
        biases: Option<[&CudaWeight; 3]>,
        outs: [&mut CudaBuf; 3],
    ) {
        self.norm_linear_qkv_op(norm, h, prefill, ws, biases, outs);
    }

    fn norm_linear_swiglu(
        &self,
        norm: (&CudaBuf, &CudaWeight, f32),
        h: &mut CudaBuf,
        prefill: &[bool],
        gate_up: (&CudaWeight, &CudaWeight),
        out: &mut CudaBuf,
    ) {
        self.norm_linear_swiglu_op(norm, h, prefill, gate_up, out);
    }

    fn rope_write_kv(
        &self,
        (q, k, v): (&mut CudaBuf, &mut CudaBuf, &CudaBuf),
        p: &RopeWrite<'_, CudaWeight>,
        cache: &mut CudaKvCache,
        step: &CudaStep,
    ) {
        let t0 = self.prof_begin();
        let r = self
            .rope_launch((q, k, v), p, cache, step)
            .and_then(|a| self.kernels.rope_write_kv(&a));
        self.finish("rope_write_kv", t0, r);
    }

    fn rope_attention(
        &self,
        qkv: (&mut CudaBuf, &mut CudaBuf, &CudaBuf),
        p: &RopeWrite<'_, CudaWeight>,
        shape: AttnShape,
        cache: &mut CudaKvCache,
        step: &CudaStep,
        out: &mut CudaBuf,
    ) {
        self.rope_attention_op(qkv, p, shape, cache, step, out);
    }

    fn rms_norm(&self, x: &CudaBuf, w: &CudaWeight, eps: f32, out: &mut CudaBuf) {
        let t0 = self.prof_begin();
        let n = w.len();
        let rows = x.len / n;
        self.ensure_as(out, x.len, self.matmul_input_bf16(rows));
        let r = self.kernels.rms_norm(
            (x.f32("rms_norm"), w.ptr(), out.ptr),
            (rows, n),
            eps,
            out.bf16,
        );
        self.finish("rms_norm", t0, r);
    }

    fn add_rms_norm(
        &self,
        residual: &mut CudaBuf,
        x: &CudaBuf,
        w: &CudaWeight,
        eps: f32,
        out: &mut CudaBuf,
    ) {
        let t0 = self.prof_begin();
        let n = w.len();
        let rows = x.len / n;
        self.ensure_as(out, x.len, self.matmul_input_bf16(rows));
        let ptrs = (
            residual.f32("add_rms_norm"),
            x.f32("add_rms_norm"),
            w.ptr(),
            out.ptr,
        );
        let r = self.kernels.add_rms_norm(ptrs, (rows, n), eps, out.bf16);
        self.finish("add_rms_norm", t0, r);
    }

    fn rope(&self, x: &mut CudaBuf, step: &CudaStep, n_heads: usize, rope: &RopeSpec) {
        let t0 = self.prof_begin();
        let inv_freq = self.state().step.inv_freq(&self.stream, &rope.inv_freq);
        let shape = RopeShape {
            n_heads,
            head_dim: rope.head_dim,
            rotary_dim: rope.rotary_dim,
            neox: rope.neox,
        };
        let r = inv_freq.and_then(|f| {
            self.kernels
                .rope(x.f32("rope"), step.positions, f, step.n_tokens, shape)
        });
        self.finish("rope", t0, r);
    }

    fn silu_mul(&self, gate: &CudaBuf, up: &CudaBuf, out: &mut CudaBuf) {
        let t0 = self.prof_begin();
        self.ensure(out, gate.len);
        let ptrs = (gate.f32("silu_mul"), up.f32("silu_mul"), out.ptr);
        let r = self.kernels.silu_mul(ptrs, gate.len, false);
        self.finish("silu_mul", t0, r);
    }

    fn write_kv(
        &self,
        cache: &mut CudaKvCache,
        layer: usize,
        k: &CudaBuf,
        v: &CudaBuf,
        step: &CudaStep,
    ) {
        let t0 = self.prof_begin();
        let kv_dim = cache.spec.num_kv_heads * cache.spec.head_dim;
        let r = self.kernels.write_kv(
            k.f32("write_kv"),
            v.f32("write_kv"),
            step.slots,
            cache.layer(layer),
            (step.n_tokens, kv_dim),
            cache.fp8(),
        );
        self.finish("write_kv", t0, r);
    }

    fn attention(
        &self,
        cache: &CudaKvCache,
        layer: usize,
        q: &CudaBuf,
        shape: AttnShape,
        step: &CudaStep,
        out: &mut CudaBuf,
    ) {
        self.attention_op(cache, layer, q, shape, step, out);
    }

    fn sample_rows_deferred(
        &self,
        x: &CudaBuf,
        cols: usize,
        rows: &[crate::SampleRow],
    ) -> ids::CudaIds {
        let n = x.len / cols.max(1);
        assert_eq!(n, rows.len(), "sample_rows: one SampleRow per logits row");
        let params: Vec<f32> = rows
            .iter()
            .flat_map(|p| [p.temperature, p.top_k as f32, p.top_p, p.min_p, p.u])
            .collect();
        let dev = self.alloc_buf(params.len());
        self.defer_ids("sample", n, |ids| {
            // SAFETY: dev was just allocated for params.len() f32; pageable copies are staged
            // before the call returns, and the kernel below runs after it on the same stream.
            unsafe {
                cudarc::driver::result::memcpy_htod_async(dev.ptr, &params, self.stream.cu_stream())
            }?;
            self.kernels.sample_rows(x.ptr, dev.ptr, ids, (n, cols))
        })
    }

    fn samples_on_device(&self) -> bool {
        true
    }

    fn argmax_deferred(&self, x: &CudaBuf, cols: usize) -> ids::CudaIds {
        let rows = x.len / cols.max(1);
        self.defer_ids("argmax", rows, |ids| {
            self.kernels.argmax_rows(x.ptr, ids, rows, cols)
        })
    }

    fn read_ids(&self, ids: ids::CudaIds) -> Vec<u32> {
        self.state()
            .ids
            .read(ids)
            .unwrap_or_else(|e| panic!("CUDA token ids: {e}"))
    }

    fn moe(
        &self,
        x: &CudaBuf,
        prefill: &[bool],
        layer: &MoeLayer<'_, CudaWeight>,
        out: &mut CudaBuf,
    ) {
        self.moe_op(x, prefill, layer, out);
    }

    fn linear_heads(
        &self,
        x: &CudaBuf,
        prefill: &[bool],
        w: &CudaWeight,
        n_heads: usize,
        out: &mut CudaBuf,
    ) {
        self.linear_heads_op(x, prefill.len(), w, n_heads, out);
    }

    fn write_latent(
        &self,
        cache: &mut CudaKvCache,
        layer: usize,
        latent: &CudaBuf,
        k_rope: &CudaBuf,
        step: &CudaStep,
    ) {
        self.write_latent_op(cache, layer, latent, k_rope, step);
    }

    fn mla_prep(
        &self,
        cache: &mut CudaKvCache,
        layer: usize,
        norm: (&CudaBuf, &CudaWeight, f32),
        latent: &mut CudaBuf,
        ropes: (&mut CudaBuf, &mut CudaBuf),
        absorb: (&CudaBuf, &CudaWeight, &mut CudaBuf),
        n_heads: usize,
        rope: &RopeSpec,
        prefill: &[bool],
        step: &CudaStep,
    ) {
        self.mla_prep_op(
            cache, layer, norm, latent, ropes, absorb, n_heads, rope, prefill, step,
        );
    }

    fn mla_attention(
        &self,
        cache: &CudaKvCache,
        layer: usize,
        q_latent: &CudaBuf,
        q_rope: &CudaBuf,
        shape: MlaShape,
        step: &CudaStep,
        out: &mut CudaBuf,
    ) {
        self.mla_attention_op(cache, layer, q_latent, q_rope, shape, step, out, None);
    }

    fn mla_attention_uv(
        &self,
        cache: &CudaKvCache,
        layer: usize,
        q: (&CudaBuf, &CudaBuf),
        shape: MlaShape,
        (step, _): (&CudaStep, &[bool]),
        w_uv: &CudaWeight,
        bufs: (&mut CudaBuf, &mut CudaBuf),
    ) {
        self.mla_attention_uv_op(cache, layer, q, shape, step, w_uv, bufs);
    }

    fn gather_logits_rows(&self, x: &CudaBuf, cols: usize, step: &CudaStep, out: &mut CudaBuf) {
        let t0 = self.prof_begin();
        // The gathered rows feed the head's matmul: bf16 for cuBLASLt, f32 for the GEMV.
        self.ensure_as(
            out,
            step.n_logits * cols,
            self.matmul_input_bf16(step.n_logits),
        );
        if step.n_logits == 0 {
            return self.finish("gather_rows", t0, Ok(()));
        }
        // One decode row: the weight ring writes it along with the norm that makes it.
        let one_row = step.n_logits == 1 && x.len == cols && !x.bf16 && !out.bf16;
        if one_row && !self.kernels.skipping() && self.kernels.ring_alias(x.ptr, out.ptr, cols) {
            return self.finish("gather_rows", t0, Ok(()));
        }
        let r = self.kernels.gather_rows(
            (x.ptr, step.logits_rows, out.ptr),
            (step.n_logits, cols),
            (x.bf16, out.bf16),
        );
        self.finish("gather_rows", t0, r);
    }
}
