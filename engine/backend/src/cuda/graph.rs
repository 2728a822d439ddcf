//! CUDA graphs for decode steps. A decode batch (one new token per sequence, every row sampled)
//! whose size is one of `DECODE_BATCH_SIZES` runs its whole forward pass as one graph launch
//! instead of ~15 kernel launches per layer. The runtime pads decode batches up to the next size
//! (`ForwardBatch::pad_decode`), and the graph for each size is captured once.
//!
//! What makes replay valid: every address a captured kernel reads is the same at every step of
//! that size. Weights, the KV cache, the cuBLASLt workspace and the attention split buffer are
//! fixed allocations; activations come from the step arena, whose bump allocation hands out the
//! same addresses for the same sequence of ops; step metadata is staged into one fixed buffer
//! at size-determined offsets (block tables last), re-uploaded before each launch. Anything that
//! moves one of those (the arena or a fixed buffer reallocated, a new KV cache) bumps the
//! backend's epoch, which drops every graph; they are captured again on their next use.
//!
//! A size's first step after (re)start runs eagerly (so cuBLASLt plans, rotary tables and
//! buffers exist before capture), its second is captured and launched, later ones replay. While
//! a step replays, op calls only do their arena bookkeeping (`Kernels::skip`); the graph is
//! launched when the step's results are read back.

use std::collections::{BTreeSet, HashMap, HashSet};

use cudarc::driver::sys::{self, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaGraph, CudaStream};

use crate::BackendError;

/// Decode batch sizes with a graph of their own, as in vLLM's capture sizes: exact small
/// batches, then steps that waste at most a few padded rows.
pub const DECODE_BATCH_SIZES: &[usize] = &[
    1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256,
];

/// A decode graph: the step's rows, and whether its one row sees more keys than the one-launch
/// attention takes (`kernels::ROPE_ATTN_MAX_KEYS`: a graph of the three attention kernels).
pub type GraphKey = (usize, bool);

/// What the current step does with its graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Not a graph step, or a graph's first (warm-up) step: ops launch as usual.
    Eager,
    /// Ops are being recorded into this graph.
    Capture(GraphKey),
    /// Ops only allocate; this graph is launched at read-back.
    Replay(GraphKey),
}

pub struct DecodeGraphs {
    graphs: HashMap<GraphKey, CudaGraph>,
    warmed: HashSet<GraphKey>,
    epoch: u64,
    mode: Option<Mode>,
    /// Graph launches so far, and the one (HEARTH_CUDA_PROFILE_REPLAY=N: the N-th) to run
    /// between cuProfilerStart and cuProfilerStop, for `ncu --profile-from-start off` to see
    /// one decode step's kernels.
    replays: usize,
    profile_replay: Option<usize>,
}

impl Default for DecodeGraphs {
    fn default() -> Self {
        DecodeGraphs {
            graphs: HashMap::new(),
            warmed: HashSet::new(),
            epoch: 0,
            mode: None,
            replays: 0,
            profile_replay: std::env::var("HEARTH_CUDA_PROFILE_REPLAY")
                .ok()
                .and_then(|v| v.parse().ok()),
        }
    }
}

// SAFETY: CUDA graph objects are not internally synchronized, so they must not be used from two
// threads at once; DecodeGraphs lives in the backend's state mutex, which serializes every use.
unsafe impl Send for DecodeGraphs {}

impl DecodeGraphs {
    /// Picks the mode of a decode step of graph `key` at backend epoch `epoch`, starting the
    /// capture when it is this graph's turn.
    pub fn begin(
        &mut self,
        stream: &CudaStream,
        key: GraphKey,
        epoch: u64,
    ) -> Result<Mode, BackendError> {
        if epoch != self.epoch {
            self.graphs.clear();
            self.warmed.clear();
            self.epoch = epoch;
        }
        let mode = if self.graphs.contains_key(&key) {
            Mode::Replay(key)
        } else if self.warmed.contains(&key) {
            // Relaxed: the arena may still need to allocate (it then bumps the epoch, and the
            // graph is dropped at the next step).
            stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)?;
            Mode::Capture(key)
        } else {
            self.warmed.insert(key);
            Mode::Eager
        };
        self.mode = Some(mode);
        Ok(mode)
    }

    /// Ends the current step's capture or replay: the step's work is then queued on `stream`.
    /// Called before anything reads the step's results, and harmless when there is no graph.
    pub fn flush(&mut self, stream: &std::sync::Arc<CudaStream>) -> Result<(), BackendError> {
        match self.mode.take() {
            None | Some(Mode::Eager) => Ok(()),
            Some(Mode::Replay(key)) => {
                self.replays += 1;
                let profiled = self.profile_replay == Some(self.replays);
                if profiled {
                    // SAFETY: no arguments; marks the start of the profiled range.
                    unsafe { sys::cuProfilerStart() }.result()?;
                }
                self.graphs[&key].launch()?;
                if profiled {
                    // SAFETY: as above; ends the range.
                    unsafe { sys::cuProfilerStop() }.result()?;
                }
                Ok(())
            }
            Some(Mode::Capture(key)) => {
                let graph = stream
                    .end_capture(CUgraphInstantiate_flags(0))?
                    .ok_or_else(|| {
                        BackendError::Cuda(format!(
                            "capturing the decode graph of {} rows: empty",
                            key.0
                        ))
                    })?;
                graph.launch()?;
                self.graphs.insert(key, graph);
                Ok(())
            }
        }
    }

    /// Sizes with a captured graph, ascending (for the startup log).
    pub fn captured(&self) -> Vec<usize> {
        let sizes: BTreeSet<usize> = self.graphs.keys().map(|k| k.0).collect();
        sizes.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_ascend() {
        assert!(super::DECODE_BATCH_SIZES.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(super::DECODE_BATCH_SIZES[0], 1);
    }
}
