//! Single-sequence generation straight on a model: chunked prefill, then decode, over a paged KV
//! cache whose blocks this sequence owns in order. The CLI's `generate` and `bench` use it; the
//! batching engine (scheduler + core loop) drives the same `CausalLm::forward`.

use std::time::{Duration, Instant};

use hearth_backend::{AttnMetadata, Backend, KvDtype, SeqAttn};
use hearth_models::{CausalLm, ForwardBatch};

use crate::request::FinishReason;
use crate::sampler::{sample, Rng, SamplingParams};
use crate::RuntimeError;

/// Timings of one generation, for `bench` and the CLI's closing line.
#[derive(Debug, Clone, Copy, Default)]
pub struct GenStats {
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    pub prefill: Duration,
    pub decode: Duration,
}

impl GenStats {
    pub fn prefill_tps(&self) -> f64 {
        self.prompt_tokens as f64 / self.prefill.as_secs_f64().max(1e-9)
    }

    /// Decode rate over the tokens after the first (the first comes from prefill).
    pub fn decode_tps(&self) -> f64 {
        self.generated_tokens.saturating_sub(1) as f64 / self.decode.as_secs_f64().max(1e-9)
    }
}

/// A model, its backend and a KV cache for one sequence of up to `max_len` tokens.
pub struct Generator<'a, B: Backend> {
    backend: &'a B,
    model: &'a dyn CausalLm<B>,
    kv: B::KvCache,
    block_size: usize,
    max_len: usize,
    prefill_chunk: usize,
    /// Length of the current prompt: positions below it are prompt rows.
    prompt_len: usize,
    /// Whether greedy decode steps are queued one ahead (HEARTH_ASYNC_DECODE=0: not).
    run_ahead: bool,
}

impl<'a, B: Backend> Generator<'a, B> {
    pub fn new(
        backend: &'a B,
        model: &'a dyn CausalLm<B>,
        max_len: usize,
    ) -> Result<Self, RuntimeError> {
        Self::with_kv_dtype(backend, model, max_len, KvDtype::default())
    }

    /// As `new`, with the KV cache's element type (where the backend has a choice).
    pub fn with_kv_dtype(
        backend: &'a B,
        model: &'a dyn CausalLm<B>,
        max_len: usize,
        kv_dtype: KvDtype,
    ) -> Result<Self, RuntimeError> {
        let block_size = 16;
        let num_blocks = max_len.div_ceil(block_size);
        let spec = model.kv_spec(num_blocks, block_size).with_dtype(kv_dtype);
        let kv = backend.alloc_kv(spec)?;
        // One sequence: every decode step is one row, a graph size of its own.
        backend.enable_decode_graphs();
        Ok(Generator {
            backend,
            model,
            kv,
            block_size,
            max_len,
            prefill_chunk: 512,
            prompt_len: 0,
            run_ahead: crate::engine::run_ahead_from_env(),
        })
    }

    /// Prefill at most `n` tokens per forward pass (chunked prefill over a cached prefix).
    pub fn with_prefill_chunk(mut self, n: usize) -> Self {
        self.prefill_chunk = n.max(1);
        self
    }

    /// Whether greedy decode steps are queued one ahead of the token being read (the default,
    /// unless HEARTH_ASYNC_DECODE=0); the tokens are the same either way.
    pub fn with_run_ahead(mut self, on: bool) -> Self {
        self.run_ahead = on;
        self
    }

    pub fn max_len(&self) -> usize {
        self.max_len
    }

    fn step(&mut self, tokens: &[u32], start: usize) -> Vec<f32> {
        self.step_rows(tokens, start, vec![tokens.len() - 1])
    }

    /// Queues the decode step at `pos` that takes the greedy token on the device, as the engine
    /// does (no logits row comes back to the host). Its input is `tok`, or with None the last
    /// queued step's token, where it was computed.
    fn queue_greedy(&mut self, tok: Option<u32>, pos: usize) -> B::Ids {
        let batch = self.batch(&[tok.unwrap_or(0)], pos, vec![0]);
        let (backend, model, kv) = (self.backend, self.model, &mut self.kv);
        backend.install(|| model.forward_greedy_deferred(backend, &batch, kv, tok.is_none()))
    }

    fn step_rows(&mut self, tokens: &[u32], start: usize, logits_rows: Vec<usize>) -> Vec<f32> {
        let batch = self.batch(tokens, start, logits_rows);
        let (backend, model, kv) = (self.backend, self.model, &mut self.kv);
        backend.install(|| model.forward(backend, &batch, kv))
    }

