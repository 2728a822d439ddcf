//! `Problem`: something wrong before anything is created (a bad spec, Docker unreachable, the
//! port taken), said with how to fix it. `Problems` is the error `up` returns for them; main
//! prints it and exits 2, so scripts can tell "fix your setup" from "the deployment failed".

use std::fmt;

/// One thing to fix: what is wrong, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub what: String,
    pub fix: String,
}

impl Problem {
    pub fn new(what: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            fix: fix.into(),
        }
    }
}

/// Every problem found in one pass, so the user fixes them all at once.
#[derive(Debug)]
pub struct Problems {
    /// What was being checked: "spec", "preflight".
    pub stage: &'static str,
    pub list: Vec<Problem>,
}

impl Problems {
    pub fn one(stage: &'static str, problem: Problem) -> Self {
        Self {
            stage,
            list: vec![problem],
        }
    }
}

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.list.len();
        let s = if n == 1 { "" } else { "s" };
        writeln!(f, "{}: {n} problem{s}, nothing was started:", self.stage)?;
        for p in &self.list {
            let mut lines = p.what.lines();
            writeln!(f, "  x {}", lines.next().unwrap_or_default())?;
            for line in lines {
                writeln!(f, "    {line}")?;
            }
            writeln!(f, "    fix: {}", p.fix)?;
        }
        Ok(())
    }
}

impl std::error::Error for Problems {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_shows_its_fix() {
        let p = Problems {
            stage: "preflight",
            list: vec![
                Problem::new("port 8000 is in use", "set PORT in .env"),
                Problem::new("line one\nline two", "do this"),
            ],
        };
        assert_eq!(
            p.to_string(),
            "preflight: 2 problems, nothing was started:\n  x port 8000 is in use\n    fix: set \
             PORT in .env\n  x line one\n    line two\n    fix: do this\n"
        );
    }
}
