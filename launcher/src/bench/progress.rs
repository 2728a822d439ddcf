//! The progress bar on stderr while a benchmark runs (hidden when stderr is not a terminal,
//! where one line per finished stage tells the same story).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// Requests done out of all the run will send.
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
    tty: bool,
}

impl Progress {
    pub fn new(total: u64) -> Self {
        let tty = std::io::stderr().is_terminal();
        let bar = if tty {
            ProgressBar::new(total)
        } else {
            ProgressBar::hidden()
        };
        let style = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} requests  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        Self { bar, tty }
    }

    /// What runs now ("concurrency 8").
    pub fn stage(&self, what: &str) {
        self.bar.set_message(what.to_owned());
    }

    pub fn done(&self, failed: bool) {
        self.bar.inc(1);
        if failed {
            self.bar.set_message(format!(
                "{} (errors)",
                self.bar.message().trim_end_matches(" (errors)")
            ));
        }
    }

    /// A line above the bar (or plainly, without a terminal).
    pub fn say(&self, line: &str) {
        if self.tty {
            self.bar.println(line);
        } else {
            eprintln!("{line}");
        }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
