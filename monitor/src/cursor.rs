//! Where the log stream left off, so that re-opening it after a restart (of the engine or of
//! the monitor) loses no line and repeats none.
//!
//! Docker's `since` takes whole seconds, so a re-opened stream starts at the second of the last
//! line written and re-sends that second's lines. The cursor remembers every line it let
//! through whose timestamp is within a second of the newest (a multiset keyed by timestamp and
//! text: two identical lines at the same nanosecond are two lines), and a re-opened session
//! drops exactly those. Lines are never compared by text alone: a line the engine prints twice
//! is written twice.
//!
//! After a monitor restart the cursor is rebuilt from the tail of serve.log, whose lines start
//! with Docker's own timestamp (the monitor's markers are skipped: they are not container lines).

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::clock::Stamp;

/// What marks the monitor's own lines in serve.log, after the timestamp.
pub const MARKER: &str = "[hearth-monitor]";

const NS: i64 = 1_000_000_000;

#[derive(Debug, Default, Clone)]
pub struct Cursor {
    /// The newest timestamp written.
    horizon: Option<Stamp>,
    /// Lines written at or after `horizon`'s second minus one, with how many times.
    seen: HashMap<(Stamp, String), u32>,
    /// In a re-opened session: the lines it will send again, to drop once each.
    skip: HashMap<(Stamp, String), u32>,
    /// In a re-opened session: anything before this was written in an earlier one.
    floor: Option<Stamp>,
}

impl Cursor {
    /// The `since` for the next stream: the second of the newest line (None: from the start).
    pub fn since_secs(&self) -> Option<i64> {
        self.horizon.map(Stamp::secs)
    }

    pub fn horizon(&self) -> Option<Stamp> {
        self.horizon
    }

    /// Starts a new stream session from `since_secs`.
    pub fn reopen(&mut self) {
        self.skip = self.seen.clone();
        self.floor = self.horizon.map(|h| Stamp(h.secs() * NS));
    }

    /// Whether the line is new (write it) or one an earlier session already wrote.
    pub fn admit(&mut self, ts: Stamp, text: &str) -> bool {
        let key = (ts, text.to_owned());
        if let Some(n) = self.skip.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.skip.remove(&key);
            }
            return false;
        }
        if self.floor.is_some_and(|f| ts < f) {
            return false;
        }
        self.record(key);
        true
    }

    fn record(&mut self, key: (Stamp, String)) {
        let ts = key.0;
        *self.seen.entry(key).or_insert(0) += 1;
        if self.horizon.is_none_or(|h| ts > h) {
            let moved_second = self.horizon.is_none_or(|h| h.secs() != ts.secs());
            self.horizon = Some(ts);
            if moved_second {
                let keep_from = Stamp((ts.secs() - 1) * NS);
                self.seen.retain(|(t, _), _| *t >= keep_from);
            }
        }
    }

    /// The cursor a previous monitor left in `serve.log` (and `serve.log.1`, when the newest
    /// file has just been rotated): the last container lines it wrote.
    pub fn recover(dir: &Path, name: &str) -> Self {
        let path = dir.join(name);
        let mut cursor = Cursor::default();
        for file in [crate::rotate::numbered(&path, 1), path] {
            for line in tail(&file, 256 * 1024).lines() {
                if let Some((ts, text)) = split_stamped(line) {
                    if !text.starts_with(MARKER) {
                        cursor.record((ts, text.to_owned()));
                    }
                }
            }
        }
        cursor
    }
}

/// `2026-11-23T17:49:57.123456789Z text` -> (stamp, "text").
pub fn split_stamped(line: &str) -> Option<(Stamp, &str)> {
    let (ts, text) = line.split_once(' ').unwrap_or((line, ""));
    Some((Stamp::parse(ts)?, text))
}

/// The last `max` bytes of a file, from its first whole line; "" when there is none.
fn tail(path: &Path, max: u64) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(max);
    if f.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    if f.read_to_end(&mut buf).is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&buf).into_owned();
    if start > 0 {
        text.split_once('\n')
            .map(|(_, r)| r.to_owned())
            .unwrap_or_default()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64, nanos: i64) -> Stamp {
        Stamp(secs * NS + nanos)
    }

    #[test]
    fn a_reopened_stream_drops_exactly_what_was_written() {
        let mut c = Cursor::default();
        assert!(c.admit(at(100, 1), "a"));
        assert!(c.admit(at(100, 2), "same"));
        assert!(c.admit(at(100, 2), "same"));
        assert!(c.admit(at(101, 5), "b"));
        assert_eq!(c.since_secs(), Some(101));
        c.reopen();
        // Docker re-sends second 101; the engine printed more since.
        assert!(!c.admit(at(101, 5), "b"));
        assert!(c.admit(at(101, 9), "c"));
        assert!(c.admit(at(102, 0), "d"));
        // A second session re-sends both earlier sessions' lines of that second.
        c.reopen();
        assert!(!c.admit(at(102, 0), "d"));
        assert!(
            c.admit(at(102, 0), "d"),
            "a second identical line is a new line"
        );
    }

    #[test]
    fn identical_lines_at_one_instant_count_as_many() {
        let mut c = Cursor::default();
        for _ in 0..3 {
            assert!(c.admit(at(7, 0), "x"));
        }
        c.reopen();
        for _ in 0..3 {
            assert!(!c.admit(at(7, 0), "x"));
        }
        assert!(c.admit(at(7, 0), "x"));
    }

    #[test]
    fn older_lines_than_the_reopened_second_are_dropped() {
        let mut c = Cursor::default();
        assert!(c.admit(at(50, 0), "a"));
        assert!(c.admit(at(60, 0), "b"));
        c.reopen();
        assert!(!c.admit(at(59, 0), "old"));
        assert!(c.admit(at(60, 1), "new"));
    }

    #[test]
    fn recovers_from_serve_log_skipping_markers() {
        let dir = tempfile::tempdir().unwrap();
        let lines = [
            "2026-01-01T00:00:09.000000000Z old",
            "2026-01-01T00:00:10.500000000Z x",
            "2026-01-01T00:00:11.000000000Z y",
            "2026-01-01T00:00:12.000000000Z [hearth-monitor] restart #1",
        ];
        std::fs::write(dir.path().join("serve.log"), lines.join("\n") + "\n").unwrap();
        let mut c = Cursor::recover(dir.path(), "serve.log");
        let y = Stamp::parse("2026-01-01T00:00:11Z").unwrap();
        assert_eq!(c.horizon(), Some(y));
        c.reopen();
        assert!(!c.admit(y, "y"));
        assert!(c.admit(Stamp(y.0 + 1), "z"));
        assert!(Cursor::recover(&dir.path().join("none"), "serve.log")
            .horizon()
            .is_none());
    }
}
