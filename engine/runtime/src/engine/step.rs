//! One engine step: schedule, build the batch, run the forward pass, sample, send, update the
//! scheduler; and greedy decode steps queued one ahead of the step before them (see
//! `Core::may_run_ahead`).

use std::time::Instant;

use hearth_backend::{Backend, SampleRow};
use hearth_models::ForwardBatch;
use hearth_sched::{SchedulerOutput, SeqId};
use hearth_text::guided::GuideState;
use tracing::warn;

use super::{Core, EngineParts, SeqState, STATS_EVERY};
use crate::request::{EngineOutput, FinishReason};
use crate::sampler::{apply_penalties, logprobs, sample};

/// A sequence's next token: already picked on the backend (plain greedy), or to be sampled
/// from its logits row.
enum NextToken<'a> {
    Picked(u32),
    FromLogits(&'a mut [f32]),
}

/// What a step's forward pass left: the ids the backend picked, still on their way, or
/// logits rows for the host to sample.
enum StepResult<B: Backend> {
    Queued(B::Ids),
    Logits(Vec<f32>),
}

/// Who picks a step's tokens (`Core::pick`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pick {
    /// The backend's argmax.
    Greedy,
    /// The backend's sampler (a GPU's).
    Device,
    /// The host, from the logits rows.
    Host,
}

/// A decode step queued behind the one before it (fed that step's tokens on the device),
/// with what its results need.
pub(super) struct Ahead<B: Backend> {
    out: SchedulerOutput,
    sampled_ids: Vec<SeqId>,
    ids: B::Ids,
}

impl<B: Backend> Core<B> {
    /// One step; false when nothing could be scheduled.
    pub(super) fn step(&mut self) -> bool {
        let mut marks = self.trace.start();
        let (out, sampled_ids, result) = match self.ahead.take() {
            // Queued behind the last step, fed its tokens on the device.
            Some(a) => (a.out, a.sampled_ids, StepResult::Queued(a.ids)),
            None => {
                let out: SchedulerOutput = self.sched.schedule();
                if out.is_empty() {
                    return false;
                }
                self.note_scheduled(&out);
                let (batch, sampled_ids) = self.build(&out);
                if let Some(m) = marks.as_mut() {
                    m.batch_built();
                }
                let result = self.launch(&batch, &sampled_ids);
                (out, sampled_ids, result)
            }
        };
        // A decode step whose tokens the backend picks and whose sequences all go on (as far as
        // the host can tell before reading its tokens) has the step after it queued first, so
        // the device does not wait while the host reads, sends and schedules.
        let ahead_pick = match result {
            StepResult::Queued(_) => self.may_run_ahead(&out, &sampled_ids),
            StepResult::Logits(_) => None,
        };
        if let Some(pick) = ahead_pick {
            self.queue_ahead(&out, &sampled_ids, pick);
        }
        let ahead = ahead_pick.is_some();
        let EngineParts { backend, model, .. } = &self.parts;
        let (mut logits, ids) = match result {
            StepResult::Queued(ids) => (Vec::new(), Some(backend.read_ids(ids))),
            StepResult::Logits(logits) => (logits, None),
        };
        if let Some(m) = marks.as_mut() {
            m.forward_done();
        }
        let vocab = model.info().vocab_size;
        let mut sampled = Vec::with_capacity(sampled_ids.len());
        let mut finished = Vec::new();
        for (i, id) in sampled_ids.iter().enumerate() {
            let next = match &ids {
                Some(ids) => NextToken::Picked(ids[i]),
                None => NextToken::FromLogits(&mut logits[i * vocab..(i + 1) * vocab]),
            };
            if let Some((tok, finish)) = self.sample_one(*id, next) {
                sampled.push((*id, tok));
                if finish.is_some() {
                    finished.push(*id);
                }
            } else {
                finished.push(*id);
            }
        }
        if ahead {
            // The scheduler took this step's results with placeholder tokens to plan the next.
            for &(id, tok) in &sampled {
                self.sched.set_last_token(id, tok);
            }
            for &id in &finished {
                self.sched.abort(id);
            }
        } else {
            self.sched.update(&out, &sampled, &finished);
        }
        // Sample 0 of a request has computed (and cached) the prompt: admit its siblings.
        for id in &sampled_ids {
            if id & 0xFF == 0 && self.parked.contains_key(&(id >> 8)) {
                self.release_parked(id >> 8);
            }
        }
        self.stats.generation_tokens += sampled.len() as u64;
        self.stats.steps += 1;
        self.stats.observe_step(out.num_tokens);
        self.last_step = Instant::now();
        if self.log.at.elapsed() >= STATS_EVERY {
            self.log_stats();
        }
        self.trace.end(marks, out.num_tokens);
        true
    }

