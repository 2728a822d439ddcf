//! What ops read and write besides weights: activation buffers (f32, or bf16 where only
//! cuBLASLt reads them) and the paged KV cache of all layers.

use cudarc::driver::CudaSlice;

use crate::ops::{KvCacheSpec, KvDtype};

/// An activation buffer in the step arena (see `arena`), valid until the next step: f32, or
/// bf16 where it only feeds matmuls (the output of a norm or a SiLU product over more rows than
/// the GEMVs take, `CudaBackend::matmul_input_bf16`), which saves the matmul a conversion pass.
/// `to_host` gives f32 either way.
#[derive(Debug, Clone, Copy)]
pub struct CudaBuf {
    pub(super) ptr: u64,
    /// Values.
    pub(super) len: usize,
    /// Bytes.
    pub(super) cap: usize,
    pub(super) bf16: bool,
}

impl CudaBuf {
    /// Panics when a kernel that reads f32 is handed a bf16 buffer.
    pub(super) fn f32(&self, op: &str) -> u64 {
        assert!(
            !self.bf16,
            "{op}: takes an f32 activation buffer, got a bf16 one"
        );
        self.ptr
    }
}

/// The paged KV cache (bf16 or fp8 e4m3 elements), all layers in one K and one V allocation.
pub struct CudaKvCache {
    pub(super) spec: KvCacheSpec,
    pub(super) _k: CudaSlice<u8>,
    pub(super) _v: CudaSlice<u8>,
    pub(super) k: u64,
    pub(super) v: u64,
}

impl CudaKvCache {
    pub(super) fn layer(&self, layer: usize) -> (u64, u64) {
        let s = &self.spec;
        let elems = s.num_blocks * s.block_size * s.num_kv_heads * s.head_dim;
        let off = (layer * elems * s.dtype.bytes()) as u64;
        (self.k + off, self.v + off)
    }

    pub(super) fn fp8(&self) -> bool {
        self.spec.dtype == KvDtype::Fp8E4m3
    }
}
