//! The weight ring's host side (ring.cu): while a one-row decode graph is captured, the GEMV
//! launches, the RMS norms before them, RoPE + the cache write and the tensor-core decode
//! attention (with its merge) are recorded as steps of a program instead of launched, and a run
//! of them goes out as one persistent `decode_ring` launch when anything else is launched (the
//! embedding, argmax) or the capture ends: a dense model's whole token is one launch. A norm is
//! folded into the next GEMV that reads its output (every block norms the input as it stages
//! it; block 0 also writes the normed row, for any later reader), and the batch-1 gather of the
//! logits row into that same norm. Opt-in with HEARTH_RING_DECODE=1 (sm_90 and later) while it
//! is measured; design and measurements in docs/decode-ring-design.md.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig};

use super::launch::Launch;
use super::ring_timeline::{StepInfo, Timeline};
use super::{norm_threads, AttnLaunch, Kernels, RopeWriteLaunch};
use crate::BackendError;

/// Matrices a step (RING_SEGS), consumer warps (RING_CW) and ring slots (RING_MAX_SLOTS), as
/// ring.cu has them.
const SEGS: usize = 3;
const CONSUMER_WARPS: u32 = 11;
const MAX_SLOTS: usize = 32;
/// The smallest ring that still streams ahead, and the slot size when rows allow.
const MIN_SLOTS: usize = 4;
const SLOT_BYTES: usize = 16 << 10;
/// Steps the programs of one capture hold together (device memory kept for the graph's life).
const MAX_PROGRAM: usize = 4096;

const KIND_GEMV: i32 = 0;
const KIND_SWIGLU: i32 = 1;
const KIND_NORM: i32 = 2;
const KIND_ROPE: i32 = 3;
const KIND_ATTN: i32 = 4;
const KIND_MERGE: i32 = 5;
/// Head sizes RoPE steps take (a warp's 256 floats of shared memory).
const ROPE_MAX_HEAD: usize = 256;

/// ring.cu's RingSeg.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct Seg {
    w: u64,
    bias: u64,
    y: u64,
    n: i32,
    pad: i32,
}

/// ring.cu's RingAttn: the arguments of rope_write_kv, attn_decode_tc and attn_decode_merge.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct Attn {
    q: u64,
    k: u64,
    v: u64,
    q_norm: u64,
    k_norm: u64,
    pos: u64,
    inv_freq: u64,
    slots: u64,
    kc: u64,
    vc: u64,
    out: u64,
    part_ml: u64,
    part_acc: u64,
    rows: u64,
    tok_seq: u64,
    seq_info: u64,
    block_tables: u64,
    n_heads: i32,
    n_kv_heads: i32,
    head_dim: i32,
    rotary_dim: i32,
    neox: i32,
    block_size: i32,
    fp8: i32,
    eps: f32,
    scale: f32,
    pad: i32,
}

/// ring.cu's RingStep. For the attention steps `k` is the shared memory they need, in floats.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct Step {
    seg: [Seg; SEGS],
    attn: Attn,
    x: u64,
    gamma: u64,
    norm_out: [u64; 2],
    kind: i32,
    k: i32,
    nseg: i32,
    add: i32,
    eps: f32,
    norm_threads: i32,
}

/// ring.cu's RingProgram, passed by value (its steps in device memory).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct Program {
    steps: u64,
    counters: u64,
    timeline: u64,
    count: i32,
    slot_bytes: i32,
    slots: i32,
    xs_floats: i32,
    diag: i32,
    pad: i32,
}

const _: () = assert!(
    std::mem::size_of::<Step>() == 328 && std::mem::size_of::<Program>() == 48,
    "ring.cu's RingStep and RingProgram"
);

// SAFETY: Program is a #[repr(C)] struct of integers, floats and device addresses, laid out as
// ring.cu's RingProgram (size checked above); the driver copies it into the parameter space.
unsafe impl DeviceRepr for Program {}

