//! cuBLASLt GEMMs for rows past the GEMV kernels: y[m, n] (f32, or bf16 where asked) = x[m, k]
//! (bf16) . W[n, k]^T (bf16), f32 accumulation. One plan (descriptors + an algorithm) per
//! shape, built on first use and cached, so steady-state calls do no cuBLASLt setup. For
//! decode-sized shapes (at most `AUTOTUNE_MAX_ROWS` rows, weight-bandwidth bound, where the
//! heuristic's first pick can be several times slower than its best) the heuristic's candidates
//! are timed on the call's own buffers and the fastest is kept; larger shapes take the first
//! pick.
//!
//! cuBLASLt is column-major: row-major y[m, n] is column-major y^T [n, m] = W (column-major
//! [k, n], transposed) . x^T (column-major [k, m]).
//!
//! fp8 (W8A8, `run_fp8`): W and x both e4m3 with an f32 scale a row of each, multiplied on the
//! fp8 tensor cores with fast accumulation, as vLLM's fp8 matmuls. The scales are applied by
//! cuBLASLt's outer-vector scale modes where it has them (cuBLASLt 12.9 and later, Hopper and
//! later), else the matmul runs unscaled and the caller applies them in a pass after it (any
//! cuBLASLt with fp8 matmuls, e.g. the CUDA 12.8 image's); `w8a8` says which runs here.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cublaslt::{result, sys};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use crate::BackendError;

/// cuBLASLt's recommended workspace on Hopper and later (32 MiB).
const WORKSPACE_BYTES: usize = 32 << 20;
/// Shapes with at most this many rows have their algorithm picked by timing.
const AUTOTUNE_MAX_ROWS: usize = 256;
/// Candidates asked of the heuristic for autotuning.
const CANDIDATES: usize = 8;
/// cublasLtMatmulMatrixScale_t's CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F (cuBLASLt 12.9; the
/// 12.8 bindings the backend builds against do not name it): an f32 scale a row of the operand.
const SCALE_OUTER_VEC_32F: i32 = 3;
/// The first cuBLASLt with SCALE_OUTER_VEC_32F (cublasLtGetVersion's major * 10000 + minor *
/// 100 + patch): older ones are not asked for it, whatever an unknown mode would do there.
const OUTER_VEC_VERSION: usize = 120_900;

struct Plan {
    desc: sys::cublasLtMatmulDesc_t,
    a: sys::cublasLtMatrixLayout_t,
    b: sys::cublasLtMatrixLayout_t,
    d: sys::cublasLtMatrixLayout_t,
    algo: sys::cublasLtMatmulAlgo_t,
}

pub struct Gemm {
    handle: sys::cublasLtHandle_t,
    stream: Arc<CudaStream>,
    workspace: CudaSlice<u8>,
    plans: HashMap<Shape, Plan>,
    w8a8: Option<Fp8Scales>,
    /// cublasLtGetVersion (e.g. 130100 for 13.1.0).
    version: usize,
}

/// How a W8A8 matmul's row scales are applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fp8Scales {
    /// By cuBLASLt (outer-vector scale modes; `run_fp8`).
    Rows,
    /// By a pass after an unscaled matmul (`run_fp8_unscaled`, then the caller's pass).
    Pass,
}

/// What a GEMM does with y.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Out {
    /// y = x . W^T in f32.
    F32,
    /// y = x . W^T in bf16, rounded once from the f32 accumulation.
    Bf16,
    /// y += x . W^T in f32 (a residual stream: the epilogue adds the sum to y in place).
    AddF32,
}

/// A plan's key: the matmul's sizes, the row strides of w, x and y, for a batch of matmuls
/// their count and the offsets from one to the next of w, x and y (in elements), and y's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Shape {
    m: usize,
    n: usize,
    k: usize,
    ldw: usize,
    ldx: usize,
    ldy: usize,
    batch: usize,
    offsets: [usize; 3],
    out: Out,
    /// e4m3 operands (W8A8) with their scales applied as said, else (None) bf16.
    fp8: Option<Fp8Scales>,
}

