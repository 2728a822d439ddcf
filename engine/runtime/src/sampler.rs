//! Token sampling from one row of logits: repetition / presence / frequency penalties,
//! min_tokens (stop tokens suppressed), greedy, temperature, top-k, top-p, min-p, with a
//! per-request seeded generator so a seeded request is reproducible; logprobs (of the raw
//! logits, as vLLM reports them) with top-n.

/// Sampling parameters of one request (OpenAI / vLLM semantics: temperature 0 means greedy).
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingParams {
    pub temperature: f32,
    /// 0 disables top-k.
    pub top_k: usize,
    pub top_p: f32,
    pub min_p: f32,
    pub seed: Option<u64>,
    /// > 1 discourages tokens already in the prompt or output (1 = off).
    pub repetition_penalty: f32,
    /// Subtracted once from every token already in the output.
    pub presence_penalty: f32,
    /// Subtracted per occurrence in the output.
    pub frequency_penalty: f32,
    /// Top-n logprobs to return with each token (`Some(0)`: only the sampled token's).
    pub logprobs: Option<usize>,
    /// Stop tokens are suppressed until this many tokens are generated.
    pub min_tokens: usize,
    /// Do not stop at the model's end-of-sequence tokens.
    pub ignore_eos: bool,
    /// Extra token ids that end generation.
    pub stop_token_ids: Vec<u32>,
}

impl SamplingParams {
    /// Whether the next token is plain greedy, needing no logits on the host: temperature 0 (or
    /// top_k 1), no logprobs, no penalties, and min_tokens (which masks stop tokens) satisfied.
    pub fn is_plain_greedy(&self, generated: usize) -> bool {
        (self.temperature <= 0.0 || self.top_k == 1)
            && self.logprobs.is_none()
            && self.repetition_penalty == 1.0
            && self.presence_penalty == 0.0
            && self.frequency_penalty == 0.0
            && generated >= self.min_tokens
    }
}

impl SamplingParams {
    /// Whether the next token needs nothing but the logits and these parameters (temperature,
    /// top-k, top-p, min-p): no logprobs, no penalties, min_tokens satisfied. Such rows can be
    /// sampled by the backend (`hearth_backend::sample`).
    pub fn is_plain_sampling(&self, generated: usize) -> bool {
        self.logprobs.is_none()
            && self.repetition_penalty == 1.0
            && self.presence_penalty == 0.0
            && self.frequency_penalty == 0.0
            && generated >= self.min_tokens
    }

    /// This request's next row for backend sampling, with the uniform draw `u`.
    pub fn sample_row(&self, u: f32) -> hearth_backend::SampleRow {
        hearth_backend::SampleRow {
            temperature: self.temperature,
            top_k: self.top_k.min(u32::MAX as usize) as u32,
            top_p: self.top_p,
            min_p: self.min_p,
            u,
        }
    }
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            seed: None,
            repetition_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            logprobs: None,
            min_tokens: 0,
            ignore_eos: false,
            stop_token_ids: Vec::new(),
        }
    }
}

/// A token and its log-probability.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenLogprob {
    pub token: u32,
    pub logprob: f32,
}

/// Logprobs of one sampled position.
#[derive(Debug, Clone, PartialEq)]
pub struct Logprobs {
    pub sampled: TokenLogprob,
    /// The n most likely tokens, most likely first.
    pub top: Vec<TokenLogprob>,
}

/// Log-softmax of `logits` at `token`, and the top `n` entries.
pub fn logprobs(logits: &[f32], token: u32, n: usize) -> Logprobs {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let lse = max + logits.iter().map(|&v| (v - max).exp()).sum::<f32>().ln();
    let lp = |t: u32| TokenLogprob {
        token: t,
        logprob: logits[t as usize] - lse,
    };
    let mut top: Vec<u32> = (0..logits.len() as u32).collect();
    let n = n.min(top.len());
    if n > 0 {
        let by_logit = |a: &u32, b: &u32| logits[*b as usize].total_cmp(&logits[*a as usize]);
        top.select_nth_unstable_by(n - 1, by_logit);
        top.truncate(n);
        top.sort_by(|a, b| by_logit(a, b).then(a.cmp(b)));
    } else {
        top.clear();
    }
    Logprobs {
        sampled: lp(token),
        top: top.into_iter().map(lp).collect(),
    }
}

