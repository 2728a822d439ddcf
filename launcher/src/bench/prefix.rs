//! Prefix-cache mode: requests that share one long prefix (a system prompt, a document)
//! and differ in a short suffix. The first request fills the cache and gives the cold TTFT;
//! the rest run at a fixed concurrency, and the server's own counters
//! (`vllm:prefix_cache_hits` / `vllm:prefix_cache_queries`) give the hit rate over them.

use super::load::{self, Ctx};
use super::prompt::join;
use super::report::{LevelRow, PrefixRow, Report};
use super::Env;
use crate::client::server;

/// What prefix mode needs beyond the shared context.
#[derive(Debug, Clone)]
pub struct PrefixPlan {
    pub prefix_len: u32,
    pub suffix_len: u32,
    pub output_len: u32,
    pub requests: usize,
    pub concurrency: usize,
    pub seed: u64,
}

pub async fn run(env: &mut Env<'_>, plan: &PrefixPlan, report: &mut Report) -> anyhow::Result<()> {
    let (ctx, maker, progress) = (env.ctx, env.maker, env.progress);
    progress.stage("prefix cache: making prompts");
    let seed = plan.seed ^ (0xCA << 48);
    let prefix = maker.make(seed, plan.prefix_len).await?;
    let mut prompts = Vec::with_capacity(plan.requests + 1);
    for i in 0..=plan.requests {
        let own = maker.make(seed ^ (i as u64 + 1), plan.suffix_len).await?;
        prompts.push(join(&prefix, &own));
    }
    let rest = prompts.split_off(1);
    progress.stage("prefix cache: cold request");
    let cold = tokio::select! {
        r = load::request(ctx, prompts.remove(0), plan.output_len) => r,
        () = env.stop.wait() => return Ok(()),
    };
    progress.done(cold.error.is_some());
    let before = counters(ctx).await;
    progress.stage(&format!("prefix cache: concurrency {}", plan.concurrency));
    let batch = load::run(env, rest, plan.concurrency, plan.output_len).await;
    let after = counters(ctx).await;
    let level = LevelRow::from_batch(plan.concurrency, plan.requests, &batch);
    let hit_rate = match (before, after) {
        (Some((q0, h0)), Some((q1, h1))) if q1 > q0 => Some((h1 - h0) / (q1 - q0)),
        _ => None,
    };
    if hit_rate.is_none() {
        report.notes.push(
            "prefix cache: the server's /metrics has no vllm:prefix_cache_hits/queries counters \
             (or they did not move); no hit rate"
                .into(),
        );
    }
    let ok: Vec<_> = batch.results.iter().filter(|r| r.error.is_none()).collect();
    let cached: Option<u64> = ok
        .iter()
        .map(|r| r.cached_tokens.map(u64::from))
        .sum::<Option<u64>>();
    let prompt_total: u64 = ok
        .iter()
        .filter_map(|r| r.prompt_tokens)
        .map(u64::from)
        .sum();
    let row = PrefixRow {
        prefix_tokens: plan.prefix_len,
        suffix_tokens: plan.suffix_len,
        requests: batch.results.len(),
        concurrency: plan.concurrency,
        errors: level.errors + usize::from(cold.error.is_some()),
        hit_rate,
        cached_fraction: cached
            .filter(|_| prompt_total > 0 && !ok.is_empty())
            .map(|c| c as f64 / prompt_total as f64),
        ttft_cold_s: cold.ttft_s,
        ttft_warm_p50_s: level.ttft_p50_s,
        system_tok_s: level.system_tok_s,
    };
    progress.say(&format!(
        "prefix cache: hit rate {}, TTFT cold {} s, warm p50 {} s",
        row.hit_rate
            .map_or_else(|| "-".into(), |h| format!("{:.1}%", h * 100.0)),
        super::report::num(row.ttft_cold_s, 3),
        super::report::num(row.ttft_warm_p50_s, 3),
    ));
    if batch.interrupted {
        report.interrupted = true;
    }
    report.prefix_cache = Some(row);
    Ok(())
}

async fn counters(ctx: &Ctx) -> Option<(f64, f64)> {
    server::prefix_cache_counters(&server::metrics(&ctx.http, &ctx.target).await?)
}
