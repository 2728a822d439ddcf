//! The weight ring's host side (ring.cu): while a one-row decode graph is captured, the GEMV
//! launches and the RMS norms before them are recorded as steps of a program instead of
//! launched, and a run of them goes out as one persistent `decode_ring` launch when anything
//! else is launched (RoPE, attention, argmax) or the capture ends. A norm is folded into the
//! next GEMV that reads its output (every block norms the input as it stages it; block 0 also
//! writes the normed row, for any later reader), and the batch-1 gather of the logits row into
//! that same norm. Opt-in with HEARTH_RING_DECODE=1 (sm_90 and later) while it is measured;
//! design and measurements in docs/decode-ring-design.md.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig};

use super::launch::Launch;
use super::{norm_threads, Kernels};
use crate::BackendError;

/// Steps a launch holds (RING_MAX_STEPS), matrices a step (RING_SEGS), consumer warps (RING_CW)
/// and ring slots (RING_MAX_SLOTS), as ring.cu has them.
const MAX_STEPS: usize = 8;
const SEGS: usize = 3;
const CONSUMER_WARPS: u32 = 16;
const MAX_SLOTS: usize = 32;
/// The smallest ring that still streams ahead, and the slot size when rows allow.
const MIN_SLOTS: usize = 4;
const SLOT_BYTES: usize = 16 << 10;

const KIND_GEMV: i32 = 0;
const KIND_SWIGLU: i32 = 1;
const KIND_NORM: i32 = 2;

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

/// ring.cu's RingStep.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct Step {
    seg: [Seg; SEGS],
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

/// ring.cu's RingProgram, passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct Program {
    steps: [Step; MAX_STEPS],
    counters: u64,
    count: i32,
    slot_bytes: i32,
    slots: i32,
    xs_floats: i32,
    diag: i32,
    pad: i32,
}

const _: () = assert!(
    std::mem::size_of::<Program>() == 1248,
    "ring.cu's RingProgram"
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
    /// MAX_STEPS arrival counters and an exit counter, zero between launches.
    _counters: CudaSlice<u32>,
    counters: u64,
    sms: u32,
    /// Dynamic shared memory a block may take.
    smem: usize,
    pending: Mutex<Pending>,
    /// Launches recorded so far (a captured graph's count once).
    launches: AtomicUsize,
    /// HEARTH_RING_DIAG (measurement only, wrong outputs): `fastdot` sums rows in one pass
    /// instead of gemv.cu's order, `nodot` skips the dot products (ring.cu's RING_FAST_DOT,
    /// RING_NO_DOT).
    diag: i32,
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
        // Room for the kernel's static shared memory (the slots' barriers, the norm's sums).
        let smem = optin - 1024;
        func.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            smem as i32,
        )?;
        let counters = stream.alloc_zeros::<u32>(MAX_STEPS + 1)?;
        let ptr = counters.device_ptr(stream).0;
        Ok(Some(Ring {
            func,
            _counters: counters,
            counters: ptr,
            sms: sms as u32,
            smem,
            pending: Mutex::new(Pending::default()),
            launches: AtomicUsize::new(0),
            slot_bytes: std::env::var("HEARTH_RING_SLOT_KB")
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
                .map_or(SLOT_BYTES, |kb| kb.clamp(4, 64) << 10),
            diag: match std::env::var("HEARTH_RING_DIAG").as_deref() {
                Ok("fastdot") => 1,
                Ok("nodot") => 2,
                _ => 0,
            },
            pdl,
        }))
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts (or stops) recording; stopping drops nothing: flush first.
    pub fn record(&self, on: bool) {
        let mut p = self.pending();
        debug_assert!(p.steps.is_empty() && p.norm.is_none(), "flush before");
        p.recording = on;
    }

    pub fn launches(&self) -> usize {
        self.launches.load(Ordering::Relaxed)
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

    /// Appends a step, launching what is pending first when the program is full or the step
    /// would not fit the same shared memory layout.
    fn push(&self, stream: &CudaStream, p: &mut Pending, step: Step) -> Result<(), BackendError> {
        let fits = self
            .layout_with(p, (step.k as usize, step.kind == KIND_SWIGLU))
            .is_some();
        if p.steps.len() == MAX_STEPS || !fits {
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
        let mut prog = Program {
            steps: [Step::default(); MAX_STEPS],
            counters: self.counters,
            count: p.steps.len() as i32,
            slot_bytes: slot as i32,
            slots: slots as i32,
            xs_floats: xs as i32,
            diag: self.diag,
            pad: 0,
        };
        prog.steps[..p.steps.len()].copy_from_slice(&p.steps);
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

    /// The weight ring's launches so far, or None when it is off.
    pub fn ring_launches(&self) -> Option<usize> {
        self.ring.as_ref().map(Ring::launches)
    }

    /// Whether the ring takes the one-row gather of `src` [cols] into `dst` (it writes dst
    /// along with the norm that writes src).
    pub fn ring_alias(&self, src: u64, dst: u64, cols: usize) -> bool {
        self.ring.as_ref().is_some_and(|r| r.alias(src, dst, cols))
    }

    /// Whether the ring recorded this one-row GEMV instead of a launch.
    pub(super) fn ring_gemv(&self, g: RingGemv<'_>, swiglu: bool) -> Result<bool, BackendError> {
        match &self.ring {
            Some(r) if r.recording() => r.gemv(&self.stream, &g, swiglu),
            _ => Ok(false),
        }
    }
}