// SAFETY: the handle and plans are only used from the thread that holds the backend's state
// lock; cuBLASLt handles may move between threads when not used concurrently.
unsafe impl Send for Gemm {}

fn err(what: &str, e: impl std::fmt::Debug) -> BackendError {
    BackendError::Cuda(format!("cuBLASLt {what}: {e:?}"))
}

/// Sets a matmul descriptor's attribute to `value` (read by value, its size).
fn set_desc<T>(
    desc: sys::cublasLtMatmulDesc_t,
    attr: sys::cublasLtMatmulDescAttributes_t,
    value: &T,
    what: &str,
) -> Result<(), BackendError> {
    // SAFETY: desc is a live descriptor; cuBLASLt copies size_of::<T>() bytes from value, the
    // type the attribute takes (each caller's).
    unsafe {
        result::set_matmul_desc_attribute(
            desc,
            attr,
            value as *const T as *const c_void,
            std::mem::size_of::<T>(),
        )
    }
    .map_err(|e| err(what, e))
}

/// A W8A8 matmul's shape: w [n, k], x [m, k] and y [m, n], rows packed.
fn fp8_shape((m, n, k): (usize, usize, usize), out: Out, scales: Fp8Scales) -> Shape {
    Shape {
        m,
        n,
        k,
        ldw: k,
        ldx: k,
        ldy: n,
        batch: 1,
        offsets: [0; 3],
        out,
        fp8: Some(scales),
    }
}

/// Destroys a plan's descriptors (each once).
fn destroy(p: Plan) {
    // SAFETY: each handle was created by Gemm::describe and is not used after this.
    unsafe {
        let _ = result::destroy_matrix_layout(p.a);
        let _ = result::destroy_matrix_layout(p.b);
        let _ = result::destroy_matrix_layout(p.d);
        let _ = result::destroy_matmul_desc(p.desc);
    }
}

impl Gemm {
    pub fn new(stream: Arc<CudaStream>) -> Result<Self, BackendError> {
        let handle = result::create_handle().map_err(|e| err("create handle", e))?;
        let workspace = stream.alloc_zeros::<u8>(WORKSPACE_BYTES)?;
        // SAFETY: a query of the loaded library's version, no arguments.
        let version = unsafe { sys::cublasLtGetVersion() };
        let mut gemm = Gemm {
            handle,
            stream,
            workspace,
            plans: HashMap::new(),
            w8a8: None,
            version,
        };
        let wanted: &[Fp8Scales] = match std::env::var("HEARTH_FP8_W8A8").as_deref() {
            Ok("0") => &[],
            Ok("pass") => &[Fp8Scales::Pass],
            _ if version < OUTER_VEC_VERSION => &[Fp8Scales::Pass],
            _ => &[Fp8Scales::Rows, Fp8Scales::Pass],
        };
        gemm.w8a8 = wanted.iter().copied().find(|s| gemm.probe_fp8(*s));
        Ok(gemm)
    }

    /// How fp8 matrices past the W8A8 rows run, for the startup log's kernel path line.
    pub fn w8a8_path(&self) -> String {
        let v = self.version;
        let lt = format!("cuBLASLt {}.{}.{}", v / 10000, v / 100 % 100, v % 100);
        match self.w8a8 {
            Some(Fp8Scales::Rows) => format!(
                "W8A8: activations quantized to e4m3 with a scale a row, {lt} fp8 x fp8 -> f32 \
                 with outer-vector scales"
            ),
            Some(Fp8Scales::Pass) => format!(
                "W8A8: activations quantized to e4m3 with a scale a row, {lt} fp8 x fp8 -> f32, \
                 the scales applied by a pass after it (outer-vector fp8 scales need cuBLASLt \
                 12.9 and a GPU it has them for, or HEARTH_FP8_W8A8=pass)"
            ),
            None => format!(
                "dequantized to bf16 for {lt} bf16 x bf16 -> f32 (no fp8 matmuls in it on this \
                 GPU, or HEARTH_FP8_W8A8=0)"
            ),
        }
    }

