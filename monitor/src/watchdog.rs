//! The hang rule, as plain state: the engine is hung when requests are running and none of its
//! progress counters (prompt tokens, generated tokens, engine steps) has moved for `hang_after`.
//! Progress counters, not latency: a long prefill still counts prompt tokens and steps, and a
//! queue of waiting requests behind a busy batch still counts generated tokens, so saturation
//! is never mistaken for a hang. A scrape that gets no answer is no progress (a stopped or
//! wedged engine often stops answering /metrics too); the running count is the last one seen.
//! An engine that answered /metrics in this run and then gives no answer at all for
//! `hang_after` is hung too, running requests or not: its server no longer responds (an engine
//! that is still starting up has never answered, and is left alone).

use std::time::{Duration, Instant};

use crate::rates::Sample;

#[derive(Debug)]
pub struct Watchdog {
    hang_after: Duration,
    /// The progress counters last seen and when they last moved.
    last: Option<(f64, f64, f64)>,
    moved_at: Instant,
    running: f64,
    /// When /metrics last answered.
    answered_at: Option<Instant>,
}

/// What the watchdog concluded from one scrape.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Fine,
    /// Requests running, progress counters still.
    Hung {
        running: f64,
        stalled: Duration,
    },
    /// It answered /metrics before and has not for this long.
    Silent {
        running: f64,
        silent: Duration,
    },
}

impl Verdict {
    /// What the watchdog writes down before it acts; None when there is nothing to do.
    pub fn reason(&self) -> Option<String> {
        match self {
            Verdict::Fine => None,
            Verdict::Hung { running, stalled } => Some(format!(
                "watchdog: {running} request(s) running and no progress (prompt tokens, \
                 generated tokens, engine steps) for {} s",
                stalled.as_secs()
            )),
            Verdict::Silent { running, silent } => Some(format!(
                "watchdog: the engine has not answered /metrics for {} s ({running} request(s) \
                 running when it last did)",
                silent.as_secs()
            )),
        }
    }
}

impl Watchdog {
    pub fn new(hang_after: Duration, now: Instant) -> Self {
        Self {
            hang_after,
            last: None,
            moved_at: now,
            running: 0.0,
            answered_at: None,
        }
    }

    /// Forgets everything (a new engine run, or after acting).
    pub fn reset(&mut self, now: Instant) {
        *self = Watchdog::new(self.hang_after, now);
    }

    /// Feeds one scrape (None: no answer).
    pub fn observe(&mut self, sample: Option<&Sample>, now: Instant) -> Verdict {
        if let Some(s) = sample {
            let progress = (s.prompt_tokens, s.generation_tokens, s.steps);
            if self.last != Some(progress) || s.running <= 0.0 {
                self.moved_at = now;
            }
            self.last = Some(progress);
            self.running = s.running;
            self.answered_at = Some(now);
        }
        let stalled = now.duration_since(self.moved_at);
        let silent = self.answered_at.map(|t| now.duration_since(t));
        if silent.is_some_and(|d| d >= self.hang_after) {
            Verdict::Silent {
                running: self.running,
                silent: silent.unwrap_or_default(),
            }
        } else if self.running > 0.0 && self.last.is_some() && stalled >= self.hang_after {
            Verdict::Hung {
                running: self.running,
                stalled,
            }
        } else {
            Verdict::Fine
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(running: f64, prompt: f64, generated: f64, steps: f64) -> Sample {
        Sample {
            prompt_tokens: prompt,
            generation_tokens: generated,
            steps,
            running,
            waiting: 0.0,
        }
    }

    #[test]
    fn running_without_progress_is_a_hang_after_the_limit() {
        let t = Instant::now();
        let sec = |n| t + Duration::from_secs(n);
        let mut w = Watchdog::new(Duration::from_secs(10), t);
        assert_eq!(w.observe(Some(&s(1.0, 10.0, 5.0, 3.0)), t), Verdict::Fine);
        assert_eq!(
            w.observe(Some(&s(1.0, 10.0, 5.0, 3.0)), sec(9)),
            Verdict::Fine
        );
        assert_eq!(
            w.observe(Some(&s(1.0, 10.0, 5.0, 3.0)), sec(10)),
            Verdict::Hung {
                running: 1.0,
                stalled: Duration::from_secs(10)
            }
        );
        w.reset(sec(10));
        assert_eq!(
            w.observe(None, sec(30)),
            Verdict::Fine,
            "nothing known after a reset"
        );
    }

    #[test]
    fn no_answer_while_running_counts_as_no_progress() {
        let t = Instant::now();
        let mut w = Watchdog::new(Duration::from_secs(5), t);
        w.observe(Some(&s(2.0, 1.0, 1.0, 1.0)), t);
        assert_eq!(w.observe(None, t + Duration::from_secs(4)), Verdict::Fine);
        assert!(matches!(
            w.observe(None, t + Duration::from_secs(6)),
            Verdict::Silent { running: 2.0, .. }
        ));
    }

    #[test]
    fn an_engine_that_stops_answering_is_hung_but_one_starting_up_is_not() {
        let t = Instant::now();
        let sec = |n| t + Duration::from_secs(n);
        let mut w = Watchdog::new(Duration::from_secs(5), t);
        // Starting up: never answered, for longer than the limit.
        assert_eq!(w.observe(None, sec(9)), Verdict::Fine);
        // Idle, answering; then silent.
        assert_eq!(
            w.observe(Some(&s(0.0, 1.0, 1.0, 1.0)), sec(10)),
            Verdict::Fine
        );
        assert_eq!(w.observe(None, sec(14)), Verdict::Fine);
        assert_eq!(
            w.observe(None, sec(15)),
            Verdict::Silent {
                running: 0.0,
                silent: Duration::from_secs(5)
            }
        );
    }

    #[test]
    fn idle_and_saturated_engines_are_not_hung() {
        let t = Instant::now();
        let mut w = Watchdog::new(Duration::from_secs(5), t);
        // Idle: nothing running, nothing moving, for a long time.
        for n in 0..20 {
            let v = w.observe(Some(&s(0.0, 1.0, 1.0, 1.0)), t + Duration::from_secs(n));
            assert_eq!(v, Verdict::Fine);
        }
        // A long prefill: no token generated, but prompt tokens and steps advance.
        for n in 20..40u64 {
            let v = w.observe(
                Some(&s(8.0, 100.0 * n as f64, 1.0, n as f64)),
                t + Duration::from_secs(n),
            );
            assert_eq!(v, Verdict::Fine);
        }
    }
}
