//! The benchmark's results as data (written as JSON) and as markdown tables (printed and
//! written beside it). The tables are rendered from the same structs, so they always agree
//! with the JSON.

use serde::{Deserialize, Serialize};

use super::load::Batch;
use super::stats::{mean, percentile};

/// Everything one `hearth bench` run measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    pub server: String,
    pub model: String,
    pub max_model_len: Option<u32>,
    /// Whether prompt lengths are exact (the server has `/tokenize`).
    pub exact_prompt_lengths: bool,
    /// Unix seconds when the run started.
    pub started_unix: u64,
    /// Ctrl-C stopped the run; the last stage holds what finished before.
    pub interrupted: bool,
    pub input_len: u32,
    pub output_len: u32,
    pub sweep: Vec<LevelRow>,
    pub depth: Vec<DepthRow>,
    pub prefix_cache: Option<PrefixRow>,
    /// What was clipped, skipped or approximated, for the reader.
    pub notes: Vec<String>,
}

/// One concurrency level of the sweep.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LevelRow {
    pub concurrency: usize,
    pub requests: usize,
    pub completed: usize,
    pub errors: usize,
    pub wall_s: f64,
    /// All requests' output tokens over the level's wall time.
    pub system_tok_s: f64,
    /// The mean of each request's decode rate.
    pub per_request_tok_s: Option<f64>,
    pub ttft_p50_s: Option<f64>,
    pub ttft_p99_s: Option<f64>,
    pub itl_p50_ms: Option<f64>,
    pub itl_p99_ms: Option<f64>,
    pub mean_prompt_tokens: Option<f64>,
    pub output_tokens: u64,
    /// The level was cut short by Ctrl-C.
    pub partial: bool,
    pub first_error: Option<String>,
}

impl LevelRow {
    pub fn from_batch(concurrency: usize, planned: usize, b: &Batch) -> Self {
        let ok: Vec<_> = b.results.iter().filter(|r| r.error.is_none()).collect();
        let ttfts: Vec<f64> = ok.iter().filter_map(|r| r.ttft_s).collect();
        let itls: Vec<f64> = ok.iter().flat_map(|r| r.itls_s.iter().copied()).collect();
        let rates: Vec<f64> = ok.iter().filter_map(|r| r.decode_tok_s).collect();
        let prompts: Vec<f64> = ok
            .iter()
            .filter_map(|r| r.prompt_tokens.map(f64::from))
            .collect();
        let output_tokens: u64 = ok.iter().map(|r| u64::from(r.output_tokens)).sum();
        Self {
            concurrency,
            requests: planned,
            completed: ok.len(),
            errors: b.results.len() - ok.len(),
            wall_s: b.wall_s,
            system_tok_s: if b.wall_s > 0.0 {
                output_tokens as f64 / b.wall_s
            } else {
                0.0
            },
            per_request_tok_s: mean(&rates),
            ttft_p50_s: percentile(&ttfts, 50.0),
            ttft_p99_s: percentile(&ttfts, 99.0),
            itl_p50_ms: percentile(&itls, 50.0).map(|s| s * 1e3),
            itl_p99_ms: percentile(&itls, 99.0).map(|s| s * 1e3),
            mean_prompt_tokens: mean(&prompts),
            output_tokens,
            partial: b.interrupted,
            first_error: b.results.iter().find_map(|r| r.error.clone()),
        }
    }
}

/// Prefill and decode speed with `depth` tokens of context before the measured prompt.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DepthRow {
    pub depth: u32,
    pub prompt_tokens: Option<f64>,
    pub reps: usize,
    pub errors: usize,
    /// Prompt tokens over time to first token (the whole prompt is prefilled).
    pub prefill_tok_s: Option<f64>,
    pub decode_tok_s: Option<f64>,
    pub ttft_s: Option<f64>,
    pub first_error: Option<String>,
}

/// Requests sharing one long prefix, with the server's prefix-cache hit rate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PrefixRow {
    pub prefix_tokens: u32,
    pub suffix_tokens: u32,
    pub requests: usize,
    pub concurrency: usize,
    pub errors: usize,
    /// vllm:prefix_cache_hits / vllm:prefix_cache_queries over the measured requests.
    pub hit_rate: Option<f64>,
    /// Sum of usage.prompt_tokens_details.cached_tokens over prompt tokens, when reported.
    pub cached_fraction: Option<f64>,
    /// The first request, which fills the cache.
    pub ttft_cold_s: Option<f64>,
    pub ttft_warm_p50_s: Option<f64>,
    pub system_tok_s: f64,
}

/// `12.3` / `-` for a missing value.
pub fn num(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.decimals$}"))
}