/// An RMS norm of one row waiting to be folded into the next step.
#[derive(Debug, Clone, Copy)]
struct Norm {
    x: u64,
    w: u64,
    out: [u64; 2],
    n: usize,
    eps: f32,
}

/// What the capture has recorded and not launched yet.
#[derive(Debug, Default)]
struct Pending {
    recording: bool,
    steps: Vec<Step>,
    norm: Option<Norm>,
    /// Steps of this capture's launches so far (where the next program goes).
    used: usize,
}

/// A GEMV to record: its matrices (W, bias or 0, y, rows), input x [k] and whether it adds into
/// y.
pub struct RingGemv<'a> {
    pub mats: &'a [(u64, u64, u64, usize)],
    pub x: u64,
    pub k: usize,
    pub add: bool,
}

pub struct Ring {
    func: CudaFunction,
    /// An exit counter and MAX_PROGRAM arrival counters, zero between launches.
    _counters: CudaSlice<u32>,
    counters: u64,
    /// The programs of the current capture's launches, back to back (MAX_PROGRAM steps).
    _programs: CudaSlice<u8>,
    programs: u64,
    sms: u32,
    /// Dynamic shared memory a block may take.
    smem: usize,
    pending: Mutex<Pending>,
    /// Launches recorded, and captures that recorded (a token's launches are their ratio).
    launches: AtomicUsize,
    captures: AtomicUsize,
    /// HEARTH_RING_DIAG, `,` or `+` between names (measurement only, wrong outputs): `fastdot` sums rows
    /// in one pass instead of gemv.cu's order, `nodot` skips the dot products, `nowait` the
    /// waits for the step before, `nostage` the input staging, `relaxed` the release ordering
    /// of a block's arrival (ring.cu's RING_FAST_DOT, RING_NO_DOT, RING_NO_WAIT,
    /// RING_NO_STAGE, RING_RELAXED).
    diag: i32,
    /// HEARTH_RING_DIAG containing `trace`: each launch's steps on stderr, a letter a step.
    trace: bool,
    /// HEARTH_RING_DIAG containing `timeline`: each step's times, summarised when dropped.
    timeline: Option<Timeline>,
    /// Slot size (HEARTH_RING_SLOT_KB, default 16), SwiGLU steps' two rows at least.
    slot_bytes: usize,
    /// Whether launches in decode graphs are programmatic (the producer then streams weights
    /// while the kernel before finishes).
    pdl: bool,
}

impl Ring {
    /// The ring when HEARTH_RING_DECODE=1 on a GPU of compute capability 9.0 or later.
    pub fn load(
        module: &Arc<cudarc::driver::CudaModule>,
        stream: &Arc<CudaStream>,
        sms: usize,
        pdl: bool,
    ) -> Result<Option<Self>, BackendError> {
        let ctx = stream.context();
        let major =
            ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        if major < 9 || std::env::var("HEARTH_RING_DECODE").as_deref() != Ok("1") {
            return Ok(None);
        }
        let func = module.load_function("decode_ring")?;
        let optin = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?
            as usize;
        // What the kernel's static shared memory (the slots' barriers, the norm's sums, the
        // step's descriptor) leaves.
        let fixed =
            func.get_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?;
        let smem = optin - fixed as usize;
        func.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            smem as i32,
        )?;
        let counters = stream.alloc_zeros::<u32>(MAX_PROGRAM + 1)?;
        let ptr = counters.device_ptr(stream).0;
        let programs = stream.alloc_zeros::<u8>(MAX_PROGRAM * std::mem::size_of::<Step>())?;
        let programs_ptr = programs.device_ptr(stream).0;
        Ok(Some(Ring {
            func,
            _counters: counters,
            counters: ptr,
            _programs: programs,
            programs: programs_ptr,
            sms: sms as u32,
            smem,
            pending: Mutex::new(Pending::default()),
            launches: AtomicUsize::new(0),
            captures: AtomicUsize::new(0),
            slot_bytes: std::env::var("HEARTH_RING_SLOT_KB")
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
                .map_or(SLOT_BYTES, |kb| kb.clamp(4, 64) << 10),
            diag: [
                ("fastdot", 1),
                ("nodot", 2),
                ("nowait", 4),
                ("nostage", 8),
                ("relaxed", 16),
            ]
            .iter()
            .filter(|(name, _)| diag_has(name))
            .map(|(_, bit)| bit)
            .sum(),
            trace: diag_has("trace"),
            timeline: if diag_has("timeline") {
                Some(Timeline::new(stream, sms, MAX_PROGRAM)?)
            } else {
                None
            },
            pdl,
        }))
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts (or stops) recording; stopping drops nothing: flush first. A capture starts only
    /// when the graph its programs served is gone, so their memory is reused.
    pub fn record(&self, on: bool) {
        let mut p = self.pending();
        debug_assert!(p.steps.is_empty() && p.norm.is_none(), "flush before");
        if on && !p.recording {
            p.used = 0;
            self.captures.fetch_add(1, Ordering::Relaxed);
        }
        p.recording = on;
    }

