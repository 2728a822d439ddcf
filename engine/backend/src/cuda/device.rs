//! Opening the device: the probe, the backend's construction, memory facts and the copy
//! bandwidth the memory-bound kernels are judged against.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use cudarc::driver::CudaContext;
use cudarc::nvrtc::Ptx;

use super::arena::Arena;
use super::gemm::Gemm;
use super::graph::DecodeGraphs;
use super::kernels::{Kernels, FP8_GEMM_MAX_ROWS, GEMV_MAX_ROWS, W8A8_AFTER_ROWS};
use super::{step, CudaBackend, State};

use crate::BackendError;

/// Decode rows up to which the matmuls take the GEMV kernels (each row's products on the CUDA
/// cores, reading the weights once for all rows); more take the tensor-core matmuls
/// (gemm_fp8_tma, cuBLASLt, moe_tc). The GEMVs grow instruction-bound with the rows. On a lent
/// H200 (fp8 KV cache, in process, 1,000-token prompts, output tok/s, one command a model,
/// 2026-11-29), GEMVs against matmuls at:
/// - Qwen3-8B shape, fp8 weights: 2 rows 546 / 450, 4 rows 884 / 945, 8 rows 1,211 / 1,848;
///   bf16 weights: 417 / 383, 715 / 763, 1,070 / 1,439;
/// - GLM-4.7-Flash shape (MoE on dot products against moe_tc, MLA absorbed against not): 4 rows
///   468 / 429, 8 rows 571 / 645.
///
/// So 4: no batch size measured is slower than with the GEMVs up to 8 rows, where 8 rows gain
/// 35-52%. (Dense models alone would gain ~7% more at 4 rows with 2; decode steps of 3 rows run
/// padded to 4.)
const GEMV_ROWS: usize = 4;

/// A row count from the environment variable `name`, else `default`, within `lo..=hi`.
fn env_rows(name: &str, default: usize, (lo, hi): (usize, usize)) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(default)
        .clamp(lo, hi)
}

/// Device facts for the startup log and the memory planner.
#[derive(Debug, Clone)]
pub struct CudaDeviceInfo {
    pub name: String,
    pub free_bytes: usize,
    pub total_bytes: usize,
}

impl CudaBackend {
    /// Whether the CUDA driver and cuBLASLt can be loaded and at least one GPU is visible.
    pub fn probe() -> Result<usize, String> {
        // SAFETY: these only try to dlopen the libraries.
        let (driver, blas) = unsafe {
            (
                cudarc::driver::sys::is_culib_present(),
                cudarc::cublaslt::sys::is_culib_present(),
            )
        };
        if !driver {
            return Err("no CUDA driver library (libcuda.so) found".into());
        }
        if !blas {
            return Err("no cuBLASLt library (libcublasLt.so) found".into());
        }
        let n = CudaContext::device_count().map_err(|e| format!("CUDA driver: {e}"))?;
        if n < 1 {
            return Err("the CUDA driver sees no GPU".into());
        }
        Ok(n as usize)
    }

    pub fn new(ordinal: usize) -> Result<Self, BackendError> {
        let ctx = CudaContext::new(ordinal)?;
        // SAFETY: the backend runs everything on one stream, in order, and frees device memory
        // stream-ordered; cudarc's per-buffer events would only add overhead to every launch.
        unsafe { ctx.disable_event_tracking() };
        // A stream of its own: the legacy default stream cannot be captured into a graph.
        let stream = ctx.new_stream()?;
        let module = ctx.load_module(Ptx::from_binary(kernel_image()?))?;
        let kernels = Kernels::load(&module, stream.clone())?;
        let device_name = ctx.name()?;
        let gemm = Gemm::new(stream.clone())?;
        let w8a8 = gemm.w8a8();
        let w8a8_path = gemm.w8a8_path();
        // W8A8_AFTER_ROWS was measured against gemm_fp8_tma (Hopper); where gemm_fp8 runs on
        // mma.sync, W8A8 keeps to past FP8_GEMM_MAX_ROWS. HEARTH_FP8_W8A8_ROWS sets it (within
        // GEMV_MAX_ROWS..=FP8_GEMM_MAX_ROWS; the kernel path line shows the rows it took).
        let default_after = if kernels.fp8_gemm_on_wgmma() {
            W8A8_AFTER_ROWS
        } else {
            FP8_GEMM_MAX_ROWS
        };
        let w8a8_after = env_rows(
            "HEARTH_FP8_W8A8_ROWS",
            default_after,
            (GEMV_MAX_ROWS, FP8_GEMM_MAX_ROWS),
        );
        let gemv_rows = env_rows("HEARTH_GEMV_ROWS", GEMV_ROWS, (1, GEMV_MAX_ROWS));
        let state = State {
            arena: Arena::new(stream.clone()),
            gemm,
            step: step::Staging::default(),
            scratch: None,
            fused: None,
            dequant: None,
            fp8_parts: None,
            attn_parts: None,
            moe: None,
            moe_grouped: None,
            mla: None,
            mla_parts: None,
            uploader: None,
            graphs: DecodeGraphs::default(),
            ids: Default::default(),
            moves: 0,
        };
        let profile = (std::env::var("HEARTH_CUDA_PROFILE").as_deref() == Ok("1"))
            .then(|| Mutex::new(HashMap::new()));
        // Profiling times each op on its own, which a graph would hide.
        let graphs_allowed =
            profile.is_none() && std::env::var("HEARTH_CUDA_GRAPHS").as_deref() != Ok("0");
        Ok(CudaBackend {
            ctx,
            stream,
            kernels,
            device_name,
            w8a8,
            w8a8_after,
            gemv_rows,
            w8a8_path,
            state: Mutex::new(state),
            graphs_allowed,
            graphs: std::sync::atomic::AtomicBool::new(false),
            profile,
        })
    }

