//! The concurrency sweep: at each level, `requests` prompts of `input_len` tokens, each
//! generating exactly `output_len` tokens, with the level's number of requests in flight.

use super::load;
use super::report::{LevelRow, Report};
use super::Env;

/// How many requests a level sends: as asked, else twice the level (at least 4), so every
/// worker sends more than one and the level reaches its steady state.
pub fn requests_for(level: usize, asked: Option<usize>) -> usize {
    asked.unwrap_or((2 * level).max(4))
}

/// What the sweep needs beyond the shared context.
#[derive(Debug, Clone)]
pub struct SweepPlan {
    pub levels: Vec<usize>,
    pub requests: Option<usize>,
    pub input_len: u32,
    pub output_len: u32,
    pub seed: u64,
}

pub async fn run(env: &mut Env<'_>, plan: &SweepPlan, report: &mut Report) -> anyhow::Result<()> {
    let (maker, progress) = (env.maker, env.progress);
    for (li, &c) in plan.levels.iter().enumerate() {
        let n = requests_for(c, plan.requests);
        progress.stage(&format!("concurrency {c}: making {n} prompts"));
        let mut prompts = Vec::with_capacity(n);
        for i in 0..n {
            if env.stop.is_set() {
                return Ok(());
            }
            let seed = plan.seed ^ ((li as u64) << 32 | i as u64);
            prompts.push(maker.make(seed, plan.input_len).await?);
        }
        progress.stage(&format!("concurrency {c}"));
        let batch = load::run(env, prompts, c, plan.output_len).await;
        let row = LevelRow::from_batch(c, n, &batch);
        progress.say(&level_line(&row));
        report.sweep.push(row);
        if batch.interrupted {
            break;
        }
    }
    Ok(())
}

/// `concurrency 8: 120.4 tok/s system, 15.1 tok/s per request, TTFT p50 0.41 s, 0 errors`.
fn level_line(r: &LevelRow) -> String {
    let mut s = format!(
        "concurrency {}{}: {:.1} tok/s system, {} tok/s per request, TTFT p50 {} s, {} errors",
        r.concurrency,
        if r.partial { " (interrupted)" } else { "" },
        r.system_tok_s,
        super::report::num(r.per_request_tok_s, 1),
        super::report::num(r.ttft_p50_s, 2),
        r.errors
    );
    if let Some(e) = &r.first_error {
        s.push_str(&format!(" (first: {e})"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_worker_sends_more_than_once_by_default() {
        assert_eq!(requests_for(1, None), 4);
        assert_eq!(requests_for(16, None), 32);
        assert_eq!(requests_for(16, Some(3)), 3);
    }
}