    /// Counts a step's prompt rows and stamps its sequences' first scheduling.
    fn note_scheduled(&mut self, out: &SchedulerOutput) {
        let now = Instant::now();
        for s in &out.seqs {
            if let Some(st) = self.seqs.get_mut(&s.id) {
                st.first_scheduled.get_or_insert(now);
                st.cached_tokens.get_or_insert(s.start);
                let prompt_rows = st.prompt_len.saturating_sub(s.start).min(s.tokens.len());
                self.stats.prompt_tokens += prompt_rows as u64;
            }
        }
    }

    /// The step's batch (decode steps padded to the backend's graph sizes; padding rows come
    /// last and are ignored) and the sequences it samples, in logits-row order.
    fn build(&self, out: &SchedulerOutput) -> (ForwardBatch, Vec<SeqId>) {
        let seqs = &self.seqs;
        let (mut batch, sampled_ids) = crate::runner::build_batch(out, self.block_size, |id| {
            seqs.get(&id).map_or(usize::MAX, |s| s.prompt_len)
        });
        batch.pad_decode(self.decode_sizes);
        (batch, sampled_ids)
    }

    /// How the tokens of a step of `sampled_ids` are picked, once each sequence has
    /// `ahead` more tokens than now (0: this step; 1: the step after it): all plain greedy, by
    /// the backend's argmax; all without logprobs, penalties or a grammar, by a GPU backend's
    /// sampler; else on the host, from the logits rows.
    fn pick(&self, sampled_ids: &[SeqId], ahead: usize) -> Pick {
        let all = |f: &dyn Fn(&SeqState, usize) -> bool| {
            sampled_ids.iter().all(|id| {
                self.seqs
                    .get(id)
                    .is_some_and(|s| s.guide.is_none() && f(s, s.penalties.generated + ahead))
            })
        };
        if all(&|s, n| s.params.is_plain_greedy(n)) {
            Pick::Greedy
        } else if self.parts.backend.samples_on_device()
            && all(&|s, n| s.params.is_plain_sampling(n))
        {
            Pick::Device
        } else {
            Pick::Host
        }
    }

    /// Runs the step's forward pass: queued when the backend picks the tokens (on a GPU only
    /// the ids come back, later), else the logits rows for the host to sample.
    fn launch(&mut self, batch: &ForwardBatch, sampled_ids: &[SeqId]) -> StepResult<B> {
        match self.pick(sampled_ids, 0) {
            Pick::Host => {
                let EngineParts { backend, model, .. } = &self.parts;
                let kv = &mut self.kv;
                StepResult::Logits(backend.install(|| model.forward(backend, batch, kv)))
            }
            pick => StepResult::Queued(self.queue(batch, sampled_ids, pick, false)),
        }
    }

