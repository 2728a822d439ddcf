//! Engine statistics the server exports: scheduler gauges and counters plus token totals.

use hearth_sched::SchedStats;

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
}
