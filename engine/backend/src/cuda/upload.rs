//! Weight upload through pinned staging buffers: each chunk of a weight is copied into one of
//! two page-locked buffers by all cores at once (which also faults in a memory-mapped
//! checkpoint's pages in parallel), then DMA'd to the device asynchronously while the next chunk
//! is being filled. A pageable copy would go through the driver's own small staging buffer on
//! one thread.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{result, CudaContext, CudaEvent, CudaStream};
use rayon::prelude::*;

use crate::BackendError;

/// Bytes per staging buffer.
const STAGE_BYTES: usize = 64 << 20;
/// Bytes each core copies at a time.
const COPY_PIECE: usize = 1 << 20;

/// A page-locked host buffer, freed on drop.
pub(super) struct Pinned {
    pub(super) ptr: *mut u8,
    pub(super) len: usize,
}

impl Pinned {
    pub(super) fn new(len: usize) -> Result<Self, BackendError> {
        // SAFETY: a plain allocation of `len` bytes; freed once, in drop.
        let ptr = unsafe { result::malloc_host(len, 0) }? as *mut u8;
        Ok(Pinned { ptr, len })
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: allocated by malloc_host in new; its owners wait for their copies first.
        unsafe {
            let _ = result::free_host(self.ptr as *mut c_void);
        }
    }
}

pub struct Uploader {
    /// Each buffer with the event recorded after its last copy was queued.
    bufs: [(Pinned, CudaEvent); 2],
    next: usize,
}

// SAFETY: the pinned buffers are plain host memory owned by the uploader; it is only used from
// the thread holding the backend's state lock.
unsafe impl Send for Uploader {}

impl Uploader {
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self, BackendError> {
        let buf = || -> Result<(Pinned, CudaEvent), BackendError> {
            Ok((Pinned::new(STAGE_BYTES)?, ctx.new_event(None)?))
        };
        Ok(Uploader {
            bufs: [buf()?, buf()?],
            next: 0,
        })
    }

    /// Queues a copy of `src` to device address `dst` on `stream`. `src` may be dropped when
    /// this returns; the device copy completes in stream order.
    pub fn copy(&mut self, stream: &CudaStream, dst: u64, src: &[u8]) -> Result<(), BackendError> {
        for (i, chunk) in src.chunks(STAGE_BYTES).enumerate() {
            let (buf, done) = &self.bufs[self.next];
            self.next ^= 1;
            // The buffer's previous chunk must have reached the device before it is refilled.
            done.synchronize()?;
            debug_assert!(chunk.len() <= buf.len);
            // SAFETY: the buffer holds STAGE_BYTES >= chunk.len() bytes and no copy reads it now
            // (synchronized above).
            let stage = unsafe { std::slice::from_raw_parts_mut(buf.ptr, chunk.len()) };
            stage
                .par_chunks_mut(COPY_PIECE)
                .zip(chunk.par_chunks(COPY_PIECE))
                .for_each(|(d, s)| d.copy_from_slice(s));
            let at = dst + (i * STAGE_BYTES) as u64;
            // SAFETY: dst..dst + src.len() is a device allocation of the caller's; the pinned
            // source stays untouched until `done` says the copy finished.
            unsafe { result::memcpy_htod_async(at, &*stage, stream.cu_stream()) }?;
            done.record(stream)?;
        }
        Ok(())
    }
}
