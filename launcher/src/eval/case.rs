//! An eval case: a conversation of user turns, some of them with a check on the answer.
//! Checks grade the answer's content only (never the reasoning; `<think>` blocks a server
//! left in the content are cut first), and say why they failed.

use serde::Serialize;

use super::code;

/// Which battery a case belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Suite {
    Core,
    Long,
    Longctx,
}

impl Suite {
    pub fn name(self) -> &'static str {
        match self {
            Self::Core => "core",
            Self::Long => "long",
            Self::Longctx => "longctx",
        }
    }
}

/// One conversation to run.
#[derive(Debug, Clone)]
pub struct Case {
    pub suite: Suite,
    pub name: String,
    pub system: Option<String>,
    pub turns: Vec<Turn>,
    /// What the case measures beyond its name ("8192 tokens, needle at 50%").
    pub about: String,
}

/// A user message and what its answer must satisfy (`None`: not graded, e.g. "remember X").
#[derive(Debug, Clone)]
pub struct Turn {
    pub user: String,
    pub check: Option<Check>,
}

/// What an answer must contain.
#[derive(Debug, Clone, PartialEq)]
pub enum Check {
    /// The last number in the answer equals this.
    Number(f64),
    /// This text appears (case-insensitive).
    Contains(String),
    /// Of these options, the one mentioned first is `expected` (yes/no, names).
    FirstOf {
        options: Vec<String>,
        expected: String,
    },
    /// Python code in the answer defines what `test` (asserts) exercises, and passes it.
    Python { test: String },
}

/// A graded answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "grade", content = "why")]
pub enum Grade {
    Pass,
    Fail(String),
    /// Could not be checked here (no python3).
    Skip(String),
}

impl Check {
    pub async fn grade(&self, answer: &str) -> Grade {
        let text = strip_think(answer);
        match self {
            Self::Number(want) => match last_number(&text) {
                Some(got) if (got - want).abs() < 1e-6 => Grade::Pass,
                Some(got) => Grade::Fail(format!("expected {want}, the last number is {got}")),
                None => Grade::Fail(format!("expected {want}, the answer has no number")),
            },
            Self::Contains(s) => {
                if text.to_lowercase().contains(&s.to_lowercase()) {
                    Grade::Pass
                } else {
                    Grade::Fail(format!("expected {s:?} in the answer"))
                }
            }
            Self::FirstOf { options, expected } => match first_of(&text, options) {
                Some(got) if got.eq_ignore_ascii_case(expected) => Grade::Pass,
                Some(got) => Grade::Fail(format!("expected {expected:?}, answered {got:?}")),
                None => Grade::Fail(format!("expected {expected:?}, found none of {options:?}")),
            },
            Self::Python { test } => code::grade_python(&text, test).await,
        }
    }
}

/// The answer without `<think>...</think>` blocks (an unclosed one runs to the end).
pub fn strip_think(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("<think>") {
        out.push_str(&rest[..i]);
        rest = match rest[i..].find("</think>") {
            Some(j) => &rest[i + j + "</think>".len()..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

/// The last number written in `s` ("1,234.5" reads as 1234.5; "-3" as -3).
pub fn last_number(s: &str) -> Option<f64> {
    let chars: Vec<char> = s.chars().collect();
    let mut last = None;
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_digit() {
            let start = i;
            let mut text = String::new();
            while i < chars.len() {
                let c = chars[i];
                let next_digit = chars.get(i + 1).is_some_and(char::is_ascii_digit);
                if c.is_ascii_digit() || (c == '.' && next_digit && !text.contains('.')) {
                    text.push(c);
                } else if c == ',' && next_digit {
                    // thousands separator
                } else {
                    break;
                }
                i += 1;
            }
            let negative = start > 0
                && chars[start - 1] == '-'
                && (start < 2 || !chars[start - 2].is_alphanumeric());
            if let Ok(v) = text.parse::<f64>() {
                last = Some(if negative { -v } else { v });
            }
        } else {
            i += 1;
        }
    }
    last
}

/// Which of `options` (whole words, case-insensitive) appears first in `s`.
pub fn first_of<'a>(s: &str, options: &'a [String]) -> Option<&'a str> {
    let lower = s.to_lowercase();
    options
        .iter()
        .filter_map(|o| word_at(&lower, &o.to_lowercase()).map(|i| (i, o.as_str())))
        .min_by_key(|(i, _)| *i)
        .map(|(_, o)| o)
}

fn word_at(hay: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = hay[from..].find(word) {
        let at = from + i;
        let before = hay[..at].chars().next_back();
        let after = hay[at + word.len()..].chars().next();
        if !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_people_write_them() {
        assert_eq!(last_number("17 + 25 = 42."), Some(42.0));
        assert_eq!(last_number("It costs $1,234.50 in total"), Some(1234.5));
        assert_eq!(last_number("The answer is -3"), Some(-3.0));
        assert_eq!(last_number("step-2 then 7"), Some(7.0));
        assert_eq!(last_number("no digits"), None);
        assert_eq!(last_number("A list: 1, 2, 3"), Some(3.0));
    }

    #[test]
    fn first_of_takes_whole_words() {
        let yn = vec!["yes".to_owned(), "no".to_owned()];
        assert_eq!(first_of("Yes, because ... no doubt", &yn), Some("yes"));
        assert_eq!(first_of("Nobody knows; no.", &yn), Some("no"));
        assert_eq!(first_of("Maybe", &yn), None);
    }

    #[tokio::test]
    async fn grading_ignores_think_blocks() {
        assert_eq!(strip_think("<think>42</think>It is 41"), "It is 41");
        assert_eq!(strip_think("a<think>unclosed"), "a");
        let g = Check::Number(42.0)
            .grade("<think>so 42</think>The answer is 41")
            .await;
        assert_eq!(g, Grade::Fail("expected 42, the last number is 41".into()));
        assert_eq!(
            Check::Contains("paris".into()).grade("Paris.").await,
            Grade::Pass
        );
    }
}
