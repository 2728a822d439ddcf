//! Depth mode (llama-benchy's pp/tg at depth): one request at a time whose prompt is `depth`
//! tokens of context plus `pp` tokens, generating `tg`; prefill tok/s is the whole prompt
//! over time to first token (an HTTP server prefills it all; no cache is reused, every
//! prompt is fresh), decode tok/s the rate after the first token.

use super::load;
use super::report::{DepthRow, Report};
use super::stats::mean;
use super::Env;

/// The depths that fit `max_model_len`: those that do not are replaced by the deepest that
/// does (once), and each change is noted.
pub fn plan(
    depths: &[u32],
    max_model_len: Option<u32>,
    pp: u32,
    tg: u32,
) -> (Vec<u32>, Vec<String>) {
    let Some(max) = max_model_len else {
        return (depths.to_vec(), Vec::new());
    };
    let room = max.saturating_sub(pp + tg);
    let mut out: Vec<u32> = Vec::new();
    let mut notes = Vec::new();
    for &d in depths {
        let d2 = d.min(room);
        if d2 != d {
            notes.push(format!(
                "depth {d} does not fit max_model_len {max} with pp {pp} + tg {tg}: {}",
                if out.contains(&d2) {
                    "skipped".to_owned()
                } else {
                    format!("measured at {d2} instead")
                }
            ));
        }
        if !out.contains(&d2) {
            out.push(d2);
        }
    }
    (out, notes)
}

/// What depth mode needs beyond the shared context.
#[derive(Debug, Clone)]
pub struct DepthPlan {
    pub depths: Vec<u32>,
    pub pp: u32,
    pub tg: u32,
    pub reps: usize,
    pub seed: u64,
}

pub async fn run(env: &mut Env<'_>, plan: &DepthPlan, report: &mut Report) -> anyhow::Result<()> {
    let (ctx, maker, progress) = (env.ctx, env.maker, env.progress);
    for (di, &depth) in plan.depths.iter().enumerate() {
        progress.stage(&format!("depth {depth}"));
        let mut results = Vec::new();
        for rep in 0..plan.reps {
            if env.stop.is_set() {
                break;
            }
            let seed = plan.seed ^ (0xD0 << 48 | (di as u64) << 16 | rep as u64);
            let prompt = maker.make(seed, depth + plan.pp).await?;
            let r = tokio::select! {
                r = load::request(ctx, prompt, plan.tg) => r,
                () = env.stop.wait() => break,
            };
            progress.done(r.error.is_some());
            results.push(r);
        }
        if results.is_empty() {
            break;
        }
        let ok: Vec<_> = results.iter().filter(|r| r.error.is_none()).collect();
        let prefill: Vec<f64> = ok
            .iter()
            .filter_map(|r| Some(f64::from(r.prompt_tokens?) / r.ttft_s.filter(|t| *t > 0.0)?))
            .collect();
        let row = DepthRow {
            depth,
            prompt_tokens: mean(
                &ok.iter()
                    .filter_map(|r| r.prompt_tokens.map(f64::from))
                    .collect::<Vec<_>>(),
            ),
            reps: results.len(),
            errors: results.len() - ok.len(),
            prefill_tok_s: mean(&prefill),
            decode_tok_s: mean(&ok.iter().filter_map(|r| r.decode_tok_s).collect::<Vec<_>>()),
            ttft_s: mean(&ok.iter().filter_map(|r| r.ttft_s).collect::<Vec<_>>()),
            first_error: results.iter().find_map(|r| r.error.clone()),
        };
        progress.say(&format!(
            "depth {depth}: prefill {} tok/s, decode {} tok/s, {} errors",
            super::report::num(row.prefill_tok_s, 1),
            super::report::num(row.decode_tok_s, 1),
            row.errors
        ));
        report.depth.push(row);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depths_are_clipped_to_the_context_once() {
        let (d, notes) = plan(&[0, 4096, 16384, 32768], Some(2048), 512, 128);
        assert_eq!(d, [0, 1408]);
        assert_eq!(notes.len(), 3);
        assert!(notes[0].contains("measured at 1408 instead"), "{notes:?}");
        assert!(notes[1].contains("skipped"), "{notes:?}");
        let (d, notes) = plan(&[0, 4096], Some(131072), 512, 128);
        assert_eq!(d, [0, 4096]);
        assert!(notes.is_empty());
        assert_eq!(plan(&[0, 8], None, 1, 1).0, [0, 8]);
    }
}
