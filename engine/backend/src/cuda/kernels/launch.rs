//! One kernel launch, through `cuLaunchKernelEx` so that it can carry programmatic stream
//! serialization (programmatic dependent launch, sm_90 and later): the kernel may then start
//! while the one before it on the stream is still finishing, and waits for it on the GPU with
//! `griddepcontrol.wait` (every kernel in cu/ does: see pdl_begin in common.cuh). That hides the
//! launch gaps of eager steps (prefill chunks, and decode without graphs: Qwen3-8B tg64 148 ->
//! 161 tok/s eagerly) and, since each kernel waits before it lets the next one launch, of decode
//! graphs too (GLM-4.7-Flash tg128 175 -> 181 tok/s). When kernels let the next one launch
//! before waiting, programmatic edges in graphs cost GLM-4.7-Flash's batch-1 decode 153 -> 124
//! tok/s: every small kernel after a running one launched and parked its blocks on the SMs.
//! HEARTH_PDL=1 keeps it outside graphs only, HEARTH_PDL=0 off everywhere.
//!
//! A launch may also group its blocks into thread block clusters (sm_90 and later), which
//! gemm_fp8_tma uses to add its K parts through distributed shared memory.

use std::ffi::c_void;
use std::marker::PhantomData;

use cudarc::driver::sys;
use cudarc::driver::{CudaFunction, CudaStream, DeviceRepr, LaunchConfig};

use crate::BackendError;

/// A launch being built: the kernel, whether it may overlap its predecessor, and pointers to
/// its arguments, which the borrow keeps alive until the launch.
pub struct Launch<'a> {
    stream: &'a CudaStream,
    func: &'a CudaFunction,
    pdl: bool,
    cluster_z: u32,
    args: Vec<*mut c_void>,
    _args: PhantomData<&'a ()>,
}

impl<'a> Launch<'a> {
    pub fn new(stream: &'a CudaStream, func: &'a CudaFunction, pdl: bool) -> Self {
        Launch {
            stream,
            func,
            pdl,
            cluster_z: 1,
            args: Vec::with_capacity(16),
            _args: PhantomData,
        }
    }

    /// The next kernel argument, by reference (the driver copies it at launch).
    pub fn arg<T: DeviceRepr>(&mut self, value: &'a T) -> &mut Self {
        self.args.push(value as *const T as *mut c_void);
        self
    }

    /// Groups the blocks into clusters of `z` blocks along the grid's z (which `z` divides).
    pub fn cluster_z(&mut self, z: u32) -> &mut Self {
        self.cluster_z = z;
        self
    }

    /// Launches the kernel on the stream.
    ///
    /// # Safety
    /// The arguments must match the kernel's signature in number, order and type, and every
    /// pointer among them must be valid for what the kernel does with it.
    pub unsafe fn launch(&mut self, cfg: LaunchConfig) -> Result<(), BackendError> {
        self.stream.context().bind_to_thread()?;
        let mut attrs = Vec::with_capacity(2);
        if self.pdl {
            let mut attr = attribute(
                sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            );
            attr.value.programmaticStreamSerializationAllowed = 1;
            attrs.push(attr);
        }
        if self.cluster_z > 1 {
            attrs.push(cluster_attribute(self.cluster_z));
        }
        let config = sys::CUlaunchConfig {
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: self.stream.cu_stream(),
            attrs: attrs.as_mut_ptr(),
            numAttrs: attrs.len() as u32,
        };
        // SAFETY: config and attrs live across the call; args points to self.args.len() argument
        // values kept alive by the 'a borrows, which the caller promises match the kernel.
        unsafe {
            sys::cuLaunchKernelEx(
                &config,
                self.func.cu_function(),
                self.args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()?;
        Ok(())
    }
}

/// A launch attribute of kind `id` with its value zeroed.
fn attribute(id: sys::CUlaunchAttributeID) -> sys::CUlaunchAttribute {
    sys::CUlaunchAttribute {
        id,
        pad: [0; 4],
        // SAFETY: an all-zero union is a valid value of every one of its fields.
        value: unsafe { std::mem::zeroed() },
    }
}

/// The attribute grouping blocks into clusters of `z` along the grid's z.
pub fn cluster_attribute(z: u32) -> sys::CUlaunchAttribute {
    let mut attr = attribute(sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
    attr.value.clusterDim.x = 1;
    attr.value.clusterDim.y = 1;
    attr.value.clusterDim.z = z;
    attr
}
