//! The eval's results: JSON (every turn, answer and timing) and a markdown table with one
//! row per case, both rendered from the same structs, and a summary per suite (needle
//! recall per context length).

use serde::Serialize;

use super::case::Suite;
use super::runner::{CaseResult, Verdict};

/// Everything one `hearth eval` run found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub server: String,
    pub model: String,
    pub max_model_len: Option<u32>,
    pub interrupted: bool,
    pub cases: Vec<CaseResult>,
    pub summary: Vec<SuiteSummary>,
    pub notes: Vec<String>,
}

/// Passed out of graded cases, per suite (per length for needles: the recall).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SuiteSummary {
    pub suite: String,
    pub passed: usize,
    /// Cases that were graded (errors count, skips do not).
    pub graded: usize,
    pub errors: usize,
    pub skipped: usize,
}

impl Report {
    /// Fills `summary` from `cases`.
    pub fn summarize(&mut self) {
        let mut groups: Vec<(String, Vec<&CaseResult>)> = Vec::new();
        for c in &self.cases {
            let key = match c.suite {
                Suite::Long => format!("long recall at {}", needle_len(&c.name)),
                s => s.name().to_owned(),
            };
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(c),
                None => groups.push((key, vec![c])),
            }
        }
        self.summary = groups
            .into_iter()
            .map(|(suite, cs)| {
                let count = |v: Verdict| cs.iter().filter(|c| c.verdict == v).count();
                SuiteSummary {
                    suite,
                    passed: count(Verdict::Pass),
                    graded: cs.len() - count(Verdict::Skip),
                    errors: count(Verdict::Error),
                    skipped: count(Verdict::Skip),
                }
            })
            .collect();
    }

    pub fn markdown(&self) -> String {
        let mut s = format!(
            "`hearth eval` of {} at {}{}\n\n",
            self.model,
            self.server,
            if self.interrupted {
                " (INTERRUPTED, partial)"
            } else {
                ""
            }
        );
        s.push_str(
            "| Case | Suite | Result | TTFT | Prefill tok/s | Decode tok/s | Note |\n\
             |---|---|---|---:|---:|---:|---|\n",
        );
        for c in &self.cases {
            let t = c.shown_turn();
            let (pass, all) = c.turn_score();
            let mut note = c.about.clone();
            if all > 1 {
                note.push_str(&format!("; turns {pass}/{all}"));
            }
            if let Some(why) = &c.why {
                note.push_str(&format!("; {why}"));
            }
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                c.name,
                c.suite.name(),
                c.verdict.label(),
                t.and_then(|t| t.ttft_s)
                    .map_or_else(|| "-".into(), |v| format!("{v:.3} s")),
                num(t.and_then(|t| t.prefill_tok_s)),
                num(t.and_then(|t| t.decode_tok_s)),
                cell(&note),
            ));
        }
        s.push('\n');
        for x in &self.summary {
            s.push_str(&format!(
                "- {}: {}/{} passed{}{}\n",
                x.suite,
                x.passed,
                x.graded,
                if x.errors > 0 {
                    format!(", {} errors", x.errors)
                } else {
                    String::new()
                },
                if x.skipped > 0 {
                    format!(", {} skipped", x.skipped)
                } else {
                    String::new()
                },
            ));
        }
        for n in &self.notes {
            s.push_str(&format!("- {n}\n"));
        }
        s
    }
}

fn num(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.1}"))
}

/// Text safe inside a table cell: one line, no pipes, not too long.
fn cell(s: &str) -> String {
    let one: String = s
        .chars()
        .map(|c| match c {
            '\n' | '\r' => ' ',
            '|' => '/',
            c => c,
        })
        .collect();
    match one.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &one[..i]),
        None => one,
    }
}

/// `needle-8192-at-50%` -> `8192 tokens`.
fn needle_len(name: &str) -> String {
    let n = name
        .strip_prefix("needle-")
        .and_then(|r| r.split('-').next())
        .unwrap_or("?");
    format!("{n} tokens")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::runner::TurnResult;

    fn case(suite: Suite, name: &str, verdict: Verdict) -> CaseResult {
        CaseResult {
            suite,
            name: name.into(),
            about: "about".into(),
            verdict,
            why: (verdict != Verdict::Pass).then(|| "expected 42 | x\nnext".into()),
            turns: vec![TurnResult {
                ttft_s: Some(0.25),
                prefill_tok_s: Some(120.0),
                decode_tok_s: Some(80.0),
                ..Default::default()
            }],
        }
    }

    #[test]
    fn rows_and_summary_follow_the_cases() {
        let mut r = Report {
            cases: vec![
                case(Suite::Core, "arith-add", Verdict::Pass),
                case(Suite::Core, "code-fib", Verdict::Skip),
                case(Suite::Long, "needle-1792-at-10%", Verdict::Pass),
                case(Suite::Long, "needle-1792-at-50%", Verdict::Fail),
            ],
            ..Default::default()
        };
        r.summarize();
        assert_eq!(r.summary[0].suite, "core");
        assert_eq!((r.summary[0].passed, r.summary[0].graded), (1, 1));
        assert_eq!(r.summary[1].suite, "long recall at 1792 tokens");
        assert_eq!((r.summary[1].passed, r.summary[1].graded), (1, 2));
        let md = r.markdown();
        assert!(
            md.contains("| arith-add | core | PASS | 0.250 s | 120.0 | 80.0 | about |"),
            "{md}"
        );
        assert!(md.contains("about; expected 42 / x next |"), "{md}");
        assert!(
            md.contains("- long recall at 1792 tokens: 1/2 passed"),
            "{md}"
        );
    }
}