    /// (launches, captures) so far.
    pub fn launches(&self) -> (usize, usize) {
        (
            self.launches.load(Ordering::Relaxed),
            self.captures.load(Ordering::Relaxed),
        )
    }

    pub fn recording(&self) -> bool {
        self.pending().recording
    }

    /// The shared memory layout for steps of input widths up to `k`, SwiGLU steps' up to
    /// `swiglu_k` (0: none): (staged input floats, slot bytes, slots), or None when the ring
    /// cannot hold them (a slot holds a SwiGLU feature's two rows whole).
    fn layout(&self, k: usize, swiglu_k: usize) -> Option<(usize, usize, usize)> {
        let xs = k.next_multiple_of(32);
        let slot = self.slot_bytes.max(4 * swiglu_k);
        let slots = (self.smem.checked_sub(4 * xs)? / slot).min(MAX_SLOTS);
        (slots >= MIN_SLOTS).then_some((xs, slot, slots))
    }

    /// The layout of the pending steps with `extra` (k, swiglu) added ((0, false): none).
    fn layout_with(&self, p: &Pending, extra: (usize, bool)) -> Option<(usize, usize, usize)> {
        let steps = p
            .steps
            .iter()
            .map(|s| (s.k as usize, s.kind == KIND_SWIGLU));
        let (k, sk) = steps.chain([extra]).fold((0, 0), |(k, sk), (sk2, sw)| {
            (k.max(sk2), if sw { sk.max(sk2) } else { sk })
        });
        self.layout(k, sk)
    }

    /// Records a one-row GEMV (SwiGLU pair when `swiglu`: mats[0] gate and output, mats[1]
    /// up) as a step; false when the ring cannot take it (the caller launches it).
    pub fn gemv(
        &self,
        stream: &CudaStream,
        g: &RingGemv<'_>,
        swiglu: bool,
    ) -> Result<bool, BackendError> {
        let mut p = self.pending();
        if !p.recording
            || !g.k.is_multiple_of(8)
            || self
                .layout_with(&Pending::default(), (g.k, swiglu))
                .is_none()
        {
            drop(p);
            self.flush(stream)?;
            return Ok(false);
        }
        let mut step = Step {
            kind: if swiglu { KIND_SWIGLU } else { KIND_GEMV },
            k: g.k as i32,
            nseg: g.mats.len() as i32,
            add: i32::from(g.add),
            x: g.x,
            ..Step::default()
        };
        for (s, &(w, bias, y, n)) in step.seg.iter_mut().zip(g.mats) {
            *s = Seg {
                w,
                bias,
                y,
                n: n as i32,
                pad: 0,
            };
        }
        // Folded only when this step does not write the row the norm reads (its blocks would
        // race the others' staging).
        let folds = p
            .norm
            .is_some_and(|n| n.out[0] == g.x && n.n == g.k && g.mats.iter().all(|m| m.2 != n.x));
        if !folds {
            self.settle_norm(stream, &mut p)?;
        }
        if let Some(norm) = p.norm.take() {
            step.x = norm.x;
            step.gamma = norm.w;
            step.norm_out = norm.out;
            step.eps = norm.eps;
            step.norm_threads = norm_threads(norm.n) as i32;
        }
        self.push(stream, &mut p, step)?;
        Ok(true)
    }