    /// Queues a step whose tokens the backend picks (`fed`: its tokens are the last queued
    /// step's, `Backend::begin_fed_step`).
    fn queue(
        &mut self,
        batch: &ForwardBatch,
        sampled_ids: &[SeqId],
        pick: Pick,
        fed: bool,
    ) -> B::Ids {
        let EngineParts { backend, model, .. } = &self.parts;
        let kv = &mut self.kv;
        if pick == Pick::Greedy {
            return backend.install(|| model.forward_greedy_deferred(backend, batch, kv, fed));
        }
        let mut rows: Vec<SampleRow> = sampled_ids
            .iter()
            .map(|id| {
                let s = self.seqs.get_mut(id).expect("sampled sequences are live");
                s.params.sample_row(s.rng.next_f32())
            })
            .collect();
        // Padding rows of a decode step are sampled greedily and ignored.
        rows.resize(batch.logits_rows.len(), SampleRow::GREEDY);
        backend.install(|| model.forward_sample_deferred(backend, batch, kv, &rows, fed))
    }

    /// How the step after `out` (a queued step) picks its tokens, if it can be planned and
    /// queued before `out`'s tokens are read: every running sequence is in it as one sampled
    /// decode row, its tokens are still picked by the backend and it cannot end by length at
    /// it; nothing waits to be admitted; blocks are free for every row. Then the next step is
    /// the same sequences, one token further.
    fn may_run_ahead(&self, out: &SchedulerOutput, sampled_ids: &[SeqId]) -> Option<Pick> {
        let sched = self.sched.stats();
        let go_on = self.run_ahead
            && out.preempted.is_empty()
            && out.seqs.iter().all(|s| s.tokens.len() == 1 && s.sample)
            && sampled_ids.len() == out.seqs.len()
            && sched.running == out.seqs.len()
            && sched.waiting == 0
            && self.parked.is_empty()
            && sched.total_blocks - sched.used_blocks >= out.seqs.len()
            && sampled_ids.iter().all(|id| {
                self.seqs.get(id).is_some_and(|s| {
                    let generated = s.penalties.generated + 1;
                    generated < s.max_tokens && s.prompt_len + generated < self.max_model_len
                })
            });
        let pick = self.pick(sampled_ids, 1);
        (go_on && pick != Pick::Host).then_some(pick)
    }

    /// Plans the step after `out` with placeholder tokens and queues it, fed `out`'s tokens
    /// on the device (row i takes row i's token: the same sequences in the same order).
    fn queue_ahead(&mut self, out: &SchedulerOutput, sampled_ids: &[SeqId], pick: Pick) {
        let placeholders: Vec<(SeqId, u32)> = sampled_ids.iter().map(|&id| (id, 0)).collect();
        self.sched.update(out, &placeholders, &[]);
        let next = self.sched.schedule();
        assert!(
            next.preempted.is_empty()
                && next
                    .seqs
                    .iter()
                    .map(|s| s.id)
                    .eq(sampled_ids.iter().copied())
                && next.seqs.iter().all(|s| s.tokens.len() == 1 && s.sample),
            "engine: the step queued ahead must be the same sequences, one token further"
        );
        let (batch, next_sampled) = self.build(&next);
        let ids = self.queue(&batch, &next_sampled, pick, true);
        self.ahead = Some(Ahead {
            out: next,
            sampled_ids: next_sampled,
            ids,
        });
    }

