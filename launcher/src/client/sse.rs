//! Server-sent events: splits a byte stream into the payloads of its `data:` lines.

/// Splits an SSE byte stream into the payloads of its `data:` lines. Bytes are kept until a
/// line is complete, so a character split across network chunks stays whole.
#[derive(Debug, Default)]
pub struct SseLines {
    buf: Vec<u8>,
}

impl SseLines {
    /// Adds bytes; returns the `data:` payloads of the lines they completed.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=i).collect();
            let line = String::from_utf8_lossy(&line);
            if let Some(data) = line.trim_end().strip_prefix("data:") {
                out.push(data.trim_start().to_owned());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_payloads_survive_any_split() {
        let stream = "data: {\"a\":\"é\"}\n\ndata: {\"b\":2}\n\n: comment\ndata: [DONE]\n\n";
        for cut in 0..stream.len() {
            let mut s = SseLines::default();
            let mut got = s.push(&stream.as_bytes()[..cut]);
            got.extend(s.push(&stream.as_bytes()[cut..]));
            assert_eq!(
                got,
                ["{\"a\":\"é\"}", "{\"b\":2}", "[DONE]"],
                "cut at {cut}"
            );
        }
    }
}
