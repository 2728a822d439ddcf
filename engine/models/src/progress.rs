//! Progress of weight loading: a bar on a terminal; when stderr is not one (a container, a log
//! file), a `phase: load weights N/M` log line at every tenth of the layers, which `hearth up`
//! shows while it waits for readiness.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// Layers loaded so far, shown as a bar or as log lines.
pub(crate) struct LayerProgress {
    bar: Option<ProgressBar>,
    done: usize,
    total: usize,
}

pub(crate) fn layers(n: usize) -> LayerProgress {
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(n as u64);
        bar.set_style(
            ProgressStyle::with_template("loading weights {bar:30} layer {pos}/{len} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    });
    LayerProgress {
        bar,
        done: 0,
        total: n,
    }
}

impl LayerProgress {
    /// One more layer loaded.
    pub(crate) fn inc(&mut self) {
        self.done += 1;
        match &self.bar {
            Some(bar) => bar.inc(1),
            None if logs_at(self.done, self.total) => {
                tracing::info!("phase: load weights {}/{} layers", self.done, self.total);
            }
            None => {}
        }
    }

    pub(crate) fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Whether layer `done` of `total` crosses a tenth (the last one excluded: the loader logs the
/// phase's end itself).
fn logs_at(done: usize, total: usize) -> bool {
    done < total && (done * 10 / total.max(1)) != ((done - 1) * 10 / total.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_at_every_tenth_but_the_last() {
        let at: Vec<usize> = (1..=36).filter(|&d| logs_at(d, 36)).collect();
        assert_eq!(at, [4, 8, 11, 15, 18, 22, 26, 29, 33]);
        assert!((1..=3).all(|d| logs_at(d, 3) == (d < 3)));
        assert!(!logs_at(1, 1));
    }
}