    /// How W8A8 matmuls run here, if they do: with the scales applied by this cuBLASLt, or by a
    /// pass after an unscaled fp8 matmul (HEARTH_FP8_W8A8=pass asks for the pass, 0 for no
    /// W8A8).
    pub fn w8a8(&self) -> Option<Fp8Scales> {
        self.w8a8
    }

    /// Asks the heuristic for a W8A8 matmul of a prefill-like shape (the workspace stands in
    /// for the scale vectors: the heuristic reads no data).
    fn probe_fp8(&self, scales: Fp8Scales) -> bool {
        let shape = fp8_shape((256, 256, 256), Out::F32, scales);
        let ws = self.workspace.device_ptr(&self.stream).0;
        let Ok(plan) = self.describe(shape) else {
            return false;
        };
        let found = match scales {
            Fp8Scales::Rows => self.set_scales(&plan, (ws, ws)),
            Fp8Scales::Pass => Ok(()),
        }
        .and_then(|_| self.candidates(&plan, 1))
        .is_ok_and(|c| !c.is_empty());
        destroy(plan);
        found
    }

    /// The plan's descriptors and layouts for `shape` (no algorithm yet).
    fn describe(&self, shape: Shape) -> Result<Plan, BackendError> {
        let Shape {
            m,
            n,
            k,
            ldw,
            ldx,
            ldy,
            batch,
            offsets,
            out,
            fp8,
        } = shape;
        use sys::cublasLtMatmulDescAttributes_t as A;
        use sys::cudaDataType_t::{CUDA_R_16BF, CUDA_R_32F, CUDA_R_8F_E4M3};
        let desc =
            result::create_matmul_desc(sys::cublasComputeType_t::CUBLAS_COMPUTE_32F, CUDA_R_32F)
                .map_err(|e| err("matmul desc", e))?;
        // cublasOperation_t CUBLAS_OP_T (cudarc's cublasLt bindings do not carry the enum).
        let trans: i32 = 1;
        set_desc(desc, A::CUBLASLT_MATMUL_DESC_TRANSA, &trans, "transa")?;
        if let Some(scales) = fp8 {
            let fast: i8 = 1;
            set_desc(
                desc,
                A::CUBLASLT_MATMUL_DESC_FAST_ACCUM,
                &fast,
                "fast accumulation",
            )?;
            if scales == Fp8Scales::Rows {
                for mode in [
                    A::CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                    A::CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                ] {
                    set_desc(desc, mode, &SCALE_OUTER_VEC_32F, "outer-vector scales")?;
                }
            }
        }
        let operands = if fp8.is_some() {
            CUDA_R_8F_E4M3
        } else {
            CUDA_R_16BF
        };
        let layout = |ty, rows: usize, cols: usize, ld: usize| {
            result::create_matrix_layout(ty, rows as u64, cols as u64, ld as i64)
                .map_err(|e| err("matrix layout", e))
        };
        let a = layout(operands, k, n, ldw)?;
        let b = layout(operands, k, m, ldx)?;
        let d = layout(
            if out == Out::Bf16 {
                CUDA_R_16BF
            } else {
                CUDA_R_32F
            },
            n,
            m,
            ldy,
        )?;
        if batch > 1 {
            for (l, offset) in [a, b, d].into_iter().zip(offsets) {
                let (count, offset) = (batch as i32, offset as i64);
                // SAFETY: l is a live layout; the attributes are an int32 count and an int64
                // offset, read by value.
                unsafe {
                    use sys::cublasLtMatrixLayoutAttribute_t as A;
                    result::set_matrix_layout_attribute(
                        l,
                        A::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                        &count as *const _ as *const c_void,
                        std::mem::size_of_val(&count),
                    )
                    .and_then(|_| {
                        result::set_matrix_layout_attribute(
                            l,
                            A::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                            &offset as *const _ as *const c_void,
                            std::mem::size_of_val(&offset),
                        )
                    })
                }
                .map_err(|e| err("batched layout", e))?;
            }
        }
        Ok(Plan {
            desc,
            a,
            b,
            d,
            algo: sys::cublasLtMatmulAlgo_t { data: [0; 8] },
        })
    }

