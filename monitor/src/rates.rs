//! Throughput from the engine's own numbers: the counters on its /metrics (vLLM's names:
//! `vllm:prompt_tokens_total`, `vllm:generation_tokens_total`, plus the gauges and counters the
//! watchdog reads) turned into tokens per second over a short window, and vLLM's stats log line
//! (`Engine 000: Avg prompt throughput: X tokens/s, Avg generation throughput: Y tokens/s, ...`).
//!
//! A counter that goes down means the engine restarted: the window starts over from that
//! sample instead of producing a negative (or, worse, a huge) rate.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The numbers the monitor reads from one /metrics scrape.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Sample {
    pub prompt_tokens: f64,
    pub generation_tokens: f64,
    /// `hearth:engine_steps_total`; 0 on engines that lack it.
    pub steps: f64,
    pub running: f64,
    pub waiting: f64,
}

impl Sample {
    /// Reads the Prometheus text exposition; None when the token counters are missing
    /// (not a Hearth or vLLM engine, or not ready).
    pub fn parse(text: &str) -> Option<Self> {
        let prompt_tokens = sum(text, "vllm:prompt_tokens_total")?;
        let generation_tokens = sum(text, "vllm:generation_tokens_total")?;
        Some(Sample {
            prompt_tokens,
            generation_tokens,
            steps: sum(text, "hearth:engine_steps_total").unwrap_or(0.0),
            running: sum(text, "vllm:num_requests_running").unwrap_or(0.0),
            waiting: sum(text, "vllm:num_requests_waiting").unwrap_or(0.0),
        })
    }
}

/// The sum of a metric's samples over all label sets; None when it has none.
fn sum(text: &str, name: &str) -> Option<f64> {
    let mut total = None;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let value = if rest.starts_with('{') {
            rest.rsplit_once('}').map(|(_, v)| v)
        } else if rest.starts_with(' ') {
            Some(rest)
        } else {
            None // a longer name that starts with this one
        };
        let Some(v) = value.and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok()) else {
            continue;
        };
        *total.get_or_insert(0.0) += v;
    }
    total
}

/// Prefill and decode tokens per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    pub prefill: f64,
    pub decode: f64,
}

/// Samples over the last `window`; a rate once they span at least half of it.
#[derive(Debug)]
pub struct RateWindow {
    window: Duration,
    samples: VecDeque<(Instant, f64, f64)>,
}

impl RateWindow {
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            samples: VecDeque::new(),
        }
    }

    /// Adds a scrape and returns the rates over the window, if it is long enough.
    pub fn push(&mut self, at: Instant, s: &Sample) -> Option<Rates> {
        let reset = self
            .samples
            .back()
            .is_some_and(|&(_, p, g)| s.prompt_tokens < p || s.generation_tokens < g);
        if reset {
            self.samples.clear();
        }
        self.samples
            .push_back((at, s.prompt_tokens, s.generation_tokens));
        while self
            .samples
            .get(1)
            .is_some_and(|&(t, _, _)| at.duration_since(t) >= self.window)
        {
            self.samples.pop_front();
        }
        let &(t0, p0, g0) = self.samples.front()?;
        let span = at.duration_since(t0);
        if span < self.window / 2 || span.is_zero() {
            return None;
        }
        let secs = span.as_secs_f64();
        Some(Rates {
            prefill: (s.prompt_tokens - p0) / secs,
            decode: (s.generation_tokens - g0) / secs,
        })
    }

    pub fn clear(&mut self) {
        self.samples.clear();
    }
}

/// The rates of vLLM's stats log line, if `line` is one.
pub fn stats_line(line: &str) -> Option<Rates> {
    let number_after = |key: &str| -> Option<f64> {
        let rest = &line[line.find(key)? + key.len()..];
        rest.trim_start()
            .split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .next()?
            .parse()
            .ok()
    };
    Some(Rates {
        prefill: number_after("Avg prompt throughput:")?,
        decode: number_after("Avg generation throughput:")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const METRICS: &str = "# HELP vllm:num_requests_running Requests.\n\
        # TYPE vllm:num_requests_running gauge\n\
        vllm:num_requests_running{model_name=\"m\",engine=\"0\"} 2\n\
        vllm:prompt_tokens_total{model_name=\"m\",engine=\"0\"} 1200\n\
        vllm:generation_tokens_total{model_name=\"m\",engine=\"0\"} 340\n\
        vllm:generation_tokens_total_extra 99\n\
        hearth:engine_steps_total{model_name=\"m\",engine=\"0\"} 77\n";

    #[test]
    fn reads_the_engines_counters() {
        let s = Sample::parse(METRICS).unwrap();
        assert_eq!(s.prompt_tokens, 1200.0);
        assert_eq!(s.generation_tokens, 340.0);
        assert_eq!(s.steps, 77.0);
        assert_eq!(s.running, 2.0);
        assert_eq!(s.waiting, 0.0);
        assert!(Sample::parse("vllm:num_requests_running 1\n").is_none());
    }

    #[test]
    fn rates_over_the_window_and_counter_resets() {
        let t = Instant::now();
        let s = |p: f64, g: f64| Sample {
            prompt_tokens: p,
            generation_tokens: g,
            ..Sample::default()
        };
        let mut w = RateWindow::new(Duration::from_secs(10));
        assert_eq!(w.push(t, &s(0.0, 0.0)), None);
        assert_eq!(w.push(t + Duration::from_secs(2), &s(100.0, 10.0)), None);
        let r = w.push(t + Duration::from_secs(5), &s(500.0, 50.0)).unwrap();
        assert_eq!((r.prefill, r.decode), (100.0, 10.0));
        // Old samples leave the window.
        let r = w
            .push(t + Duration::from_secs(15), &s(600.0, 150.0))
            .unwrap();
        assert_eq!((r.prefill, r.decode), (10.0, 10.0));
        // The engine restarted: counters from zero; no negative rate, the window restarts.
        assert_eq!(w.push(t + Duration::from_secs(17), &s(5.0, 1.0)), None);
        let r = w.push(t + Duration::from_secs(22), &s(55.0, 11.0)).unwrap();
        assert_eq!((r.prefill, r.decode), (10.0, 2.0));
    }

    #[test]
    fn parses_vllms_stats_line() {
        let line = "2026-11-23T17:49:57.1Z  INFO hearth_runtime::engine: Engine 000: Avg prompt \
                    throughput: 1234.5 tokens/s, Avg generation throughput: 67.0 tokens/s, \
                    Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2%, Prefix cache \
                    hit rate: 0.0%";
        assert_eq!(
            stats_line(line),
            Some(Rates {
                prefill: 1234.5,
                decode: 67.0
            })
        );
        assert_eq!(stats_line("Avg prompt throughput: 1 tokens/s"), None);
    }
}