    /// Samples, sends, and decides whether the sample ends. None: the client is gone.
    fn sample_one(
        &mut self,
        id: SeqId,
        next: NextToken<'_>,
    ) -> Option<(u32, Option<FinishReason>)> {
        let max_model_len = self.max_model_len;
        let st = self.seqs.get_mut(&id)?;
        let p = st.params.clone();
        let mut stops: Vec<u32> = p.stop_token_ids.clone();
        if !p.ignore_eos {
            stops.extend_from_slice(&self.parts.eos_ids);
        }
        let (tok, raw) = match next {
            NextToken::Picked(tok) => (tok, None),
            NextToken::FromLogits(row) => {
                let raw = p.logprobs.map(|_| row.to_vec());
                apply_penalties(row, &p, &st.penalties, &stops);
                if let Some(g) = st.guide.as_mut() {
                    guide_logits(g, row, &stops, id);
                }
                (sample(row, &p, &mut st.rng), raw)
            }
        };
        st.penalties.push(tok);
        let now = Instant::now();
        st.first_token.get_or_insert(now);
        st.last_token = Some(now);
        let generated = st.penalties.generated;
        let is_stop = stops.contains(&tok) && generated >= p.min_tokens;
        // A guided sample ends once its grammar is complete and nothing may follow.
        let grammar_done = match st.guide.as_mut() {
            Some(g) if !is_stop => {
                let advanced = g.advance(tok);
                if !advanced {
                    warn!(
                        seq = id,
                        token = tok,
                        "engine: guided sample took a token its grammar refuses; ending it"
                    );
                }
                !advanced || g.is_finished()
            }
            _ => false,
        };
        let finish = if is_stop || grammar_done {
            Some(FinishReason::Stop)
        } else if generated >= st.max_tokens || st.prompt_len + generated >= max_model_len {
            Some(FinishReason::Length)
        } else {
            None
        };
        let output = EngineOutput {
            index: st.index,
            token: tok,
            logprobs: raw.map(|r| logprobs(&r, tok, p.logprobs.unwrap_or(0))),
            finish,
            metrics: finish.map(|_| st.metrics()),
        };
        let delivered = st.out.send(output).is_ok();
        if finish.is_some() {
            self.seqs.remove(&id);
            self.stats.finished_requests += 1;
        }
        if !delivered {
            self.seqs.remove(&id);
            return None;
        }
        Some((tok, finish))
    }
}

/// Masks `row` to what the sample's grammar allows; its stop tokens stay allowed once the text
/// is complete. With nothing allowed (a vocabulary that cannot spell what the grammar needs)
/// the stop tokens are left so the sample can end rather than go off the grammar.
fn guide_logits(g: &mut GuideState, row: &mut [f32], stops: &[u32], seq: SeqId) {
    let mask = g.mask();
    let kept: Vec<(u32, f32)> = stops
        .iter()
        .filter_map(|&t| row.get(t as usize).map(|&l| (t, l)))
        .collect();
    mask.apply(row);
    let dead_end = mask.count() == 0 && !g.is_accepting();
    if dead_end {
        warn!(
            seq,
            "engine: no token can continue the guided text; ending the sample"
        );
    }
    if g.is_accepting() || dead_end {
        for (t, l) in kept {
            row[t as usize] = if dead_end { l.max(0.0) } else { l };
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use hearth_text::guided::{json_schema_grammar, Guide, SharedMaskCache, TokenVocab};

    use super::*;

    /// Tokens: 0 "1", 1 "2", 2 "x", 3 EOS (a control token).
    fn integer_guide() -> GuideState {
        let pieces = [("1", false), ("2", false), ("x", false), ("</s>", true)];
        let vocab = TokenVocab::from_pieces(pieces.map(|(p, c)| (p.as_bytes().to_vec(), c)));
        let grammar = json_schema_grammar(&serde_json::json!({"type": "integer"})).unwrap();
        let guide = Guide {
            grammar: Arc::new(grammar),
            vocab: Arc::new(vocab),
        };
        GuideState::new(&guide, SharedMaskCache::default())
    }

    #[test]
    fn eos_is_allowed_only_once_the_grammar_is_complete() {
        let mut g = integer_guide();
        let mut row = [1.0f32, 0.5, 9.0, 8.0, 7.0]; // id 4: past the vocabulary
        guide_logits(&mut g, &mut row, &[3], 0);
        assert_eq!(
            row,
            [
                1.0,
                0.5,
                f32::NEG_INFINITY,
                f32::NEG_INFINITY,
                f32::NEG_INFINITY
            ]
        );
        assert!(g.advance(1));
        let mut row = [1.0f32, 0.5, 9.0, 8.0, 7.0];
        guide_logits(&mut g, &mut row, &[3], 0);
        assert_eq!(row, [1.0, 0.5, f32::NEG_INFINITY, 8.0, f32::NEG_INFINITY]);
    }
}
