//! When a streamed answer's tokens arrived, and the rates that follow: time to first token,
//! inter-token latencies, prefill and decode tok/s.

use std::time::Instant;

/// Arrival times of one streamed answer, in seconds since the request was sent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timing {
    /// Each SSE chunk that carried generated text (content, reasoning or a tool call).
    pub token_times: Vec<f64>,
    /// When the stream ended.
    pub e2e: f64,
}

impl Timing {
    /// Time to the first generated token.
    pub fn ttft(&self) -> Option<f64> {
        self.token_times.first().copied()
    }

    /// Gaps between consecutive token chunks (a chunk carries one token on Hearth and vLLM;
    /// servers that batch tokens into chunks give longer, fewer gaps).
    pub fn itls(&self) -> Vec<f64> {
        self.token_times.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// Prompt tokens per second of time to first token (queueing included).
    pub fn prefill_tok_s(&self, prompt_tokens: u32) -> Option<f64> {
        let t = self.ttft()?;
        (t > 0.0).then(|| f64::from(prompt_tokens) / t)
    }

    /// Tokens after the first per second after the first: the decode rate one user sees.
    /// `None` when everything came in one chunk (a server that buffers, e.g. a whole tool
    /// call), where there is no rate to see.
    pub fn decode_tok_s(&self, completion_tokens: u32) -> Option<f64> {
        let first = self.ttft()?;
        let span = self.e2e - first;
        (completion_tokens > 1 && self.token_times.len() > 1 && span > 0.0)
            .then(|| f64::from(completion_tokens - 1) / span)
    }
}

/// Records arrivals against the moment the request was sent.
#[derive(Debug)]
pub struct Clock {
    start: Instant,
    timing: Timing,
}

impl Clock {
    pub fn start() -> Self {
        Self {
            start: Instant::now(),
            timing: Timing::default(),
        }
    }

    /// A chunk with generated text arrived now.
    pub fn token(&mut self) {
        let t = self.start.elapsed().as_secs_f64();
        self.timing.token_times.push(t);
    }

    pub fn finish(mut self) -> Timing {
        self.timing.e2e = self.start.elapsed().as_secs_f64();
        self.timing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_from_arrivals() {
        let t = Timing {
            token_times: vec![0.5, 0.6, 0.7, 0.9],
            e2e: 1.0,
        };
        assert_eq!(t.ttft(), Some(0.5));
        let itls: Vec<_> = t.itls().iter().map(|x| (x * 10.0).round() / 10.0).collect();
        assert_eq!(itls, [0.1, 0.1, 0.2]);
        assert_eq!(t.prefill_tok_s(100), Some(200.0));
        assert_eq!(t.decode_tok_s(11), Some(20.0));
        assert_eq!(Timing::default().decode_tok_s(10), None);
        let one_chunk = Timing {
            token_times: vec![0.5],
            e2e: 0.5001,
        };
        assert_eq!(one_chunk.decode_tok_s(59), None);
    }
}