    /// Records the RMS norm of one row x [n] into out (f32), to fold into the next step; false
    /// when the ring cannot take it.
    pub fn norm(
        &self,
        stream: &CudaStream,
        (x, w, out): (u64, u64, u64),
        n: usize,
        eps: f32,
    ) -> Result<bool, BackendError> {
        let mut p = self.pending();
        // In place, the writing block would race the others' reads of x.
        if !p.recording || !n.is_multiple_of(4) || x == out || self.layout(n, 0).is_none() {
            drop(p);
            self.flush(stream)?;
            return Ok(false);
        }
        self.settle_norm(stream, &mut p)?;
        p.norm = Some(Norm {
            x,
            w,
            out: [out, 0],
            n,
            eps,
        });
        Ok(true)
    }

    /// A copy of the row `src` [cols] to `dst` (the batch-1 logits row gather), taken as a second
    /// output of the pending norm that writes src; false when there is none.
    pub fn alias(&self, src: u64, dst: u64, cols: usize) -> bool {
        let mut p = self.pending();
        let recording = p.recording;
        match p.norm.as_mut() {
            Some(n) if recording && n.out[0] == src && n.out[1] == 0 && n.n == cols => {
                n.out[1] = dst;
                true
            }
            _ => false,
        }
    }

    /// Records the q/k norms, RoPE and cache write of one row (rope_write_kv); false when the
    /// ring cannot take it (the caller launches it).
    pub fn rope(&self, stream: &CudaStream, a: &RopeWriteLaunch) -> Result<bool, BackendError> {
        let k = CONSUMER_WARPS as usize * ROPE_MAX_HEAD;
        let attn = Attn {
            q: a.q,
            k: a.k,
            v: a.v,
            q_norm: a.norms.0,
            k_norm: a.norms.1,
            pos: a.positions,
            inv_freq: a.inv_freq,
            slots: a.slots,
            kc: a.caches.0,
            vc: a.caches.1,
            n_heads: a.shape.n_heads as i32,
            n_kv_heads: a.n_kv_heads as i32,
            head_dim: a.shape.head_dim as i32,
            rotary_dim: a.shape.rotary_dim as i32,
            neox: i32::from(a.shape.neox),
            fp8: i32::from(a.fp8),
            eps: a.eps,
            ..Attn::default()
        };
        let ok = a.rows == 1 && a.shape.head_dim <= ROPE_MAX_HEAD;
        self.record_steps(stream, ok, &[(KIND_ROPE, k, attn)])
    }

    /// Records one row's decode attention on the tensor cores and the merge of its splits
    /// (attn_decode_tc, attn_decode_merge; `parts` is their split buffer, `ml_bytes` its
    /// (max, sum) part), needing `smem` bytes of shared memory; false when the ring cannot take
    /// it.
    pub fn attention(
        &self,
        stream: &CudaStream,
        a: &AttnLaunch,
        (rows, parts, ml_bytes): (u64, u64, usize),
        smem: usize,
    ) -> Result<bool, BackendError> {
        let attn = Attn {
            q: a.q,
            kc: a.k_cache,
            vc: a.v_cache,
            out: a.out,
            part_ml: parts,
            part_acc: parts + ml_bytes as u64,
            rows,
            tok_seq: a.tok_seq,
            seq_info: a.seq_info,
            block_tables: a.block_tables,
            n_heads: a.n_heads as i32,
            n_kv_heads: a.n_kv_heads as i32,
            head_dim: a.head_dim as i32,
            block_size: a.block_size as i32,
            fp8: i32::from(a.fp8),
            scale: a.scale,
            ..Attn::default()
        };
        let steps = [(KIND_ATTN, smem.div_ceil(4), attn), (KIND_MERGE, 0, attn)];
        self.record_steps(stream, !a.out_bf16, &steps)
    }

