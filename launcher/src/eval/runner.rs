//! Runs one case: its turns in order as one conversation (each answer goes back into the
//! history), each answer streamed and timed, checked turns graded on their content.

use hearth_protocol::openai::{ChatCompletionRequest, ChatMessage, FinishReason};
use serde::Serialize;

use super::case::{Case, Grade, Suite};
use crate::client::{stream, Target};

/// How every request is sent.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub http: reqwest::Client,
    pub target: Target,
    pub model: String,
    /// `None`: no cap (the server's default), so reasoning models can finish thinking.
    pub max_tokens: Option<u32>,
    pub temperature: f32,
    pub no_think: bool,
}

/// The verdict on a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    /// A request failed; the answer could not be graded.
    Error,
    /// Nothing could be checked here (no python3).
    Skip,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Self::Pass => "PASS",
            Self::Fail => "FAIL",
            Self::Error => "ERROR",
            Self::Skip => "SKIP",
        }
    }
}

/// One turn's answer and measurements.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TurnResult {
    pub grade: Option<Grade>,
    /// The answer's content (the first 600 characters).
    pub answer: String,
    pub finish_reason: Option<FinishReason>,
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: u32,
    pub ttft_s: Option<f64>,
    pub prefill_tok_s: Option<f64>,
    pub decode_tok_s: Option<f64>,
    pub error: Option<String>,
}

/// A graded case.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub suite: Suite,
    pub name: String,
    pub about: String,
    pub verdict: Verdict,
    /// Why it did not pass.
    pub why: Option<String>,
    pub turns: Vec<TurnResult>,
}

impl CaseResult {
    /// The turn the timings in the table come from: the last one that ran.
    pub fn shown_turn(&self) -> Option<&TurnResult> {
        self.turns.last()
    }

    /// Checked turns that passed, and checked turns.
    pub fn turn_score(&self) -> (usize, usize) {
        let graded = self.turns.iter().filter_map(|t| t.grade.as_ref());
        let (mut pass, mut all) = (0, 0);
        for g in graded {
            all += 1;
            pass += usize::from(*g == Grade::Pass);
        }
        (pass, all)
    }
}

pub async fn run(ctx: &Ctx, case: &Case) -> CaseResult {
    let mut history: Vec<ChatMessage> = case.system.iter().map(ChatMessage::system).collect();
    let mut turns = Vec::new();
    for turn in &case.turns {
        history.push(ChatMessage::user(turn.user.clone()));
        let mut req = ChatCompletionRequest {
            model: ctx.model.clone(),
            messages: history.clone(),
            max_tokens: ctx.max_tokens,
            ..Default::default()
        };
        req.sampling.temperature = Some(ctx.temperature);
        if ctx.no_think {
            let mut kw = serde_json::Map::new();
            kw.insert("enable_thinking".into(), false.into());
            req.chat_template_kwargs = Some(kw);
        }
        let out = match stream::chat(&ctx.http, &ctx.target, &req, |_| {}).await {
            Ok(o) => o,
            Err(e) => {
                turns.push(TurnResult {
                    error: Some(e.to_string()),
                    ..Default::default()
                });
                break;
            }
        };
        let grade = match &turn.check {
            Some(c) => Some(c.grade(&out.content).await),
            None => None,
        };
        turns.push(TurnResult {
            grade,
            answer: out.content.chars().take(600).collect(),
            finish_reason: out.finish_reason,
            prompt_tokens: out.prompt_tokens(),
            completion_tokens: out.completion_tokens(),
            ttft_s: out.timing.ttft(),
            prefill_tok_s: out.prefill_tok_s(),
            decode_tok_s: out.decode_tok_s(),
            error: None,
        });
        history.push(ChatMessage::assistant(out.content));
    }
    let (verdict, why) = verdict(&turns);
    CaseResult {
        suite: case.suite,
        name: case.name.clone(),
        about: case.about.clone(),
        verdict,
        why,
        turns,
    }
}

/// Error beats fail beats pass; a case whose every check was skipped is skipped.
fn verdict(turns: &[TurnResult]) -> (Verdict, Option<String>) {
    if let Some(e) = turns.iter().find_map(|t| t.error.clone()) {
        return (Verdict::Error, Some(e));
    }
    let graded: Vec<(usize, &TurnResult, &Grade)> = turns
        .iter()
        .enumerate()
        .filter_map(|(i, t)| t.grade.as_ref().map(|g| (i, t, g)))
        .collect();
    let many = graded.len() > 1;
    let failed: Vec<String> = graded
        .iter()
        .filter_map(|(i, t, g)| match g {
            Grade::Fail(why) => Some(explain(*i, many, t, why)),
            _ => None,
        })
        .collect();
    if !failed.is_empty() {
        return (Verdict::Fail, Some(failed.join("; ")));
    }
    if graded.iter().all(|(_, _, g)| matches!(g, Grade::Skip(_))) {
        let why = graded.iter().find_map(|(_, _, g)| match g {
            Grade::Skip(w) => Some(w.clone()),
            _ => None,
        });
        return (Verdict::Skip, why);
    }
    (Verdict::Pass, None)
}

fn explain(i: usize, many: bool, t: &TurnResult, why: &str) -> String {
    let mut s = if many {
        format!("turn {}: {why}", i + 1)
    } else {
        why.to_owned()
    };
    if t.answer.trim().is_empty() && t.finish_reason == Some(FinishReason::Length) {
        s.push_str(
            " (empty answer, finish_reason length: the token budget ran out, thinking included)",
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graded(g: Grade) -> TurnResult {
        TurnResult {
            grade: Some(g),
            ..Default::default()
        }
    }

    #[test]
    fn verdicts_rank_error_fail_pass_skip() {
        let pass = graded(Grade::Pass);
        let fail = graded(Grade::Fail("expected 42".into()));
        let skip = graded(Grade::Skip("no python3".into()));
        assert_eq!(verdict(std::slice::from_ref(&pass)).0, Verdict::Pass);
        assert_eq!(verdict(&[pass.clone(), skip.clone()]).0, Verdict::Pass);
        assert_eq!(verdict(std::slice::from_ref(&skip)).0, Verdict::Skip);
        let (v, why) = verdict(&[TurnResult::default(), pass.clone(), fail.clone()]);
        assert_eq!(v, Verdict::Fail);
        assert_eq!(why.as_deref(), Some("turn 3: expected 42"));
        let err = TurnResult {
            error: Some("HTTP 500".into()),
            ..Default::default()
        };
        assert_eq!(verdict(&[fail, err]).0, Verdict::Error);
    }

    #[test]
    fn an_empty_length_cut_answer_is_explained() {
        let t = TurnResult {
            finish_reason: Some(FinishReason::Length),
            ..graded(Grade::Fail("expected 42, the answer has no number".into()))
        };
        let (_, why) = verdict(&[t]);
        assert!(why.unwrap().contains("finish_reason length"));
    }
}