fn secs(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.3} s"))
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.1} ms"))
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{:.1}%", v * 100.0))
}

impl Report {
    /// The whole report as markdown: a heading line, then one table per mode that ran.
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "`hearth bench` of {} at {}: prompts of {} tokens ({}), {} output tokens (ignore_eos){}\n",
            self.model,
            self.server,
            self.input_len,
            if self.exact_prompt_lengths {
                "exact, via /tokenize"
            } else {
                "approximate: the server has no /tokenize"
            },
            self.output_len,
            if self.interrupted {
                "; INTERRUPTED, partial results"
            } else {
                ""
            },
        );
        if !self.sweep.is_empty() {
            s.push('\n');
            s.push_str(&self.sweep_table());
        }
        if !self.depth.is_empty() {
            s.push('\n');
            s.push_str(&self.depth_table());
        }
        if let Some(p) = &self.prefix_cache {
            s.push('\n');
            s.push_str(&prefix_table(p));
        }
        for n in &self.notes {
            s.push_str(&format!("\n- {n}"));
        }
        if !self.notes.is_empty() {
            s.push('\n');
        }
        s
    }

    pub fn sweep_table(&self) -> String {
        let mut s = String::from(
            "| Concurrency | System tok/s | Per-req tok/s | TTFT p50 | TTFT p99 | ITL p50 | ITL p99 | Errors |\n\
             |---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for r in &self.sweep {
            s.push_str(&format!(
                "| {}{} | {:.1} | {} | {} | {} | {} | {} | {} |\n",
                r.concurrency,
                if r.partial { " (partial)" } else { "" },
                r.system_tok_s,
                num(r.per_request_tok_s, 1),
                secs(r.ttft_p50_s),
                secs(r.ttft_p99_s),
                ms(r.itl_p50_ms),
                ms(r.itl_p99_ms),
                r.errors,
            ));
        }
        s
    }

    pub fn depth_table(&self) -> String {
        let mut s = String::from(
            "| Depth | Prompt tokens | Prefill tok/s | Decode tok/s | TTFT | Errors |\n\
             |---:|---:|---:|---:|---:|---:|\n",
        );
        for r in &self.depth {
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                r.depth,
                num(r.prompt_tokens, 0),
                num(r.prefill_tok_s, 1),
                num(r.decode_tok_s, 1),
                secs(r.ttft_s),
                r.errors,
            ));
        }
        s
    }
}

fn prefix_table(p: &PrefixRow) -> String {
    format!(
        "| Shared prefix | Own suffix | Requests | Concurrency | Hit rate (server) | Cached (usage) | TTFT cold | TTFT warm p50 | System tok/s | Errors |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n\
         | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {} |\n",
        p.prefix_tokens,
        p.suffix_tokens,
        p.requests,
        p.concurrency,
        pct(p.hit_rate),
        pct(p.cached_fraction),
        secs(p.ttft_cold_s),
        secs(p.ttft_warm_p50_s),
        p.system_tok_s,
        p.errors,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::load::RequestResult;

    fn ok(ttft: f64, e2e: f64, tokens: u32) -> RequestResult {
        RequestResult {
            prompt_tokens: Some(100),
            output_tokens: tokens,
            ttft_s: Some(ttft),
            e2e_s: e2e,
            decode_tok_s: Some(f64::from(tokens - 1) / (e2e - ttft)),
            itls_s: vec![0.01, 0.02],
            ..Default::default()
        }
    }

    #[test]
    fn a_level_summarizes_its_requests_and_the_table_row_matches() {
        let batch = Batch {
            results: vec![
                ok(0.1, 1.1, 11),
                ok(0.3, 1.3, 11),
                RequestResult {
                    error: Some("HTTP 503".into()),
                    ..Default::default()
                },
            ],
            wall_s: 2.0,
            interrupted: false,
        };
        let row = LevelRow::from_batch(2, 3, &batch);
        assert_eq!((row.completed, row.errors, row.output_tokens), (2, 1, 22));
        assert_eq!(row.system_tok_s, 11.0);
        assert_eq!(row.per_request_tok_s, Some(10.0));
        assert!((row.ttft_p50_s.unwrap() - 0.2).abs() < 1e-12);
        assert_eq!(row.first_error.as_deref(), Some("HTTP 503"));
        let report = Report {
            sweep: vec![row],
            ..Default::default()
        };
        let table = report.sweep_table();
        let last = table.lines().last().unwrap();
        assert_eq!(
            last,
            "| 2 | 11.0 | 10.0 | 0.200 s | 0.298 s | 15.0 ms | 20.0 ms | 1 |"
        );
        assert!(table.starts_with("| Concurrency | System tok/s | Per-req tok/s | TTFT"));
    }
}