/// What the penalties need to know about one sequence.
#[derive(Debug, Clone, Default)]
pub struct PenaltyState {
    /// Occurrences of each token in the output so far.
    pub output_counts: std::collections::HashMap<u32, u32>,
    /// Distinct prompt tokens (for the repetition penalty).
    pub prompt_tokens: std::collections::HashSet<u32>,
    pub generated: usize,
}

impl PenaltyState {
    pub fn new(prompt: &[u32]) -> Self {
        PenaltyState {
            prompt_tokens: prompt.iter().copied().collect(),
            ..Default::default()
        }
    }

    pub fn push(&mut self, token: u32) {
        *self.output_counts.entry(token).or_default() += 1;
        self.generated += 1;
    }
}

/// Applies penalties and min_tokens suppression in place (before temperature, as vLLM does).
pub fn apply_penalties(
    logits: &mut [f32],
    p: &SamplingParams,
    state: &PenaltyState,
    stop_ids: &[u32],
) {
    if p.repetition_penalty != 1.0 {
        let seen = state.prompt_tokens.iter().chain(state.output_counts.keys());
        let seen: std::collections::HashSet<u32> = seen.copied().collect();
        for t in seen {
            if let Some(l) = logits.get_mut(t as usize) {
                *l = if *l > 0.0 {
                    *l / p.repetition_penalty
                } else {
                    *l * p.repetition_penalty
                };
            }
        }
    }
    if p.presence_penalty != 0.0 || p.frequency_penalty != 0.0 {
        for (&t, &c) in &state.output_counts {
            if let Some(l) = logits.get_mut(t as usize) {
                *l -= p.frequency_penalty * c as f32 + p.presence_penalty;
            }
        }
    }
    if state.generated < p.min_tokens {
        for &t in stop_ids {
            if let Some(l) = logits.get_mut(t as usize) {
                *l = f32::NEG_INFINITY;
            }
        }
    }
}

/// A small, fast PRNG (SplitMix64): reproducible across platforms for a given seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn from_entropy() -> Self {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Rng(t ^ (std::process::id() as u64) << 32)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// Index of the largest logit (the lowest index on ties, like torch.argmax).
pub use hearth_backend::argmax;