    /// `tokens` at positions from `start`, this sequence's blocks in order.
    fn batch(&self, tokens: &[u32], start: usize, logits_rows: Vec<usize>) -> ForwardBatch {
        let n = tokens.len();
        let end = start + n;
        let blocks = end.div_ceil(self.block_size);
        ForwardBatch {
            tokens: tokens.to_vec(),
            positions: (start..end).map(|p| p as u32).collect(),
            attn: AttnMetadata {
                seqs: vec![SeqAttn {
                    query_start: 0,
                    query_len: n,
                    context_len: end,
                    block_table: (0..blocks as u32).collect(),
                }],
                slot_mapping: (start..end).map(|p| p as u32).collect(),
                prefill: (start..end).map(|p| p < self.prompt_len).collect(),
            },
            logits_rows,
        }
    }

    /// Runs `prompt` through the model in chunks and returns the last position's logits.
    pub fn prefill(&mut self, prompt: &[u32]) -> Result<Vec<f32>, RuntimeError> {
        if prompt.is_empty() {
            return Err(RuntimeError::EmptyPrompt);
        }
        if prompt.len() >= self.max_len {
            return Err(RuntimeError::PromptTooLong {
                prompt: prompt.len(),
                max: self.max_len,
            });
        }
        self.prompt_len = prompt.len();
        let mut logits = Vec::new();
        for (i, chunk) in prompt.chunks(self.prefill_chunk).enumerate() {
            logits = self.step(chunk, i * self.prefill_chunk);
        }
        Ok(logits)
    }

    /// Prefills `prompt`, then samples up to `max_tokens` tokens, calling `on_token` with each;
    /// `on_token` returns false to stop. Stops on `stop_ids` too (the stop token is reported).
    pub fn generate(
        &mut self,
        prompt: &[u32],
        max_tokens: usize,
        params: &SamplingParams,
        stop_ids: &[u32],
        mut on_token: impl FnMut(u32) -> bool,
    ) -> Result<(FinishReason, GenStats), RuntimeError> {
        if prompt.is_empty() {
            return Err(RuntimeError::EmptyPrompt);
        }
        if prompt.len() >= self.max_len {
            return Err(RuntimeError::PromptTooLong {
                prompt: prompt.len(),
                max: self.max_len,
            });
        }
        let mut rng = params.seed.map_or_else(Rng::from_entropy, Rng::new);
        let mut stats = GenStats {
            prompt_tokens: prompt.len(),
            ..Default::default()
        };
        let t0 = Instant::now();
        let logits = self.prefill(prompt)?;
        stats.prefill = t0.elapsed();
        let t1 = Instant::now();
        let mut finish = FinishReason::Length;
        // Greedy decoding takes each token on the device (`sample`'s greedy case is an argmax
        // with the same tie rule), as the engine does; other settings sample the logits here.
        let greedy = params.temperature <= 0.0 || params.top_k == 1;
        let mut tok = sample(&logits, params, &mut rng);
        // Greedy steps run one ahead: the step after the one being read is queued first, fed
        // its token on the device, so the device does not idle while the host reads a token,
        // reports it and queues the next step. A stop wastes the step queued ahead.
        let mut ahead: Option<B::Ids> = None;
        for pos in prompt.len()..prompt.len() + max_tokens {
            stats.generated_tokens += 1;
            if !on_token(tok) || stop_ids.contains(&tok) {
                finish = FinishReason::Stop;
                break;
            }
            if pos + 1 >= self.max_len || stats.generated_tokens == max_tokens {
                break;
            }
            if !greedy {
                tok = sample(&self.step(&[tok], pos), params, &mut rng);
                continue;
            }
            let this = match ahead.take() {
                Some(ids) => ids,
                None => self.queue_greedy(Some(tok), pos),
            };
            // The step at pos + 1 is needed unless this step's token stops the sequence.
            if self.run_ahead && pos + 2 < self.max_len && stats.generated_tokens + 1 < max_tokens {
                ahead = Some(self.queue_greedy(None, pos + 1));
            }
            tok = self.backend.read_ids(this)[0];
        }
        stats.decode = t1.elapsed();
        Ok((finish, stats))
    }

    /// Logits for every prompt position from one prefill pass (tests compare these with a
    /// reference), `[prompt.len(), vocab]` row-major.
    pub fn prefill_logits(&mut self, prompt: &[u32]) -> Vec<f32> {
        self.prompt_len = prompt.len();
        self.step_rows(prompt, 0, (0..prompt.len()).collect())
    }

    /// Logits for every prompt position, feeding one token per step (the decode path).
    pub fn decode_logits(&mut self, prompt: &[u32]) -> Vec<f32> {
        self.prompt_len = 0;
        prompt
            .iter()
            .enumerate()
            .flat_map(|(i, &t)| self.step(&[t], i))
            .collect()
    }
}