    /// `describe`'s plan with its algorithm: the heuristic's first pick, or for decode-sized
    /// shapes the fastest of its candidates on the call's own buffers.
    fn make_plan(
        &self,
        shape: Shape,
        [w, x, y]: [u64; 3],
        scales: Option<(u64, u64)>,
    ) -> Result<Plan, BackendError> {
        let Shape { m, n, k, out, .. } = shape;
        let mut plan = self.describe(shape)?;
        if let Some(s) = scales {
            self.set_scales(&plan, s)?;
        }
        let wanted = if m <= AUTOTUNE_MAX_ROWS {
            CANDIDATES
        } else {
            1
        };
        let candidates = self.candidates(&plan, wanted)?;
        if candidates.is_empty() {
            return Err(err(
                &format!("no algorithm for m={m} n={n} k={k}"),
                "empty heuristic",
            ));
        }
        plan.algo = candidates[0];
        // Timing needs a stream that is not being captured into a graph (it synchronizes).
        let capturing = !matches!(
            self.stream.capture_status(),
            Ok(cudarc::driver::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
        );
        if candidates.len() > 1 && !capturing {
            // Timing overwrites y: a residual stream's values are put back afterwards.
            let saved = match out {
                Out::AddF32 => Some(self.save(y, m * n * 4)?),
                _ => None,
            };
            let mut best = (f64::INFINITY, candidates[0]);
            for algo in candidates {
                plan.algo = algo;
                // A candidate that fails to run is passed over.
                if let Ok(t) = self.time(&plan, [w, x, y]) {
                    if t < best.0 {
                        best = (t, algo);
                    }
                }
            }
            plan.algo = best.1;
            if let Some(saved) = saved {
                let bytes = saved.len();
                let src = saved.device_ptr(&self.stream).0;
                // SAFETY: y holds m*n f32 = `bytes`, saved the same; both live on this stream.
                unsafe {
                    cudarc::driver::result::memcpy_dtod_async(
                        y,
                        src,
                        bytes,
                        self.stream.cu_stream(),
                    )
                }?;
                self.stream.synchronize()?;
            }
        }
        Ok(plan)
    }

    /// A device copy of the `bytes` at y.
    fn save(&self, y: u64, bytes: usize) -> Result<CudaSlice<u8>, BackendError> {
        // SAFETY: fully written by the copy below before it is read.
        let saved = unsafe { self.stream.alloc::<u8>(bytes) }?;
        let dst = saved.device_ptr(&self.stream).0;
        // SAFETY: y holds `bytes` (the caller's y of m*n f32), saved the same.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(dst, y, bytes, self.stream.cu_stream())
        }?;
        Ok(saved)
    }

