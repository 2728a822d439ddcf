//! Marker search shared by all parsers: where a marker starts, and how much of a buffer's tail
//! must be held back because it could still become one.

/// The earliest occurrence of any of `markers` in `text`: (byte offset, marker).
/// On a tie the longer marker wins.
pub(crate) fn find_first<'m>(text: &str, markers: &[&'m str]) -> Option<(usize, &'m str)> {
    markers
        .iter()
        .filter_map(|m| text.find(m).map(|i| (i, *m)))
        .min_by(|a, b| a.0.cmp(&b.0).then(b.1.len().cmp(&a.1.len())))
}

/// Length in bytes of the longest suffix of `text` that is a proper prefix of one of `markers`.
/// The result always leaves `text[..text.len() - n]` on a char boundary.
pub(crate) fn partial_marker_len(text: &str, markers: &[&str]) -> usize {
    markers
        .iter()
        .filter_map(|m| {
            (1..m.len())
                .rev()
                .filter(|&k| m.is_char_boundary(k))
                .find(|&k| text.ends_with(&m[..k]))
        })
        .max()
        .unwrap_or(0)
}

/// Removes and returns the first `n` bytes of `buf`.
pub(crate) fn take_front(buf: &mut String, n: usize) -> String {
    let rest = buf.split_off(n);
    std::mem::replace(buf, rest)
}

/// Drops leading characters of `buf` matching `pred`.
pub(crate) fn drop_leading(buf: &mut String, pred: impl Fn(char) -> bool) {
    let n = buf.len() - buf.trim_start_matches(pred).len();
    buf.drain(..n);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_marker_holds_only_real_prefixes() {
        assert_eq!(partial_marker_len("abc <tool", &["<tool_call>"]), 5);
        assert_eq!(partial_marker_len("abc <tool_call>", &["<tool_call>"]), 0);
        assert_eq!(partial_marker_len("abc <b", &["<tool_call>"]), 0);
        assert_eq!(
            partial_marker_len("x<｜tool", &["<｜tool▁calls▁begin｜>"]),
            "<｜tool".len()
        );
        assert_eq!(partial_marker_len("x</", &["<think>", "</think>"]), 2);
    }

    #[test]
    fn first_marker_prefers_earliest_then_longest() {
        assert_eq!(
            find_first("a</think>b<tool_call>", &["<tool_call>", "</think>"]),
            Some((1, "</think>"))
        );
        assert_eq!(find_first("nothing", &["<x>"]), None);
    }
}
