//! Progress display for weight loading: a bar on a terminal, nothing when stderr is not one
//! (the startup log then carries the per-phase durations instead).

use indicatif::{ProgressBar, ProgressStyle};

pub(crate) fn layers(n: usize) -> ProgressBar {
    let bar = ProgressBar::new(n as u64);
    bar.set_style(
        ProgressStyle::with_template("loading weights {bar:30} layer {pos}/{len} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}
