//! HEARTH_RING_DIAG=timeline (measurement only): every block of every `decode_ring` launch
//! writes when each step started, finished waiting for the step before, finished staging its
//! input and ended, how long it waited for full slots, and when its producer began the step's
//! copies and how long that waited for empty slots (ring.cu's RING_TL values). When the ring is
//! dropped the last token's timeline is summarised on stderr: where the token's time went, step
//! kind by step kind.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use crate::BackendError;

/// Values a (step, block): ring.cu's RING_TL.
const TL: usize = 11;

/// What the summary needs of a step.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct StepInfo {
    pub kind: i32,
    pub k: i32,
    pub rows: i32,
}

pub(super) struct Timeline {
    buf: CudaSlice<u64>,
    ptr: u64,
    stream: Arc<CudaStream>,
    blocks: usize,
    /// The current capture's steps, by their index in its programs.
    steps: Mutex<Vec<StepInfo>>,
}

impl Timeline {
    pub fn new(
        stream: &Arc<CudaStream>,
        blocks: usize,
        max_steps: usize,
    ) -> Result<Self, BackendError> {
        let buf = stream.alloc_zeros::<u64>(max_steps * blocks * TL)?;
        let ptr = buf.device_ptr(stream).0;
        Ok(Timeline {
            buf,
            ptr,
            stream: stream.clone(),
            blocks,
            steps: Mutex::new(Vec::new()),
        })
    }

    /// Where the launch whose first step is the capture's step `first` writes, noting its steps.
    pub fn launch(&self, first: usize, steps: &[StepInfo]) -> u64 {
        let mut s = self.steps.lock().unwrap_or_else(|e| e.into_inner());
        s.truncate(first);
        s.extend_from_slice(steps);
        self.ptr + (first * self.blocks * TL * 8) as u64
    }

    fn report(&self, v: &[u64]) -> String {
        let steps = self.steps.lock().unwrap_or_else(|e| e.into_inner()).clone();
        summarize(&steps, self.blocks, v)
    }
}

/// The report of a timeline `v` ([step][block][TL]) of `steps` run by `blocks` blocks.
fn summarize(steps: &[StepInfo], blocks: usize, v: &[u64]) -> String {
    let at = |i: usize, b: usize, j: usize| v[(i * blocks + b) * TL + j] as i64;
    let mut out = String::new();
    let Some(first) = (0..blocks).map(|b| at(0, b, 0)).min() else {
        return out;
    };
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    let mut done = first;
    for (i, s) in steps.iter().enumerate() {
        let mean = |f: &dyn Fn(usize) -> i64| {
            (0..blocks).map(|b| f(b) as f64).sum::<f64>() / blocks as f64
        };
        let end = (0..blocks).map(|b| at(i, b, 3)).max().unwrap_or(done);
        let work = |b: usize| at(i, b, 3) - at(i, b, 2);
        let slowest = (0..blocks).max_by_key(|&b| work(b)).unwrap_or(0);
        let fed: Vec<usize> = (0..blocks).filter(|&b| at(i, b, 7) > 0).collect();
        let lead = fed
            .iter()
            .map(|&b| (at(i, b, 2) - at(i, b, 5)) as f64)
            .sum::<f64>()
            / fed.len().max(1) as f64;
        let kind = ["gemv", "swiglu", "norm", "rope", "attn", "merge"]
            .get(s.kind as usize)
            .unwrap_or(&"?");
        let g = groups
            .entry(format!("{kind} k{:>5} n{:>6}", s.k, s.rows))
            .or_default();
        g.steps += 1;
        g.slowest.push(slowest);
        for (a, x) in g.sums.iter_mut().zip([
            (end - done) as f64,
            mean(&|b| (at(i, b, 1) - done).max(0)),
            mean(&|b| at(i, b, 2) - at(i, b, 1)),
            mean(&work),
            work(slowest) as f64,
            mean(&|b| at(i, b, 4)),
            lead,
            mean(&|b| at(i, b, 6)),
            mean(&|b| at(i, b, 8)),
            mean(&|b| at(i, b, 9)),
            mean(&|b| at(i, b, 10) - at(i, b, 3)),
        ]) {
            *a += x;
        }
        done = end;
    }
    let total = (done - first) as f64;
    let _ = writeln!(
        out,
        "ring timeline: {} steps, token {:.1} us. Per step kind: steps, us of the token (%); then a step's mean, us unless kcycles: signal (the step before's last block done -> this block's wait over), staging, work (mean / slowest block), full-slot waits (kcycles), producer lead (its first copy -> staging done), producer empty-slot waits (kcycles), consumer warp 0's dot products (kcycles), its wait for the other warps at the step's end, the release; the blocks most often slowest (block x steps)",
        steps.len(),
        total / 1e3
    );
    let mut rows: Vec<_> = groups.into_iter().collect();
    rows.sort_by(|a, b| b.1.sums[0].total_cmp(&a.1.sums[0]));
    for (label, g) in rows {
        let m: Vec<f64> = g.sums.iter().map(|x| x / g.steps as f64 / 1e3).collect();
        let _ = writeln!(
            out,
            "  {label:<26} {:>4} {:>8.1} ({:>4.1}%)  signal {:>5.2}  stage {:>5.2}  work {:>6.2} / {:>6.2}  fullwait {:>6.2}  lead {:>6.2}  pwait {:>6.2}  dots {:>6.2}  endwait {:>5.2}  release {:>5.2}  slowest {}",
            g.steps,
            g.sums[0] / 1e3,
            100.0 * g.sums[0] / total,
            m[1],
            m[2],
            m[3],
            m[4],
            m[5],
            m[6],
            m[7],
            m[8],
            m[9],
            m[10],
            g.most_slowest()
        );
    }
    out
}