    /// Up to `wanted` algorithms for the plan's shape, the heuristic's best first.
    fn candidates(
        &self,
        plan: &Plan,
        wanted: usize,
    ) -> Result<Vec<sys::cublasLtMatmulAlgo_t>, BackendError> {
        let pref = result::create_matmul_pref().map_err(|e| err("preference", e))?;
        let ws = WORKSPACE_BYTES;
        let mut found: Vec<sys::cublasLtMatmulHeuristicResult_t> = Vec::with_capacity(wanted);
        let mut count = 0;
        // SAFETY: pref is live; the attribute is a size_t read by value. The heuristic reads the
        // plan's live descriptors and writes at most `wanted` results into `found`'s capacity,
        // `count` of them.
        let status = unsafe {
            result::set_matmul_pref_attribute(
                pref,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &ws as *const _ as *const c_void,
                std::mem::size_of_val(&ws),
            )
            .map_err(|e| err("workspace preference", e))?;
            let status = sys::cublasLtMatmulAlgoGetHeuristic(
                self.handle,
                plan.desc,
                plan.a,
                plan.b,
                plan.d,
                plan.d,
                pref,
                wanted as i32,
                found.as_mut_ptr(),
                &mut count,
            );
            result::destroy_matmul_pref(pref).map_err(|e| err("destroy preference", e))?;
            found.set_len(count.max(0) as usize);
            status
        };
        status.result().map_err(|e| err("heuristic", e))?;
        Ok(found
            .into_iter()
            .filter(|r| {
                r.state == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS && r.workspaceSize <= ws
            })
            .map(|r| r.algo)
            .collect())
    }

    /// Mean seconds of the plan's matmul on these buffers (one warm-up, then three runs).
    /// Runs with beta 0 whatever the plan's mode (y is overwritten: see make_plan).
    fn time(&self, plan: &Plan, bufs: [u64; 3]) -> Result<f64, BackendError> {
        self.matmul(plan, Out::F32, bufs)?;
        self.stream.synchronize()?;
        let t0 = std::time::Instant::now();
        for _ in 0..3 {
            self.matmul(plan, Out::F32, bufs)?;
        }
        self.stream.synchronize()?;
        Ok(t0.elapsed().as_secs_f64() / 3.0)
    }

    /// y[m, n] = x[m, k] . w[n, k]^T with x and w bf16 and y f32 (device addresses).
    pub fn run(
        &mut self,
        w: u64,
        x: u64,
        y: u64,
        dims: (usize, usize, usize),
    ) -> Result<(), BackendError> {
        self.run_as(w, x, y, dims, Out::F32)
    }

    /// `run` with y as `out` says.
    pub fn run_as(
        &mut self,
        w: u64,
        x: u64,
        y: u64,
        (m, n, k): (usize, usize, usize),
        out: Out,
    ) -> Result<(), BackendError> {
        self.run_strided(w, x, y, (m, n, k), [k, k, n], out)
    }

    /// `run_as` with the rows of w, x and y `ld` values apart (e.g. the first k columns of a
    /// wider w).
    pub fn run_strided(
        &mut self,
        w: u64,
        x: u64,
        y: u64,
        (m, n, k): (usize, usize, usize),
        [ldw, ldx, ldy]: [usize; 3],
        out: Out,
    ) -> Result<(), BackendError> {
        let shape = Shape {
            m,
            n,
            k,
            ldw,
            ldx,
            ldy,
            batch: 1,
            offsets: [0; 3],
            out,
            fp8: None,
        };
        self.run_shape(shape, [w, x, y], None)
    }

    /// y[m, n] (as `out` says) = (x[m, k] * sx) . (w[n, k] * sw)^T with x and w fp8 e4m3 and
    /// sx [m], sw [n] f32 scales a row of each (W8A8); only where `w8a8` is `Rows`.
    pub fn run_fp8(
        &mut self,
        (w, sw): (u64, u64),
        (x, sx): (u64, u64),
        y: u64,
        dims: (usize, usize, usize),
        out: Out,
    ) -> Result<(), BackendError> {
        let shape = fp8_shape(dims, out, Fp8Scales::Rows);
        self.run_shape(shape, [w, x, y], Some((sw, sx)))
    }

    /// y[m, n] (as `out` says) = x[m, k] . w[n, k]^T with x and w fp8 e4m3, their scales left
    /// for a pass after it; where `w8a8` is `Pass`.
    pub fn run_fp8_unscaled(
        &mut self,
        w: u64,
        x: u64,
        y: u64,
        dims: (usize, usize, usize),
        out: Out,
    ) -> Result<(), BackendError> {
        let shape = fp8_shape(dims, out, Fp8Scales::Pass);
        self.run_shape(shape, [w, x, y], None)
    }

