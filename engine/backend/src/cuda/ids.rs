//! Greedy token ids on their way to the host. Each `argmax_deferred` writes its ids into one of
//! two slots (a device buffer, a pinned host copy, and the event recorded after the copy was
//! queued), alternating, so the next step can be queued, its tokens copied from the last slot
//! on the device (`begin_fed_step`), before the host waits for the ids of the step before it.

use std::sync::Arc;

use cudarc::driver::{result, CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr};

use super::upload::Pinned;
use crate::BackendError;

/// Ids of one `argmax_deferred`: the slot they went to, how many, and the write's number (a
/// slot written again since no longer holds them).
#[derive(Debug)]
pub struct CudaIds {
    slot: usize,
    rows: usize,
    write: u64,
}

struct Slot {
    dev: CudaSlice<u32>,
    host: Pinned,
    done: CudaEvent,
    /// The write whose ids the slot holds.
    write: u64,
}

#[derive(Default)]
pub struct IdSlots {
    slots: [Option<Slot>; 2],
    /// Writes so far; the next goes to slot `writes % 2`.
    writes: u64,
    /// Device address and row count of the last write.
    last: Option<(u64, usize)>,
}

// SAFETY: the pinned buffers are plain host memory owned here; the slots are only used from the
// thread holding the backend's state lock.
unsafe impl Send for IdSlots {}

impl IdSlots {
    /// Queues a copy of `rows` ids from `fill` (which writes them to the device address it is
    /// given) to the host, in the next slot.
    pub fn write(
        &mut self,
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        rows: usize,
        fill: impl FnOnce(u64) -> Result<(), BackendError>,
    ) -> Result<CudaIds, BackendError> {
        let i = (self.writes % 2) as usize;
        self.writes += 1;
        let fits = self.slots[i]
            .as_ref()
            .is_some_and(|s| s.host.len >= 4 * rows);
        if !fits {
            if let Some(old) = &self.slots[i] {
                // Its last copy must land before the pinned buffer is freed.
                old.done.synchronize()?;
            }
            let cap = rows.next_power_of_two().max(256);
            self.slots[i] = Some(Slot {
                // SAFETY: ids are written by `fill` before anything reads them.
                dev: unsafe { stream.alloc::<u32>(cap) }?,
                host: Pinned::new(4 * cap)?,
                done: ctx.new_event(None)?,
                write: 0,
            });
        }
        let slot = self.slots[i].as_mut().expect("the slot was just ensured");
        let dev = slot.dev.device_ptr(stream).0;
        if rows > 0 {
            fill(dev)?;
            // SAFETY: the pinned buffer holds at least `rows` u32 (checked above) and is only
            // read after `done` passes; the device ids are written by `fill`, queued before.
            unsafe {
                let host = std::slice::from_raw_parts_mut(slot.host.ptr as *mut u32, rows);
                result::memcpy_dtoh_async(host, dev, stream.cu_stream())?;
            }
        }
        slot.done.record(stream)?;
        slot.write = self.writes;
        self.last = Some((dev, rows));
        Ok(CudaIds {
            slot: i,
            rows,
            write: self.writes,
        })
    }

    /// Waits for `ids` to reach the host and returns them.
    pub fn read(&self, ids: CudaIds) -> Result<Vec<u32>, BackendError> {
        let slot = self.slots[ids.slot]
            .as_ref()
            .expect("ids come from a written slot");
        assert_eq!(
            slot.write, ids.write,
            "greedy ids read after two later argmaxes reused their slot"
        );
        slot.done.synchronize()?;
        // SAFETY: the copy of `rows` ids into the pinned buffer has completed (the event above).
        let host = unsafe { std::slice::from_raw_parts(slot.host.ptr as *const u32, ids.rows) };
        Ok(host.to_vec())
    }

    /// Device address and row count of the last write's ids, if any.
    pub fn last(&self) -> Option<(u64, usize)> {
        self.last
    }
}
