//! Prometheus metrics with vLLM's names (`vllm:*`), so existing dashboards, alerts and routers
//! work unchanged; what vLLM lacks is under `hearth:`. Engine gauges and counters are read from
//! `EngineStats` at scrape time; per-request histograms are recorded here as requests finish.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use hearth_runtime::{EngineStats, FinishReason, RequestMetrics};

/// A cumulative histogram with fixed bucket bounds.
#[derive(Debug)]
struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
        }
    }

    fn observe(&mut self, v: f64) {
        for (b, c) in self.bounds.iter().zip(&mut self.counts) {
            if v <= *b {
                *c += 1;
            }
        }
        self.sum += v;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, help: &str, labels: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{b}\"}} {c}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

const LATENCY: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
];
const TOKENS: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0,
];

#[derive(Debug)]
struct Histograms {
    ttft: Histogram,
    itl: Histogram,
    e2e: Histogram,
    queue: Histogram,
    prompt_tokens: Histogram,
    generation_tokens: Histogram,
}

/// Server-side metrics; engine-side ones come from `EngineStats` at render time.
#[derive(Debug)]
pub struct Metrics {
    model_name: String,
    // The histograms are updated together from request tasks and read at scrape time; a mutex
    // keeps each observation consistent across them.
    hist: Mutex<Histograms>,
    finished: [AtomicU64; 3],
    pub tool_parse_failures: AtomicU64,
    /// Startup phases and their seconds (load weights, plan memory, ...), fixed after startup.
    startup: Vec<(String, f64)>,
}

impl Metrics {
    pub fn new(model_name: &str) -> Self {
        Metrics {
            model_name: model_name.replace(['"', '\\', '\n'], "_"),
            hist: Mutex::new(Histograms {
                ttft: Histogram::new(LATENCY),
                itl: Histogram::new(LATENCY),
                e2e: Histogram::new(LATENCY),
                queue: Histogram::new(LATENCY),
                prompt_tokens: Histogram::new(TOKENS),
                generation_tokens: Histogram::new(TOKENS),
            }),
            finished: Default::default(),
            tool_parse_failures: AtomicU64::new(0),
            startup: Vec::new(),
        }
    }

    /// Adds the startup phase durations (exported as `hearth:startup_phase_seconds`).
    pub fn with_startup(mut self, phases: Vec<(String, f64)>) -> Self {
        self.startup = phases;
        self
    }

    /// Records one finished sample.
    pub fn observe(&self, m: &RequestMetrics, reason: FinishReason) {
        let i = match reason {
            FinishReason::Stop => 0,
            FinishReason::Length => 1,
            FinishReason::Abort => 2,
        };
        self.finished[i].fetch_add(1, Ordering::Relaxed);
        if let Ok(mut h) = self.hist.lock() {
            h.ttft.observe(m.ttft.as_secs_f64());
            if m.generated_tokens > 1 {
                h.itl.observe(m.mean_itl.as_secs_f64());
            }
            h.e2e.observe(m.e2e.as_secs_f64());
            h.queue.observe(m.queue_time.as_secs_f64());
            h.prompt_tokens.observe(m.prompt_tokens as f64);
            h.generation_tokens.observe(m.generated_tokens as f64);
        }
    }

