//! HEARTH_STEP_TRACE=1: where an engine step's wall time goes (scheduling and batch building,
//! the forward pass up to the sampled ids, and the rest: sampling bookkeeping, sending,
//! scheduler update), averaged and logged every 100 steps with the step's row count. For finding
//! host overhead that per-op GPU profiles do not show.

use std::time::{Duration, Instant};

use tracing::info;

const EVERY: u32 = 100;

#[derive(Debug, Default)]
pub struct StepTrace {
    on: bool,
    steps: u32,
    rows: usize,
    prepare: Duration,
    forward: Duration,
    finish: Duration,
}

/// The marks of one step.
#[derive(Debug)]
pub struct StepMarks {
    start: Instant,
    batch_built: Option<Instant>,
    forward_done: Option<Instant>,
}

impl StepTrace {
    pub fn from_env() -> Self {
        StepTrace {
            on: std::env::var("HEARTH_STEP_TRACE").as_deref() == Ok("1"),
            ..Default::default()
        }
    }

    pub fn start(&self) -> Option<StepMarks> {
        self.on.then(|| StepMarks {
            start: Instant::now(),
            batch_built: None,
            forward_done: None,
        })
    }

    /// Adds a finished step of `rows` rows; logs the averages every EVERY steps.
    pub fn end(&mut self, marks: Option<StepMarks>, rows: usize) {
        let Some(m) = marks else { return };
        let now = Instant::now();
        let built = m.batch_built.unwrap_or(m.start);
        let done = m.forward_done.unwrap_or(built);
        self.steps += 1;
        self.rows += rows;
        self.prepare += built - m.start;
        self.forward += done - built;
        self.finish += now - done;
        if self.steps == EVERY {
            let ms = |d: Duration| format!("{:.3}", d.as_secs_f64() * 1e3 / f64::from(EVERY));
            info!(
                rows = self.rows / EVERY as usize,
                prepare_ms = ms(self.prepare),
                forward_ms = ms(self.forward),
                finish_ms = ms(self.finish),
                "step trace (mean of {EVERY} steps)"
            );
            *self = StepTrace {
                on: true,
                ..Default::default()
            };
        }
    }
}

impl StepMarks {
    pub fn batch_built(&mut self) {
        self.batch_built = Some(Instant::now());
    }

    pub fn forward_done(&mut self) {
        self.forward_done = Some(Instant::now());
    }
}