    /// Records steps without weights ((kind, shared memory floats, arguments)) when recording
    /// and `ok`; else launches what is pending and returns false.
    fn record_steps(
        &self,
        stream: &CudaStream,
        ok: bool,
        steps: &[(i32, usize, Attn)],
    ) -> Result<bool, BackendError> {
        let mut p = self.pending();
        let fits = steps.iter().all(|s| self.layout(s.1, 0).is_some());
        if !p.recording || !ok || !fits {
            drop(p);
            self.flush(stream)?;
            return Ok(false);
        }
        self.settle_norm(stream, &mut p)?;
        for &(kind, k, attn) in steps {
            let step = Step {
                kind,
                k: k as i32,
                attn,
                ..Step::default()
            };
            self.push(stream, &mut p, step)?;
        }
        Ok(true)
    }

    /// A pending norm that no step folded becomes a step of its own.
    fn settle_norm(&self, stream: &CudaStream, p: &mut Pending) -> Result<(), BackendError> {
        let Some(n) = p.norm.take() else {
            return Ok(());
        };
        let step = Step {
            kind: KIND_NORM,
            k: n.n as i32,
            x: n.x,
            gamma: n.w,
            norm_out: n.out,
            eps: n.eps,
            norm_threads: norm_threads(n.n) as i32,
            ..Step::default()
        };
        self.push(stream, p, step)
    }

    /// Appends a step, launching what is pending first when the step would not fit the same
    /// shared memory layout.
    fn push(&self, stream: &CudaStream, p: &mut Pending, step: Step) -> Result<(), BackendError> {
        let fits = self
            .layout_with(p, (step.k as usize, step.kind == KIND_SWIGLU))
            .is_some();
        if !fits {
            self.launch(stream, p)?;
        }
        p.steps.push(step);
        Ok(())
    }

    /// Launches what is recorded (before anything else is launched on the stream).
    pub fn flush(&self, stream: &CudaStream) -> Result<(), BackendError> {
        let mut p = self.pending();
        self.settle_norm(stream, &mut p)?;
        self.launch(stream, &mut p)
    }

    fn launch(&self, stream: &CudaStream, p: &mut Pending) -> Result<(), BackendError> {
        if p.steps.is_empty() {
            return Ok(());
        }
        let (xs, slot, slots) = self
            .layout_with(p, (0, false))
            .expect("every recorded step fits the ring (checked when recorded)");
        if p.used + p.steps.len() > MAX_PROGRAM {
            return Err(BackendError::Cuda(format!(
                "the weight ring's programs take more than {MAX_PROGRAM} steps a capture"
            )));
        }
        let at = self.programs + (p.used * std::mem::size_of::<Step>()) as u64;
        // SAFETY: `at` is inside the programs buffer (checked above) and no graph that reads
        // this part of it can run (it belonged to a graph dropped before this capture began);
        // the backend's stream is non-blocking and capturing, so this synchronous copy does
        // not join its capture.
        unsafe { cudarc::driver::result::memcpy_htod_sync(at, &p.steps) }?;
        let timeline = self.timeline.as_ref().map_or(0, |t| {
            let info: Vec<StepInfo> = p
                .steps
                .iter()
                .map(|s| StepInfo {
                    kind: s.kind,
                    k: s.k,
                    rows: match s.kind {
                        KIND_SWIGLU => s.seg[0].n,
                        _ => s.seg[..s.nseg as usize].iter().map(|g| g.n).sum(),
                    },
                })
                .collect();
            t.launch(p.used, &info)
        });
        let prog = Program {
            steps: at,
            counters: self.counters,
            timeline,
            count: p.steps.len() as i32,
            slot_bytes: slot as i32,
            slots: slots as i32,
            xs_floats: xs as i32,
            diag: self.diag,
            pad: 0,
        };
        if self.trace {
            let kinds: String = p
                .steps
                .iter()
                .map(|s| b"GSNRAM"[s.kind as usize] as char)
                .collect();
            eprintln!("decode_ring launch of {} steps: {kinds}", p.steps.len());
        }
        p.used += p.steps.len();
        p.steps.clear();
        let cfg = LaunchConfig {
            grid_dim: (self.sms, 1, 1),
            block_dim: ((CONSUMER_WARPS + 1) * 32, 1, 1),
            shared_mem_bytes: (4 * xs + slot * slots) as u32,
        };
        self.launches.fetch_add(1, Ordering::Relaxed);
        let mut b = Launch::new(stream, &self.func, self.pdl);
        b.arg(&prog);
        // SAFETY: every address in the program is a live device allocation the backend owns
        // (weights, arena rows of the sizes recorded with them, the counters), one block per
        // SM fits (the shared memory is the per-block maximum), and prog matches decode_ring's
        // RingProgram parameter.
        unsafe { b.launch(cfg) }
    }
}