/// One kind of step's sums over its steps (the report's columns) and each step's slowest block.
#[derive(Default)]
struct Group {
    steps: usize,
    sums: [f64; 11],
    slowest: Vec<usize>,
}

impl Group {
    /// The three blocks most often the slowest, as "block x steps".
    fn most_slowest(&self) -> String {
        let mut count: BTreeMap<usize, usize> = BTreeMap::new();
        for &b in &self.slowest {
            *count.entry(b).or_default() += 1;
        }
        let mut top: Vec<_> = count.into_iter().collect();
        top.sort_by_key(|b| std::cmp::Reverse(b.1));
        top.iter()
            .take(3)
            .map(|(b, n)| format!("{b}x{n}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl Drop for Timeline {
    fn drop(&mut self) {
        match self.stream.clone_dtoh(&self.buf) {
            Ok(v) => eprint!("{}", self.report(&v)),
            Err(e) => eprintln!("ring timeline: not read back: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One (step, block) entry: start, wait over, staged, end, full waits, producer's first
    /// copy, its waits, chunks, dot cycles, end-barrier wait, release done.
    fn entry(t: [u64; 4], first_copy: u64, release: u64) -> [u64; TL] {
        [t[0], t[1], t[2], t[3], 0, first_copy, 0, 1, 0, 0, release]
    }

    #[test]
    fn a_token_splits_into_its_steps_and_names_the_slowest_block() {
        let steps = [
            StepInfo {
                kind: 0,
                k: 8,
                rows: 4,
            },
            StepInfo {
                kind: 4,
                k: 0,
                rows: 0,
            },
        ];
        let v: Vec<u64> = [
            entry([1000, 1000, 1100, 2000], 900, 2100),
            entry([1000, 1000, 1200, 3000], 900, 3100),
            entry([2100, 3500, 3500, 4000], 0, 4100),
            entry([3100, 3600, 3600, 5000], 0, 5100),
        ]
        .concat();
        let r = summarize(&steps, 2, &v);
        assert!(r.contains("2 steps, token 4.0 us"), "{r}");
        let gemv = r.lines().find(|l| l.contains("gemv")).unwrap();
        // Half the token; work 0.9 and 1.8 us, block 1 the slowest.
        assert!(
            gemv.contains("2.0 (50.0%)") && gemv.contains("work   1.35 /   1.80"),
            "{gemv}"
        );
        assert!(gemv.ends_with("slowest 1x1"), "{gemv}");
        // Its wait ended 0.5 and 0.6 us after the gemv's last block was done.
        let attn = r.lines().find(|l| l.contains("attn")).unwrap();
        assert!(attn.contains("signal  0.55"), "{attn}");
    }
}
