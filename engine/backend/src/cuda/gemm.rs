//! cuBLASLt GEMMs for rows past the GEMV kernels: y[m, n] (f32) = x[m, k] (bf16) . W[n, k]^T
//! (bf16), f32 accumulation. One plan (descriptors + the heuristic's algorithm) per shape,
//! built on first use and cached, so steady-state calls do no cuBLASLt setup.
//!
//! cuBLASLt is column-major: row-major y[m, n] is column-major y^T [n, m] = W (column-major
//! [k, n], transposed) . x^T (column-major [k, m]).

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cublaslt::{result, sys};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use crate::BackendError;

/// cuBLASLt's recommended workspace on Hopper and later (32 MiB).
const WORKSPACE_BYTES: usize = 32 << 20;

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
    plans: HashMap<(usize, usize, usize), Plan>,
}

// SAFETY: the handle and plans are only used from the thread that holds the backend's state
// lock; cuBLASLt handles may move between threads when not used concurrently.
unsafe impl Send for Gemm {}

fn err(what: &str, e: impl std::fmt::Debug) -> BackendError {
    BackendError::Cuda(format!("cuBLASLt {what}: {e:?}"))
}

impl Gemm {
    pub fn new(stream: Arc<CudaStream>) -> Result<Self, BackendError> {
        let handle = result::create_handle().map_err(|e| err("create handle", e))?;
        let workspace = stream.alloc_zeros::<u8>(WORKSPACE_BYTES)?;
        Ok(Gemm {
            handle,
            stream,
            workspace,
            plans: HashMap::new(),
        })
    }

    fn plan(&mut self, m: usize, n: usize, k: usize) -> Result<&Plan, BackendError> {
        if !self.plans.contains_key(&(m, n, k)) {
            let plan = self.make_plan(m, n, k)?;
            self.plans.insert((m, n, k), plan);
        }
        Ok(&self.plans[&(m, n, k)])
    }

    fn make_plan(&self, m: usize, n: usize, k: usize) -> Result<Plan, BackendError> {
        use sys::cudaDataType_t::{CUDA_R_16BF, CUDA_R_32F};
        let desc =
            result::create_matmul_desc(sys::cublasComputeType_t::CUBLAS_COMPUTE_32F, CUDA_R_32F)
                .map_err(|e| err("matmul desc", e))?;
        // cublasOperation_t CUBLAS_OP_T (cudarc's cublasLt bindings do not carry the enum).
        let trans: i32 = 1;
        // SAFETY: desc is a live descriptor; the attribute is a cublasOperation_t read by value.
        unsafe {
            result::set_matmul_desc_attribute(
                desc,
                sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
                &trans as *const _ as *const c_void,
                std::mem::size_of_val(&trans),
            )
        }
        .map_err(|e| err("transa", e))?;
        let layout = |ty, rows: usize, cols: usize, ld: usize| {
            result::create_matrix_layout(ty, rows as u64, cols as u64, ld as i64)
                .map_err(|e| err("matrix layout", e))
        };
        let a = layout(CUDA_R_16BF, k, n, k)?;
        let b = layout(CUDA_R_16BF, k, m, k)?;
        let d = layout(CUDA_R_32F, n, m, n)?;
        let pref = result::create_matmul_pref().map_err(|e| err("preference", e))?;
        let ws = WORKSPACE_BYTES;
        // SAFETY: pref is live; the attribute is a size_t read by value. The heuristic reads the
        // live descriptors created above.
        let heuristic = unsafe {
            result::set_matmul_pref_attribute(
                pref,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &ws as *const _ as *const c_void,
                std::mem::size_of_val(&ws),
            )
            .map_err(|e| err("workspace preference", e))?;
            let h = result::get_matmul_algo_heuristic(self.handle, desc, a, b, d, d, pref);
            result::destroy_matmul_pref(pref).map_err(|e| err("destroy preference", e))?;
            h.map_err(|e| err(&format!("no algorithm for m={m} n={n} k={k}"), e))?
        };
        Ok(Plan {
            desc,
            a,
            b,
            d,
            algo: heuristic.algo,
        })
    }

    /// y[m, n] = x[m, k] . w[n, k]^T with x and w bf16 and y f32 (device addresses).
    pub fn run(
        &mut self,
        w: u64,
        x: u64,
        y: u64,
        (m, n, k): (usize, usize, usize),
    ) -> Result<(), BackendError> {
        let (alpha, beta) = (1f32, 0f32);
        let handle = self.handle;
        let stream = self.stream.cu_stream() as sys::cudaStream_t;
        let ws = self.workspace.device_ptr(&self.stream).0 as *mut c_void;
        let plan = self.plan(m, n, k)?;
        // SAFETY: w holds n*k bf16, x m*k bf16 and y m*n f32 (the caller's contract); the plan's
        // layouts describe exactly those shapes; the workspace is WORKSPACE_BYTES long and only
        // used on this stream.
        unsafe {
            result::matmul(
                handle,
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
        .map_err(|e| err(&format!("matmul m={m} n={n} k={k}"), e))
    }
}

impl Drop for Gemm {
    fn drop(&mut self) {
        for (_, p) in self.plans.drain() {
            // SAFETY: each handle was created by make_plan and is destroyed once, here.
            unsafe {
                let _ = result::destroy_matrix_layout(p.a);
                let _ = result::destroy_matrix_layout(p.b);
                let _ = result::destroy_matrix_layout(p.d);
                let _ = result::destroy_matmul_desc(p.desc);
            }
        }
        // SAFETY: the handle was created in new and is not used after this.
        unsafe {
            let _ = result::destroy_handle(self.handle);
        }
    }
}
