//! TMA descriptors (CUtensorMap) for the kernels that copy through the Tensor Memory
//! Accelerator (gemm_fp8_tma): encoded on the host at each launch (cuTensorMapEncodeTiled
//! touches no GPU state, so it is safe while a graph is captured) and passed by value as a
//! `__grid_constant__` parameter.

use std::ffi::c_void;

use cudarc::driver::sys;
use cudarc::driver::DeviceRepr;

use crate::BackendError;

/// A row-major matrix described for TMA: 2D tiles with the 128-byte swizzle, zeros read past
/// its edges. The kernels' `FtTensorMap`: 128 bytes, 64-byte aligned.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug)]
pub struct TensorMap([u64; 16]);

// SAFETY: 128 plain bytes with the alignment the kernel parameter declares; the driver copies
// them as they are.
unsafe impl DeviceRepr for TensorMap {}

impl TensorMap {
    /// `rows` x `cols` values of `dtype` (`elem` bytes each) at device address `ptr`, each row
    /// `cols` values after the last, read in tiles of `tile_cols` values (128 bytes at most, the
    /// swizzle's width) by `tile_rows` rows.
    pub fn matrix(
        ptr: u64,
        dtype: sys::CUtensorMapDataType,
        elem: usize,
        (rows, cols): (usize, usize),
        (tile_rows, tile_cols): (usize, usize),
    ) -> Result<Self, BackendError> {
        let mut map = sys::CUtensorMap { opaque: [0; 16] };
        let dims = [cols as u64, rows as u64];
        let row_bytes = [(cols * elem) as u64];
        let tile = [tile_cols as u32, tile_rows as u32];
        let steps = [1u32, 1];
        // SAFETY: map is written; dims, tile and steps hold the rank's (2) entries and
        // row_bytes the one stride; the driver checks the address, sizes and alignments and
        // reads no device memory.
        let r = unsafe {
            sys::cuTensorMapEncodeTiled(
                &mut map,
                dtype,
                2,
                ptr as *mut c_void,
                dims.as_ptr(),
                row_bytes.as_ptr(),
                tile.as_ptr(),
                steps.as_ptr(),
                sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
                sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        };
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(BackendError::Cuda(format!(
                "cuTensorMapEncodeTiled ({rows} x {cols} values of {elem} bytes, tiles of \
                 {tile_rows} x {tile_cols}): {r:?}"
            )));
        }
        Ok(TensorMap(map.opaque))
    }
}