    /// The rows up to which decode matmuls take the GEMV kernels (`GEMV_ROWS`, or
    /// HEARTH_GEMV_ROWS within 1..=GEMV_MAX_ROWS); more rows take the matmuls. A row's bits are
    /// the same in every batch on one side of it.
    pub fn gemv_rows(&self) -> usize {
        self.gemv_rows
    }

    /// The rows past which fp8 matrices run as W8A8 (activations quantized to e4m3 a row at a
    /// time, cuBLASLt's fp8 matmul, the scales applied by cuBLASLt or a pass after it), or None
    /// where they do not: this cuBLASLt and GPU have no fp8 matmuls, or HEARTH_FP8_W8A8=0.
    pub fn fp8_w8a8_after(&self) -> Option<usize> {
        self.w8a8.map(|_| self.w8a8_after)
    }

    /// The weight ring's (launches, batch-1 decode graph captures) so far (HEARTH_RING_DECODE=1;
    /// a token's launches are their ratio), or None when it is off (tests check that it ran).
    pub fn decode_ring_launches(&self) -> Option<(usize, usize)> {
        self.kernels.ring_launches()
    }

    pub fn device_info(&self) -> Result<CudaDeviceInfo, BackendError> {
        let (free, total) = self.ctx.mem_get_info()?;
        Ok(CudaDeviceInfo {
            name: self.device_name.clone(),
            free_bytes: free,
            total_bytes: total,
        })
    }

    /// Sizes the step arena for activations of up to `bytes` (the planner's reserve).
    pub fn reserve_activations(&self, bytes: usize) -> Result<(), BackendError> {
        self.state().arena.reserve(bytes)
    }

    /// Sizes the matmul scratch: `input_bytes` for the bf16 copy of a matmul's input rows,
    /// `fused_bytes` for a fused matmul's output (the planner's reserve, so that no step
    /// allocates after the KV cache took the rest).
    pub fn reserve_scratch(
        &self,
        input_bytes: usize,
        fused_bytes: usize,
    ) -> Result<(), BackendError> {
        self.fixed_buf(|st| &mut st.scratch, input_bytes)?;
        self.fixed_buf(|st| &mut st.fused, fused_bytes)?;
        Ok(())
    }

    /// Bytes the arena holds now (after a warmup step: the activations' real peak).
    pub fn activation_bytes(&self) -> usize {
        self.state().arena.capacity()
    }

    pub fn synchronize(&self) -> Result<(), BackendError> {
        Ok(self.stream.synchronize()?)
    }

    /// Device-to-device copy bandwidth in bytes per second (bytes read plus bytes written) over
    /// a `bytes`-long buffer: the roofline memory-bound kernels are judged against.
    pub fn copy_bandwidth(&self, bytes: usize) -> Result<f64, BackendError> {
        let half = bytes / 2;
        // SAFETY: both buffers are written by the copies below before being read again; the
        // source's contents do not matter to a bandwidth measurement.
        let (src, dst) = unsafe {
            (
                self.stream.alloc::<u8>(half)?,
                self.stream.alloc::<u8>(half)?,
            )
        };
        let (s, d) = (self.dptr(&src), self.dptr(&dst));
        let copy = || {
            // SAFETY: s and d are live allocations of `half` bytes on this stream.
            unsafe {
                cudarc::driver::result::memcpy_dtod_async(d, s, half, self.stream.cu_stream())
            }
        };
        copy()?;
        self.stream.synchronize()?;
        let reps = 20;
        let t0 = Instant::now();
        for _ in 0..reps {
            copy()?;
        }
        self.stream.synchronize()?;
        Ok(2.0 * (half * reps) as f64 / t0.elapsed().as_secs_f64())
    }

    /// Decode batch sizes with a captured graph (for the startup log).
    pub fn captured_graphs(&self) -> Vec<usize> {
        self.state().graphs.captured()
    }
}

/// The kernels' image: the embedded fatbin, or for kernel A/B runs on the GPU machine a cubin
/// or fatbin named by `HEARTH_KERNELS_FILE` (built with nvcc from another version of
/// `engine/kernels/cu`, with the same kernel names and arguments as this binary's).
fn kernel_image() -> Result<Vec<u8>, BackendError> {
    match std::env::var_os("HEARTH_KERNELS_FILE") {
        None => Ok(hearth_kernels::FATBIN.to_vec()),
        Some(path) => {
            let image = std::fs::read(&path).map_err(|e| {
                BackendError::Cuda(format!(
                    "HEARTH_KERNELS_FILE {}: {e}",
                    std::path::Path::new(&path).display()
                ))
            })?;
            eprintln!(
                "kernels from HEARTH_KERNELS_FILE {} ({} bytes), not the embedded fatbin",
                std::path::Path::new(&path).display(),
                image.len()
            );
            Ok(image)
        }
    }
}
