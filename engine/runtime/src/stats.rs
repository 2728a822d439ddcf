//! Engine statistics the server exports: scheduler gauges and counters plus token totals.

use hearth_sched::SchedStats;

/// Bucket bounds of the tokens-per-step histogram (`vllm:iteration_tokens_total`).
pub const ITERATION_TOKEN_BUCKETS: [f64; 14] = [
    1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0,
    32768.0,
];

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EngineStats {
    pub sched: SchedStats,
    /// Prompt tokens computed (prefix-cache hits excluded; recomputation after preemption
    /// included).
    pub prompt_tokens: u64,
    pub generation_tokens: u64,
    pub steps: u64,
    /// Tokens in the last step.
    pub last_step_tokens: usize,
    /// Cumulative count of steps with at most `ITERATION_TOKEN_BUCKETS[i]` tokens.
    pub iteration_tokens_buckets: [u64; 14],
    pub iteration_tokens_sum: u64,
    pub finished_requests: u64,
    /// Set while the loop has work: seconds since the last completed step (hang detection).
    pub secs_since_step: f64,
}

impl EngineStats {
    pub fn kv_usage(&self) -> f64 {
        self.sched.used_blocks as f64 / self.sched.total_blocks.max(1) as f64
    }

    pub fn prefix_hit_rate(&self) -> f64 {
        self.sched.prefix_hit_tokens as f64 / self.sched.prefix_query_tokens.max(1) as f64
    }

    /// Records one step's token count in the histogram.
    pub fn observe_step(&mut self, tokens: usize) {
        for (b, c) in ITERATION_TOKEN_BUCKETS
            .iter()
            .zip(&mut self.iteration_tokens_buckets)
        {
            if tokens as f64 <= *b {
                *c += 1;
            }
        }
        self.iteration_tokens_sum += tokens as u64;
        self.last_step_tokens = tokens;
    }
}
