//! The long-context cases. `long`: needle in a haystack, one secret code hidden at a depth
//! of a filler text of a given length, to be recalled (recall = codes found / hidden).
//! `longctx`: a long report with facts spread through it and several questions in turns,
//! each answer staying in the history as a chat client keeps it.

use hearth_protocol::openai::ChatMessage;

use super::case::{Case, Check, Suite, Turn};
use super::haystack::{self, Sizer};
use crate::client::rng::Rng;

/// Context lengths that fit the model, with a note for each one changed: a length past
/// `max_model_len - reserve` is measured at that limit instead (once).
pub fn fit_lengths(
    lengths: &[u32],
    max_model_len: Option<u32>,
    reserve: u32,
) -> (Vec<u32>, Vec<String>) {
    let Some(max) = max_model_len else {
        return (lengths.to_vec(), Vec::new());
    };
    let room = max.saturating_sub(reserve);
    let mut out: Vec<u32> = Vec::new();
    let mut notes = Vec::new();
    for &l in lengths {
        let l2 = l.min(room);
        if l2 != l {
            let what = if out.contains(&l2) {
                "skipped".to_owned()
            } else {
                format!("run at {l2} instead")
            };
            notes.push(format!(
                "{l} tokens do not fit max_model_len {max} with {reserve} left for the answer: {what}"
            ));
        }
        if !out.contains(&l2) && l2 > 0 {
            out.push(l2);
        }
    }
    (out, notes)
}

fn code_for(seed: u64) -> String {
    let mut rng = Rng::new(seed);
    format!("{}", 100_000 + rng.below(900_000))
}

/// One needle case per (length, depth).
pub async fn needles(sizer: &Sizer, lengths: &[u32], depths: &[f64]) -> anyhow::Result<Vec<Case>> {
    let mut cases = Vec::new();
    for &len in lengths {
        for (di, &depth) in depths.iter().enumerate() {
            let seed = u64::from(len) << 8 | di as u64;
            let code = code_for(seed);
            let needle = format!("The secret code for the Vardholm vault is {code}.");
            let question =
                "What is the secret code for the Vardholm vault? Reply with the code only.";
            let build = |n: usize| {
                let text = haystack::text(seed, n, &[(depth, needle.clone())]);
                vec![ChatMessage::user(format!(
                    "Read the following text. A secret code is hidden in it.\n\n{text}\n\n{question}"
                ))]
            };
            let fitted = sizer.fit(len, build).await?;
            let user = fitted.messages[0].text_content();
            cases.push(Case {
                suite: Suite::Long,
                name: format!("needle-{len}-at-{:.0}%", depth * 100.0),
                system: None,
                turns: vec![Turn {
                    user,
                    check: Some(Check::Contains(code)),
                }],
                about: format!(
                    "{} prompt tokens{}, needle at {:.0}% depth",
                    fitted.tokens,
                    if fitted.exact { "" } else { " (estimated)" },
                    depth * 100.0
                ),
            });
        }
    }
    Ok(cases)
}

/// The long-document conversation: three facts at 20%, 50% and 80%, three questions.
pub async fn document(sizer: &Sizer, len: u32) -> anyhow::Result<Case> {
    let seed = 0x10C7 ^ u64::from(len);
    let mut rng = Rng::new(seed);
    let crates = 120 + rng.below(800);
    let facts = vec![
        (
            0.2,
            format!("Report note: the warehouse in Skarvik stores exactly {crates} crates."),
        ),
        (
            0.5,
            "Report note: the warehouse in Lunmere is managed by Theodora Quist.".to_owned(),
        ),
        (
            0.8,
            "Report note: only the warehouse in Pellavon stores copper bells.".to_owned(),
        ),
    ];
    let first =
        "How many crates does the warehouse in Skarvik store? End your reply with the number.";
    let build = |n: usize| {
        let text = haystack::text(seed, n, &facts);
        vec![ChatMessage::user(format!(
            "Here is a long report. I will ask you several questions about it.\n\n{text}\n\n{first}"
        ))]
    };
    // Leave room for the later turns and their answers.
    let fitted = sizer.fit(len.saturating_sub(200), build).await?;
    Ok(Case {
        suite: Suite::Longctx,
        name: format!("report-{len}"),
        system: None,
        turns: vec![
            Turn {
                user: fitted.messages[0].text_content(),
                check: Some(Check::Number(crates as f64)),
            },
            Turn {
                user: "Who manages the warehouse in Lunmere? Answer with the full name.".into(),
                check: Some(Check::Contains("Theodora Quist".into())),
            },
            Turn {
                user: "Which town's warehouse stores copper bells? Answer with the town only."
                    .into(),
                check: Some(Check::Contains("Pellavon".into())),
            },
        ],
        about: format!(
            "{} tokens of report{}, 3 questions in turns",
            fitted.tokens,
            if fitted.exact { "" } else { " (estimated)" }
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_clipped_to_the_context_once() {
        let (l, notes) = fit_lengths(&[8192, 65536], Some(2048), 256);
        assert_eq!(l, [1792]);
        assert_eq!(notes.len(), 2);
        assert!(notes[0].contains("run at 1792 instead"), "{notes:?}");
        assert!(notes[1].contains("skipped"), "{notes:?}");
        assert_eq!(
            fit_lengths(&[8192, 65536], Some(131072), 256).0,
            [8192, 65536]
        );
    }

    #[test]
    fn codes_are_six_digits_and_seeded() {
        assert_eq!(code_for(3), code_for(3));
        assert_eq!(code_for(3).len(), 6);
    }
}
