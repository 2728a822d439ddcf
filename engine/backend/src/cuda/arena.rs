//! The step arena: activation buffers for one forward pass, handed out by bumping an offset in
//! one device allocation and all released at once by the next `begin_step`. A forward pass asks
//! for the same buffers in the same order every time, so the addresses repeat across steps of
//! the same shape (what CUDA graph replay needs). When a step outgrows the arena, overflow
//! chunks serve it and the next reset replaces everything with one allocation of the high-water
//! mark, so only the first steps of a new shape allocate.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use crate::BackendError;

/// Buffers start on this boundary (cuBLASLt and 16-byte vector loads want aligned rows).
const ALIGN: usize = 256;

pub struct Arena {
    stream: Arc<CudaStream>,
    chunks: Vec<(CudaSlice<u8>, u64)>,
    /// Bytes used in the last chunk.
    used: usize,
    /// Bytes handed out since the last reset, over all chunks.
    total: usize,
    high_water: usize,
    /// How many times the main allocation was replaced (its addresses moved).
    moves: u64,
}

impl Arena {
    pub fn new(stream: Arc<CudaStream>) -> Self {
        Arena {
            stream,
            chunks: Vec::new(),
            used: 0,
            total: 0,
            high_water: 0,
            moves: 0,
        }
    }

    /// Changes whenever buffers handed out after a reset may live at new addresses.
    pub fn moves(&self) -> u64 {
        self.moves
    }

    /// Capacity of the arena's main allocation.
    pub fn capacity(&self) -> usize {
        self.chunks.first().map_or(0, |(c, _)| c.len())
    }

    /// Makes the arena hold at least `bytes` in one allocation (the memory planner's reserve).
    pub fn reserve(&mut self, bytes: usize) -> Result<(), BackendError> {
        self.high_water = self.high_water.max(bytes);
        self.reset()
    }

    /// Releases every buffer handed out since the last reset.
    pub fn reset(&mut self) -> Result<(), BackendError> {
        self.high_water = self.high_water.max(self.total);
        if self.chunks.len() != 1 || self.capacity() < self.high_water {
            self.moves += 1;
            self.chunks.clear();
            if self.high_water > 0 {
                self.push_chunk(self.high_water)?;
            }
        }
        self.used = 0;
        self.total = 0;
        Ok(())
    }

    fn push_chunk(&mut self, bytes: usize) -> Result<(), BackendError> {
        // SAFETY: arena memory is always written by a kernel before it is read.
        let c = unsafe { self.stream.alloc::<u8>(bytes) }?;
        let ptr = c.device_ptr(&self.stream).0;
        self.chunks.push((c, ptr));
        self.used = 0;
        Ok(())
    }

    /// A device address for `bytes` bytes, valid until the next reset.
    pub fn alloc(&mut self, bytes: usize) -> Result<u64, BackendError> {
        let bytes = bytes.max(1).div_ceil(ALIGN) * ALIGN;
        let fits = self
            .chunks
            .last()
            .is_some_and(|(c, _)| self.used + bytes <= c.len());
        if !fits {
            self.push_chunk(bytes.max(64 << 20))?;
        }
        let (_, base) = self.chunks.last().expect("a chunk was just ensured");
        let ptr = base + self.used as u64;
        self.used += bytes;
        self.total += bytes;
        Ok(ptr)
    }
}