/// Whether HEARTH_RING_DIAG names `name` (names joined by `,` or `+`).
fn diag_has(name: &str) -> bool {
    std::env::var("HEARTH_RING_DIAG").is_ok_and(|d| d.split([',', '+']).any(|x| x == name))
}

/// The ring as the backend sees it: recording switched on for a batch-1 capture, flushed
/// before any other work on the stream.
impl Kernels {
    /// Starts or stops recording one-row GEMVs and norms into the weight ring (a batch-1
    /// decode graph's capture); stopping launches what is recorded. A no-op without the ring.
    pub fn ring_record(&self, on: bool) -> Result<(), BackendError> {
        let Some(r) = &self.ring else { return Ok(()) };
        r.flush(&self.stream)?;
        r.record(on);
        Ok(())
    }

    /// Launches the ring's recorded steps, if any: before any other work on the stream.
    pub fn ring_flush(&self) -> Result<(), BackendError> {
        match &self.ring {
            Some(r) => r.flush(&self.stream),
            None => Ok(()),
        }
    }

    /// The weight ring's (launches, batch-1 graph captures) so far, or None when it is off.
    pub fn ring_launches(&self) -> Option<(usize, usize)> {
        self.ring.as_ref().map(Ring::launches)
    }

    /// Whether the ring takes the one-row gather of `src` [cols] into `dst` (it writes dst
    /// along with the norm that writes src).
    pub fn ring_alias(&self, src: u64, dst: u64, cols: usize) -> bool {
        self.ring.as_ref().is_some_and(|r| r.alias(src, dst, cols))
    }

    /// Whether the ring recorded this one-row rope_write_kv instead of a launch.
    pub(super) fn ring_rope(&self, a: &RopeWriteLaunch) -> Result<bool, BackendError> {
        match &self.ring {
            Some(r) if r.recording() => r.rope(&self.stream, a),
            _ => Ok(false),
        }
    }

    /// Whether the ring recorded this one-row tensor-core decode attention (and its merge)
    /// instead of launches.
    pub(super) fn ring_attention(
        &self,
        a: &AttnLaunch,
        (rows, parts, ml_bytes): (u64, u64, usize),
        smem: usize,
    ) -> Result<bool, BackendError> {
        match &self.ring {
            Some(r) if r.recording() => r.attention(&self.stream, a, (rows, parts, ml_bytes), smem),
            _ => Ok(false),
        }
    }

    /// Whether the ring recorded this one-row GEMV instead of a launch.
    pub(super) fn ring_gemv(&self, g: RingGemv<'_>, swiglu: bool) -> Result<bool, BackendError> {
        match &self.ring {
            Some(r) if r.recording() => r.gemv(&self.stream, &g, swiglu),
            _ => Ok(false),
        }
    }
}