    /// The Prometheus text exposition (format 0.0.4).
    pub fn render(&self, s: &EngineStats) -> String {
        let l = format!("model_name=\"{}\",engine=\"0\"", self.model_name);
        let mut out = String::new();
        let mut one = |name: &str, kind: &str, help: &str, v: f64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{{l}}} {v}"
            );
        };
        one(
            "vllm:num_requests_running",
            "gauge",
            "Requests in model execution batches.",
            s.sched.running as f64,
        );
        one(
            "vllm:num_requests_waiting",
            "gauge",
            "Requests waiting to be processed.",
            s.sched.waiting as f64,
        );
        one(
            "vllm:kv_cache_usage_perc",
            "gauge",
            "KV-cache usage. 1 means 100 percent usage.",
            s.kv_usage(),
        );
        one(
            "vllm:prefix_cache_queries_total",
            "counter",
            "Prefix cache queries, in tokens.",
            s.sched.prefix_query_tokens as f64,
        );
        one(
            "vllm:prefix_cache_hits_total",
            "counter",
            "Prefix cache hits, in tokens.",
            s.sched.prefix_hit_tokens as f64,
        );
        one(
            "vllm:num_preemptions_total",
            "counter",
            "Cumulative number of preemptions.",
            s.sched.preemptions as f64,
        );
        one(
            "vllm:prompt_tokens_total",
            "counter",
            "Number of prefill tokens processed.",
            s.prompt_tokens as f64,
        );
        one(
            "vllm:generation_tokens_total",
            "counter",
            "Number of generation tokens processed.",
            s.generation_tokens as f64,
        );
        one(
            "hearth:engine_steps_total",
            "counter",
            "Engine steps run.",
            s.steps as f64,
        );
        one(
            "hearth:seconds_since_last_step",
            "gauge",
            "Seconds since the engine last completed a step while it has work (0 when idle).",
            s.secs_since_step,
        );
        one(
            "hearth:tool_parse_failures_total",
            "counter",
            "Tool calls that could not be parsed (returned as text).",
            self.tool_parse_failures.load(Ordering::Relaxed) as f64,
        );
        let _ = writeln!(
            out,
            "# HELP hearth:startup_phase_seconds Seconds each startup phase took.\n# TYPE \
             hearth:startup_phase_seconds gauge"
        );
        for (phase, secs) in &self.startup {
            let _ = writeln!(
                out,
                "hearth:startup_phase_seconds{{{l},phase=\"{phase}\"}} {secs}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP vllm:iteration_tokens_total Histogram of the number of tokens per engine step.\n\
             # TYPE vllm:iteration_tokens_total histogram"
        );
        for (b, c) in hearth_runtime::ITERATION_TOKEN_BUCKETS
            .iter()
            .zip(&s.iteration_tokens_buckets)
        {
            let _ = writeln!(
                out,
                "vllm:iteration_tokens_total_bucket{{{l},le=\"{b}\"}} {c}"
            );
        }
        let _ = writeln!(
            out,
            "vllm:iteration_tokens_total_bucket{{{l},le=\"+Inf\"}} {}",
            s.steps
        );
        let _ = writeln!(
            out,
            "vllm:iteration_tokens_total_sum{{{l}}} {}",
            s.iteration_tokens_sum
        );
        let _ = writeln!(out, "vllm:iteration_tokens_total_count{{{l}}} {}", s.steps);
        let _ = writeln!(
            out,
            "# HELP vllm:request_success_total Count of successfully processed requests.\n# TYPE \
             vllm:request_success_total counter"
        );
        for (i, reason) in ["stop", "length", "abort"].iter().enumerate() {
            let v = self.finished[i].load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "vllm:request_success_total{{{l},finished_reason=\"{reason}\"}} {v}"
            );
        }
        if let Ok(h) = self.hist.lock() {
            h.ttft.render(
                &mut out,
                "vllm:time_to_first_token_seconds",
                "Histogram of time to first token in seconds.",
                &l,
            );
            h.itl.render(
                &mut out,
                "vllm:inter_token_latency_seconds",
                "Histogram of inter-token latency in seconds.",
                &l,
            );
            h.e2e.render(
                &mut out,
                "vllm:e2e_request_latency_seconds",
                "Histogram of end to end request latency in seconds.",
                &l,
            );
            h.queue.render(
                &mut out,
                "vllm:request_queue_time_seconds",
                "Histogram of time spent in the waiting queue in seconds.",
                &l,
            );
            h.prompt_tokens.render(
                &mut out,
                "vllm:request_prompt_tokens",
                "Number of prefill tokens processed.",
                &l,
            );
            h.generation_tokens.render(
                &mut out,
                "vllm:request_generation_tokens",
                "Number of generation tokens processed.",
                &l,
            );
        }
        out
    }
}
