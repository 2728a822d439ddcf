//! Code answers that must run: the Python in the answer (a fenced block, else the whole
//! answer when it defines something), followed by the case's asserts, run by `python3` in a
//! temporary directory with a time limit. Without python3 the check is skipped, not failed.

use std::time::Duration;

use super::case::Grade;

const LIMIT: Duration = Duration::from_secs(10);

/// The code of the first fenced block (```python or ```), else the answer if it has a `def`.
pub fn extract(answer: &str) -> Option<String> {
    if let Some(start) = answer.find("```") {
        let body = &answer[start + 3..];
        let body = body.split_once('\n').map_or("", |(_, rest)| rest);
        let end = body.find("```").unwrap_or(body.len());
        return Some(body[..end].to_owned());
    }
    answer.contains("def ").then(|| answer.to_owned())
}

pub async fn grade_python(answer: &str, test: &str) -> Grade {
    let Some(code) = extract(answer) else {
        return Grade::Fail("no code in the answer".into());
    };
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => return Grade::Skip(format!("no temporary directory: {e}")),
    };
    let file = dir.path().join("answer.py");
    if let Err(e) = std::fs::write(&file, format!("{code}\n\n{test}\nprint('ok')\n")) {
        return Grade::Skip(format!("writing {}: {e}", file.display()));
    }
    let dir_path = dir.path().to_path_buf();
    let ran = tokio::task::spawn_blocking(move || run_limited(&file, &dir_path)).await;
    match ran {
        Err(e) => Grade::Skip(format!("running python3: {e}")),
        Ok(Ran::Missing) => Grade::Skip("python3 is not installed here".into()),
        Ok(Ran::Error(e)) => Grade::Skip(format!("running python3: {e}")),
        Ok(Ran::TimedOut) => Grade::Fail(format!("the code ran past {} s", LIMIT.as_secs())),
        Ok(Ran::Exited(true, _)) => Grade::Pass,
        Ok(Ran::Exited(false, stderr)) => {
            let last = stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            Grade::Fail(format!("the code failed its test: {}", last.trim()))
        }
    }
}

/// How a run of python3 went.
enum Ran {
    Missing,
    Error(std::io::Error),
    TimedOut,
    /// Success, and stderr.
    Exited(bool, String),
}

/// Runs `python3 file`, killing it past the limit.
fn run_limited(file: &std::path::Path, dir: &std::path::Path) -> Ran {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let child = Command::new("python3")
        .arg(file)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ran::Missing,
        Err(e) => return Ran::Error(e),
    };
    let start = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut err = String::new();
                if let Some(mut s) = child.stderr.take() {
                    let _ = s.read_to_string(&mut err);
                }
                return Ran::Exited(status.success(), err);
            }
            Ok(None) if start.elapsed() > LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                return Ran::TimedOut;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Ran::Error(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_fenced_or_bare_code() {
        let a = "Here:\n```python\ndef f():\n    return 1\n```\nDone.";
        assert_eq!(extract(a).unwrap(), "def f():\n    return 1\n");
        assert_eq!(extract("def g(): pass").unwrap(), "def g(): pass");
        assert_eq!(extract("I cannot."), None);
    }

    #[tokio::test]
    async fn python_answers_are_run_against_the_asserts() {
        let good = "```python\ndef add(a, b):\n    return a + b\n```";
        let bad = "```python\ndef add(a, b):\n    return a - b\n```";
        let test = "assert add(2, 3) == 5";
        match grade_python(good, test).await {
            Grade::Pass | Grade::Skip(_) => {}
            g => panic!("{g:?}"),
        }
        match grade_python(bad, test).await {
            Grade::Fail(why) => assert!(why.contains("AssertionError"), "{why}"),
            Grade::Skip(_) => {}
            g => panic!("{g:?}"),
        }
    }
}