/// Samples one token id from `logits` under `p`.
pub fn sample(logits: &[f32], p: &SamplingParams, rng: &mut Rng) -> u32 {
    if p.temperature <= 0.0 || p.top_k == 1 {
        return argmax(logits);
    }
    let mut cand: Vec<(u32, f32)> = logits
        .iter()
        .enumerate()
        .map(|(i, &l)| (i as u32, l / p.temperature))
        .collect();
    cand.sort_unstable_by(|a, b| b.1.total_cmp(&a.1));
    if p.top_k > 0 {
        cand.truncate(p.top_k);
    }
    let max = cand[0].1;
    let mut probs: Vec<f32> = cand.iter().map(|&(_, l)| (l - max).exp()).collect();
    let total: f32 = probs.iter().sum();
    probs.iter_mut().for_each(|x| *x /= total);
    let mut keep = probs.len();
    if p.top_p < 1.0 {
        let mut acc = 0.0;
        for (i, &pr) in probs.iter().enumerate() {
            acc += pr;
            if acc >= p.top_p {
                keep = i + 1;
                break;
            }
        }
    }
    if p.min_p > 0.0 {
        let floor = p.min_p * probs[0];
        keep = keep.min(probs.iter().take_while(|&&pr| pr >= floor).count().max(1));
    }
    let kept: f32 = probs[..keep].iter().sum();
    let mut r = rng.next_f32() * kept;
    for i in 0..keep {
        r -= probs[i];
        if r <= 0.0 {
            return cand[i].0;
        }
    }
    cand[keep - 1].0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_max_and_first_on_ties() {
        assert_eq!(argmax(&[0.1, 3.0, 3.0, -1.0]), 1);
        let p = SamplingParams::default();
        assert_eq!(sample(&[0.0, 5.0, 1.0], &p, &mut Rng::new(1)), 1);
    }

    #[test]
    fn seeded_sampling_is_reproducible_and_respects_top_k() {
        let logits: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin()).collect();
        let p = SamplingParams {
            temperature: 1.0,
            top_k: 3,
            seed: Some(9),
            ..Default::default()
        };
        let a: Vec<u32> = {
            let mut r = Rng::new(9);
            (0..20).map(|_| sample(&logits, &p, &mut r)).collect()
        };
        let b: Vec<u32> = {
            let mut r = Rng::new(9);
            (0..20).map(|_| sample(&logits, &p, &mut r)).collect()
        };
        assert_eq!(a, b);
        let mut top: Vec<(usize, f32)> = logits.iter().copied().enumerate().collect();
        top.sort_by(|x, y| y.1.total_cmp(&x.1));
        let allowed: Vec<u32> = top[..3].iter().map(|t| t.0 as u32).collect();
        assert!(
            a.iter().all(|t| allowed.contains(t)),
            "{a:?} outside top-3 {allowed:?}"
        );
    }

    #[test]
    fn logprobs_are_log_softmax_with_sorted_top_n() {
        let logits = [1.0f32, 3.0, 2.0, 0.5];
        let z: f32 = logits.iter().map(|v| v.exp()).sum();
        let lp = logprobs(&logits, 2, 3);
        assert!((lp.sampled.logprob - (2f32.exp() / z).ln()).abs() < 1e-6);
        assert_eq!(
            lp.top.iter().map(|t| t.token).collect::<Vec<_>>(),
            vec![1, 2, 0]
        );
        assert!((lp.top[0].logprob - (3f32.exp() / z).ln()).abs() < 1e-6);
        assert!(logprobs(&logits, 0, 0).top.is_empty());
    }

    #[test]
    fn penalties_match_their_definitions() {
        let mut state = PenaltyState::new(&[0]);
        state.push(1);
        state.push(1);
        let p = SamplingParams {
            repetition_penalty: 2.0,
            presence_penalty: 0.5,
            frequency_penalty: 0.25,
            ..Default::default()
        };
        let mut logits = [4.0f32, -2.0, 1.0];
        apply_penalties(&mut logits, &p, &state, &[]);
        // token 0: prompt only -> 4 / 2; token 1: output twice -> -2 * 2 - (0.25 * 2 + 0.5)
        assert_eq!(logits, [2.0, -5.0, 1.0]);
    }

    #[test]
    fn min_tokens_suppresses_stop_ids() {
        let state = PenaltyState::new(&[]);
        let p = SamplingParams {
            min_tokens: 2,
            ..Default::default()
        };
        let mut logits = [0.0f32, 9.0];
        apply_penalties(&mut logits, &p, &state, &[1]);
        assert_eq!(argmax(&logits), 0);
    }

    #[test]
    fn different_seeds_give_different_samples() {
        let logits = vec![0.0f32; 1000];
        let p = SamplingParams {
            temperature: 1.0,
            ..Default::default()
        };
        let run = |seed| {
            let mut r = Rng::new(seed);
            (0..16)
                .map(|_| sample(&logits, &p, &mut r))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }

    #[test]
    fn top_p_keeps_only_the_nucleus() {
        // One dominant token: a small top_p must always pick it.
        let logits = [10.0, 0.0, 0.0, 0.0];
        let p = SamplingParams {
            temperature: 1.0,
            top_p: 0.5,
            ..Default::default()
        };
        let mut r = Rng::new(3);
        assert!((0..100).all(|_| sample(&logits, &p, &mut r) == 0));
    }
}