    /// `batch` matmuls in one call, rows of x `ldx` and rows of y `ldy` values apart: matmul i
    /// reads w, x and y `offsets` elements (of each) past matmul i - 1's (e.g. a per-head
    /// matmul: w heads back to back, x and y heads side by side in each row).
    pub fn run_batched(
        &mut self,
        w: u64,
        x: u64,
        y: u64,
        (m, n, k): (usize, usize, usize),
        (ldx, ldy): (usize, usize),
        (batch, offsets): (usize, [usize; 3]),
    ) -> Result<(), BackendError> {
        let shape = Shape {
            m,
            n,
            k,
            ldw: k,
            ldx,
            ldy,
            batch,
            offsets,
            out: Out::F32,
            fp8: None,
        };
        self.run_shape(shape, [w, x, y], None)
    }

    fn run_shape(
        &mut self,
        shape: Shape,
        bufs: [u64; 3],
        scales: Option<(u64, u64)>,
    ) -> Result<(), BackendError> {
        if !self.plans.contains_key(&shape) {
            let plan = self.make_plan(shape, bufs, scales)?;
            self.plans.insert(shape, plan);
        }
        let plan = &self.plans[&shape];
        let Shape { m, n, k, .. } = shape;
        scales
            .map_or(Ok(()), |s| self.set_scales(plan, s))
            .and_then(|_| self.matmul(plan, shape.out, bufs))
            .map_err(|e| BackendError::Cuda(format!("m={m} n={n} k={k}: {e}")))
    }

    /// Points a W8A8 plan at its scale vectors: sw (a scale a row of w, cuBLASLt's A) and sx
    /// (a row of x, its B).
    fn set_scales(&self, plan: &Plan, (sw, sx): (u64, u64)) -> Result<(), BackendError> {
        use sys::cublasLtMatmulDescAttributes_t as A;
        set_desc(
            plan.desc,
            A::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
            &sw,
            "scales",
        )?;
        set_desc(
            plan.desc,
            A::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
            &sx,
            "scales",
        )
    }

    /// Queues the plan's matmul on the stream.
    fn matmul(&self, plan: &Plan, out: Out, [w, x, y]: [u64; 3]) -> Result<(), BackendError> {
        // C is y itself: read only when beta is 1 (Out::AddF32), in place.
        let (alpha, beta) = (1f32, if out == Out::AddF32 { 1f32 } else { 0f32 });
        let stream = self.stream.cu_stream() as sys::cudaStream_t;
        let ws = self.workspace.device_ptr(&self.stream).0 as *mut c_void;
        // SAFETY: w holds n rows of k values ldw apart, x m rows of k ldx apart (bf16, or e4m3
        // for an fp8 plan) and y m rows of n values (f32, or bf16 for an Out::Bf16 plan) ldy
        // apart, for each matmul of a batch at its offsets (run_batched's contract); the plan's
        // layouts describe exactly those shapes; the workspace is WORKSPACE_BYTES long and only
        // used on this stream.
        unsafe {
            result::matmul(
                self.handle,
                plan.desc,
                &alpha as *const f32 as *const c_void,
                &beta as *const f32 as *const c_void,
                w as *const c_void,
                plan.a,
                x as *const c_void,
                plan.b,
                y as *const c_void,
                plan.d,
                y as *mut c_void,
                plan.d,
                &plan.algo,
                ws,
                WORKSPACE_BYTES,
                stream,
            )
        }
        .map_err(|e| err("matmul", e))
    }
}

impl Drop for Gemm {
    fn drop(&mut self) {
        for (_, p) in self.plans.drain() {
            destroy(p);
        }
        // SAFETY: the handle was created in new and is not used after this.
        unsafe {
            let _ = result::destroy_handle(self.handle);
        }
    }
}
