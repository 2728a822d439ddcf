//! The core battery: short prompts with one checkable answer each (arithmetic, logic,
//! a fact), Python that must pass asserts, and multi-turn cases that must stay consistent
//! with what was said earlier.

use super::case::{Case, Check, Suite, Turn};

fn one(name: &str, about: &str, user: &str, check: Check) -> Case {
    Case {
        suite: Suite::Core,
        name: name.into(),
        system: None,
        turns: vec![Turn {
            user: user.into(),
            check: Some(check),
        }],
        about: about.into(),
    }
}

fn first_of(options: &[&str], expected: &str) -> Check {
    Check::FirstOf {
        options: options.iter().map(|s| (*s).to_owned()).collect(),
        expected: expected.into(),
    }
}

const NUMBER: &str = " End your reply with the final answer as a plain number.";

pub fn battery() -> Vec<Case> {
    let yes_no = ["yes", "no"];
    vec![
        one(
            "arith-add",
            "two-digit addition",
            &format!("What is 17 + 25?{NUMBER}"),
            Check::Number(42.0),
        ),
        one(
            "arith-mul",
            "two-digit multiplication",
            &format!("What is 12 * 13?{NUMBER}"),
            Check::Number(156.0),
        ),
        one(
            "arith-word",
            "a word problem in two steps",
            &format!(
                "Pencils cost 3 dollars each. Tom buys 7 pencils and pays with a 50 dollar \
                 bill. How many dollars of change does he get?{NUMBER}"
            ),
            Check::Number(29.0),
        ),
        one(
            "arith-percent",
            "a percentage",
            &format!("What is 15% of 240?{NUMBER}"),
            Check::Number(36.0),
        ),
        one(
            "logic-syllogism",
            "transitivity with made-up words",
            "All bloops are razzies and all razzies are lazzies. Are all bloops definitely \
             lazzies? Answer yes or no first, then explain briefly.",
            first_of(&yes_no, "yes"),
        ),
        one(
            "logic-order",
            "ordering three people",
            "Alice is taller than Bob. Bob is taller than Carol. Who is the shortest of the \
             three? Answer with the name first.",
            first_of(&["Alice", "Bob", "Carol"], "Carol"),
        ),
        one(
            "logic-prime",
            "a yes/no fact that is easy to get wrong",
            "Is 91 a prime number? Answer yes or no first, then explain briefly.",
            first_of(&yes_no, "no"),
        ),
        one(
            "fact-capital",
            "a well-known fact",
            "What is the capital of France? Answer in one word.",
            Check::Contains("Paris".into()),
        ),
        one(
            "code-palindrome",
            "Python that must pass asserts",
            "Write a Python function is_palindrome(s) that returns True when the string s \
             reads the same forwards and backwards, ignoring case, and False otherwise. Reply \
             with only the code in a ```python block.",
            Check::Python {
                test: "assert is_palindrome('Level')\nassert is_palindrome('')\n\
                       assert not is_palindrome('abc')"
                    .into(),
            },
        ),
        one(
            "code-fib",
            "Python that must pass asserts",
            "Write a Python function fib(n) that returns the n-th Fibonacci number, with \
             fib(0) = 0 and fib(1) = 1. Reply with only the code in a ```python block.",
            Check::Python {
                test: "assert fib(0) == 0\nassert fib(1) == 1\nassert fib(10) == 55".into(),
            },
        ),
        Case {
            suite: Suite::Core,
            name: "multiturn-memory".into(),
            system: None,
            turns: vec![
                Turn {
                    user: "My cat is called Miso and my favourite colour is teal. Just reply OK."
                        .into(),
                    check: None,
                },
                Turn {
                    user: "What is my cat called? Answer with the name only.".into(),
                    check: Some(Check::Contains("Miso".into())),
                },
                Turn {
                    user: "And what is my favourite colour? Answer with the colour only.".into(),
                    check: Some(Check::Contains("teal".into())),
                },
            ],
            about: "recalls two facts from earlier turns".into(),
        },
        Case {
            suite: Suite::Core,
            name: "multiturn-arith".into(),
            system: None,
            turns: vec![
                Turn {
                    user: "Remember the number 37. Just reply OK.".into(),
                    check: None,
                },
                Turn {
                    user: format!("Add 5 to the number I asked you to remember.{NUMBER}"),
                    check: Some(Check::Number(42.0)),
                },
            ],
            about: "uses a number from an earlier turn".into(),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_is_graded_somewhere_and_named_once() {
        let cases = battery();
        let mut names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), cases.len());
        assert!(cases
            .iter()
            .all(|c| c.turns.iter().any(|t| t.check.is_some())));
    }
}
