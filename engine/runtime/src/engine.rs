//! The engine core: one thread owns the scheduler, the model, the backend and the KV cache and
//! runs steps (schedule -> forward -> sample -> update); callers hold a cloneable `EngineHandle`
//! that sends commands over a channel and get a `RequestStream` of token outputs back. Dropping
//! the stream aborts the request and frees its blocks. A step itself is in `step`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hearth_backend::Backend;
use hearth_sched::{NewSeq, SchedError, Scheduler, SchedulerConfig, SeqId};
use hearth_text::guided::{GuideState, SharedMaskCache};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tracing::{info, warn};

use crate::request::{EngineOutput, FinishReason, RequestId, RequestMetrics, ValidRequest};
use crate::sampler::{PenaltyState, Rng};
use crate::stats::EngineStats;
use crate::RuntimeError;
use hearth_models::CausalLm;

mod step;
use step::Ahead;

/// Most parallel samples per request (sequence ids reserve 8 bits for the sample index).
pub const MAX_N: usize = 128;

/// What the engine thread owns: a model on its backend. The tokenizer stays with the caller;
/// the engine only needs the ids that end a sequence.
pub struct EngineParts<B: Backend> {
    pub backend: B,
    pub model: Box<dyn CausalLm<B>>,
    pub max_model_len: usize,
    /// End-of-sequence token ids (ignored by requests with ignore_eos).
    pub eos_ids: Vec<u32>,
}

impl<B: Backend> From<crate::LoadedModel<B>> for EngineParts<B> {
    fn from(m: crate::LoadedModel<B>) -> Self {
        let eos_ids = m.tokenizer.eos_ids().to_vec();
        EngineParts {
            backend: m.backend,
            model: m.model,
            max_model_len: m.max_model_len,
            eos_ids,
        }
    }
}

/// Scheduling and memory settings of the engine.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub max_num_seqs: usize,
    pub max_num_batched_tokens: usize,
    pub block_size: usize,
    pub num_blocks: usize,
    pub enable_prefix_caching: bool,
    pub enable_chunked_prefill: bool,
    /// KV cache element type (a backend without the choice keeps its own).
    pub kv_dtype: hearth_backend::KvDtype,
    /// Whether a greedy decode step may be queued before the tokens of the step before it are
    /// read (fed them on the device; vLLM's async scheduling). The tokens are the same.
    pub run_ahead: bool,
}

/// The default of `EngineConfig::run_ahead` and of `Generator`'s: on unless
/// HEARTH_ASYNC_DECODE=0 (to compare).
pub(crate) fn run_ahead_from_env() -> bool {
    std::env::var("HEARTH_ASYNC_DECODE").map_or(true, |v| v != "0")
}

enum Command {
    Add {
        id: RequestId,
        req: ValidRequest,
        out: UnboundedSender<EngineOutput>,
    },
    Abort(RequestId),
    Stats(mpsc::Sender<EngineStats>),
    Shutdown,
}

/// Why a request was refused at submission.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error(transparent)]
    Sched(#[from] SchedError),
    #[error("n is {0}; allowed: 1 to {MAX_N}")]
    BadN(usize),
    #[error("the engine has shut down")]
    Closed,
}

/// Cloneable handle to the engine thread.
#[derive(Clone)]
pub struct EngineHandle {
    tx: mpsc::Sender<Command>,
    next_id: Arc<AtomicU64>,
    max_model_len: usize,
    // Shared so that whichever clone calls `shutdown` can join the thread.
    thread: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl std::fmt::Debug for EngineHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineHandle")
            .field("max_model_len", &self.max_model_len)
            .finish()
    }
}

/// The outputs of one request, in order. Dropping it aborts the request.
pub struct RequestStream {
    id: RequestId,
    rx: UnboundedReceiver<EngineOutput>,
    tx: mpsc::Sender<Command>,
    remaining: usize,
}

impl RequestStream {
    pub fn id(&self) -> RequestId {
        self.id
    }

    /// The next output, or None once every sample has finished.
    pub async fn next(&mut self) -> Option<EngineOutput> {
        if self.remaining == 0 {
            return None;
        }
        let o = self.rx.recv().await;
        self.count(&o);
        o
    }

    /// `next` for synchronous callers (not inside an async runtime).
    pub fn blocking_next(&mut self) -> Option<EngineOutput> {
        if self.remaining == 0 {
            return None;
        }
        let o = self.rx.blocking_recv();
        self.count(&o);
        o
    }

    fn count(&mut self, o: &Option<EngineOutput>) {
        match o {
            Some(o) if o.finish.is_some() => self.remaining -= 1,
            Some(_) => {}
            None => self.remaining = 0,
        }
    }
}

impl Drop for RequestStream {
    fn drop(&mut self) {
        if self.remaining > 0 {
            let _ = self.tx.send(Command::Abort(self.id));
        }
    }
}

/// Runs a padding-only decode step twice for each of the backend's decode batch sizes the
/// engine can reach (largest first, so the activation arena is sized once): the first run warms
/// it up, the second captures a GPU backend's graph, so no request waits for a capture.
fn warm_decode_sizes<B: Backend>(
    parts: &EngineParts<B>,
    kv: &mut B::KvCache,
    max_num_seqs: usize,
) -> &'static [usize] {
    let all = parts.backend.enable_decode_graphs();
    let reach = all
        .iter()
        .position(|&s| s >= max_num_seqs)
        .map_or(all.len(), |i| i + 1);
    let sizes = &all[..reach];
    if sizes.is_empty() {
        return all;
    }
    let t = Instant::now();
    for &size in sizes.iter().rev() {
        let mut batch = hearth_backend::ForwardBatch {
            tokens: Vec::new(),
            positions: Vec::new(),
            attn: hearth_backend::AttnMetadata {
                seqs: Vec::new(),
                prefill: Vec::new(),
                slot_mapping: Vec::new(),
            },
            logits_rows: Vec::new(),
        };
        batch.pad_decode(&[size]);
        for _ in 0..2 {
            let b = &parts.backend;
            b.install(|| parts.model.forward_greedy(b, &batch, kv));
        }
    }
    info!(
        sizes = ?sizes,
        secs = t.elapsed().as_secs_f32(),
        "phase: capture graphs (decode batch sizes)"
    );
    all
}

impl EngineHandle {
    /// Starts the engine thread on a loaded model.
    pub fn start<B: Backend + 'static>(
        parts: EngineParts<B>,
        cfg: EngineConfig,
    ) -> Result<Self, RuntimeError>
    where
        B::KvCache: 'static,
    {
        let kv_spec = parts
            .model
            .kv_spec(cfg.num_blocks, cfg.block_size)
            .with_dtype(cfg.kv_dtype);
        let mut kv = parts.backend.alloc_kv(kv_spec)?;
        let decode_sizes = warm_decode_sizes(&parts, &mut kv, cfg.max_num_seqs);
        // A sequence can never outgrow the pool: cap its length at the pool's capacity.
        let capacity = cfg.num_blocks * cfg.block_size;
        if capacity < parts.max_model_len {
            warn!(
                capacity,
                max_model_len = parts.max_model_len,
                "engine: KV pool smaller than max_model_len; sequences end at the pool's capacity"
            );
        }
        let max_model_len = parts.max_model_len.min(capacity);
        info!(
            num_blocks = cfg.num_blocks,
            block_size = cfg.block_size,
            kv_tokens = cfg.num_blocks * cfg.block_size,
            max_num_seqs = cfg.max_num_seqs,
            max_num_batched_tokens = cfg.max_num_batched_tokens,
            kv_dtype = cfg.kv_dtype.name(),
            "engine: KV cache planned"
        );
        let sched = Scheduler::new(SchedulerConfig {
            block_size: cfg.block_size,
            num_blocks: cfg.num_blocks,
            max_num_seqs: cfg.max_num_seqs,
            max_num_batched_tokens: cfg.max_num_batched_tokens,
            max_model_len,
            enable_prefix_caching: cfg.enable_prefix_caching,
            enable_chunked_prefill: cfg.enable_chunked_prefill,
        });
        let (tx, rx) = mpsc::channel();
        let core = Core {
            kv,
            decode_sizes,
            sched,
            block_size: cfg.block_size,
            max_model_len,
            parts,
            seqs: HashMap::new(),
            stats: EngineStats::default(),
            last_step: Instant::now(),
            log: StatsLog {
                at: Instant::now(),
                prompt_tokens: 0,
                generation_tokens: 0,
            },
            prefix_caching: cfg.enable_prefix_caching,
            parked: HashMap::new(),
            trace: crate::step_trace::StepTrace::from_env(),
            run_ahead: cfg.run_ahead,
            ahead: None,
        };
        let thread = std::thread::Builder::new()
            .name("hearth-engine-core".into())
            .spawn(move || core.run(rx))
            .map_err(|e| {
                RuntimeError::Unsupported(format!("cannot start the engine thread: {e}"))
            })?;
        Ok(EngineHandle {
            tx,
            next_id: Arc::new(AtomicU64::new(1)),
            max_model_len,
            thread: Arc::new(Mutex::new(Some(thread))),
        })
    }

    pub fn max_model_len(&self) -> usize {
        self.max_model_len
    }

    /// Queues a request; its outputs arrive on the returned stream.
    pub fn submit(&self, req: ValidRequest) -> Result<RequestStream, SubmitError> {
        if req.n == 0 || req.n > MAX_N {
            return Err(SubmitError::BadN(req.n));
        }
        if req.prompt.is_empty() {
            return Err(SchedError::EmptyPrompt.into());
        }
        if req.prompt.len() > self.max_model_len {
            return Err(SchedError::PromptTooLong {
                prompt: req.prompt.len(),
                max_model_len: self.max_model_len,
            }
            .into());
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (out, rx) = unbounded_channel();
        let n = req.n;
        self.tx
            .send(Command::Add { id, req, out })
            .map_err(|_| SubmitError::Closed)?;
        Ok(RequestStream {
            id,
            rx,
            tx: self.tx.clone(),
            remaining: n,
        })
    }

    pub fn abort(&self, id: RequestId) {
        let _ = self.tx.send(Command::Abort(id));
    }

    pub fn stats(&self) -> Option<EngineStats> {
        let (tx, rx) = mpsc::channel();
        self.tx.send(Command::Stats(tx)).ok()?;
        rx.recv().ok()
    }

    /// Aborts everything in flight and joins the engine thread.
    pub fn shutdown(&self) {
        let _ = self.tx.send(Command::Shutdown);
        let thread = self.thread.lock().map(|mut t| t.take()).unwrap_or(None);
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

struct SeqState {
    request: RequestId,
    index: usize,
    out: UnboundedSender<EngineOutput>,
    params: Arc<crate::SamplingParams>,
    max_tokens: usize,
    prompt_len: usize,
    rng: Rng,
    penalties: PenaltyState,
    arrival: Instant,
    first_scheduled: Option<Instant>,
    first_token: Option<Instant>,
    last_token: Option<Instant>,
    cached_tokens: Option<usize>,
    /// Guided decoding: where this sample stands in its grammar.
    guide: Option<GuideState>,
}

impl SeqState {
    fn metrics(&self) -> RequestMetrics {
        let now = Instant::now();
        let since = |t: Option<Instant>| t.map_or(Duration::ZERO, |t| t - self.arrival);
        let generated = self.penalties.generated;
        let decode = match (self.first_token, self.last_token) {
            (Some(a), Some(b)) if generated > 1 => (b - a) / (generated as u32 - 1),
            _ => Duration::ZERO,
        };
        RequestMetrics {
            prompt_tokens: self.prompt_len,
            cached_tokens: self.cached_tokens.unwrap_or(0),
            generated_tokens: generated,
            queue_time: since(self.first_scheduled),
            ttft: since(self.first_token),
            e2e: now - self.arrival,
            mean_itl: decode,
        }
    }
}

struct Core<B: Backend> {
    parts: EngineParts<B>,
    kv: B::KvCache,
    /// Batch sizes decode steps are padded to (the backend's graph sizes; empty on the CPU).
    decode_sizes: &'static [usize],
    sched: Scheduler,
    block_size: usize,
    /// max_model_len capped at the KV pool capacity.
    max_model_len: usize,
    seqs: HashMap<SeqId, SeqState>,
    stats: EngineStats,
    last_step: Instant,
    log: StatsLog,
    prefix_caching: bool,
    /// Samples 1..n of a request, held back until sample 0's prefill is cached so that they
    /// share its prompt blocks instead of each computing them in the same step.
    parked: HashMap<RequestId, Vec<NewSeq>>,
    trace: crate::step_trace::StepTrace,
    /// Whether greedy decode steps may be queued one ahead (`EngineConfig::run_ahead`).
    run_ahead: bool,
    /// The step queued ahead, whose results the next `step` reads.
    ahead: Option<Ahead<B>>,
}

/// vLLM's periodic stats line, every `STATS_EVERY` while busy.
struct StatsLog {
    at: Instant,
    prompt_tokens: u64,
    generation_tokens: u64,
}

const STATS_EVERY: Duration = Duration::from_secs(10);

fn seq_id(request: RequestId, index: usize) -> SeqId {
    request << 8 | index as u64
}

impl<B: Backend> Core<B> {
    fn run(mut self, rx: mpsc::Receiver<Command>) {
        loop {
            // Block for a command only when there is nothing to compute.
            let first = if self.sched.has_work() {
                rx.try_recv().ok()
            } else {
                match rx.recv() {
                    Ok(c) => Some(c),
                    Err(_) => break,
                }
            };
            let mut shutdown = false;
            for cmd in first
                .into_iter()
                .chain(std::iter::from_fn(|| rx.try_recv().ok()))
            {
                shutdown |= self.command(cmd);
            }
            if shutdown {
                break;
            }
            if self.sched.has_work() && !self.step() {
                // Work exists but nothing could be scheduled (waiting for memory).
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let ids: Vec<SeqId> = self.seqs.keys().copied().collect();
        for id in ids {
            self.finish_seq(id, FinishReason::Abort, None);
        }
        info!("engine: shut down");
    }

    /// Handles one command; true means shut down.
    fn command(&mut self, cmd: Command) -> bool {
        match cmd {
            Command::Add { id, req, out } => self.add(id, req, out),
            Command::Abort(id) => {
                self.parked.remove(&id);
                let ids: Vec<SeqId> = self
                    .seqs
                    .iter()
                    .filter(|(_, s)| s.request == id)
                    .map(|(k, _)| *k)
                    .collect();
                for sid in ids {
                    self.sched.abort(sid);
                    self.finish_seq(sid, FinishReason::Abort, None);
                }
            }
            Command::Stats(tx) => {
                let mut s = self.stats;
                s.sched = self.sched.stats();
                s.secs_since_step = if self.sched.has_work() {
                    self.last_step.elapsed().as_secs_f64()
                } else {
                    0.0
                };
                let _ = tx.send(s);
            }
            Command::Shutdown => return true,
        }
        false
    }

    fn add(&mut self, id: RequestId, req: ValidRequest, out: UnboundedSender<EngineOutput>) {
        let params = Arc::new(req.params);
        let arrival = Instant::now();
        // One mask cache per request: its samples walk the same grammar.
        let masks = SharedMaskCache::default();
        for index in 0..req.n {
            let sid = seq_id(id, index);
            let seq = NewSeq {
                id: sid,
                prompt: req.prompt.clone(),
                max_tokens: req.max_tokens,
                cache_salt: req.cache_salt.clone(),
            };
            let park = index > 0 && self.prefix_caching;
            let added = if park {
                self.parked.entry(id).or_default().push(seq);
                Ok(())
            } else {
                self.sched.add(seq)
            };
            if let Err(e) = added {
                // Validated at submit; the cache-size check can still refuse. End the sample.
                warn!(request = id, error = %e, "engine: request refused");
                let _ = out.send(EngineOutput {
                    index,
                    token: 0,
                    logprobs: None,
                    finish: Some(FinishReason::Abort),
                    metrics: None,
                });
                continue;
            }
            let seed = params.seed.map(|s| s.wrapping_add(index as u64));
            self.seqs.insert(
                sid,
                SeqState {
                    request: id,
                    index,
                    out: out.clone(),
                    params: params.clone(),
                    max_tokens: req.max_tokens,
                    prompt_len: req.prompt.len(),
                    rng: seed.map_or_else(Rng::from_entropy, Rng::new),
                    penalties: PenaltyState::new(&req.prompt),
                    arrival,
                    first_scheduled: None,
                    first_token: None,
                    last_token: None,
                    cached_tokens: None,
                    guide: req
                        .guide
                        .as_ref()
                        .map(|g| GuideState::new(g, masks.clone())),
                },
            );
        }
    }

    fn log_stats(&mut self) {
        let secs = self.log.at.elapsed().as_secs_f64();
        let s = self.sched.stats();
        let mut all = self.stats;
        all.sched = s;
        info!(
            "Engine 000: Avg prompt throughput: {:.1} tokens/s, Avg generation throughput: {:.1} \
             tokens/s, Running: {} reqs, Waiting: {} reqs, GPU KV cache usage: {:.1}%, Prefix \
             cache hit rate: {:.1}%",
            (self.stats.prompt_tokens - self.log.prompt_tokens) as f64 / secs,
            (self.stats.generation_tokens - self.log.generation_tokens) as f64 / secs,
            s.running,
            s.waiting,
            100.0 * all.kv_usage(),
            100.0 * all.prefix_hit_rate(),
        );
        self.log = StatsLog {
            at: Instant::now(),
            prompt_tokens: self.stats.prompt_tokens,
            generation_tokens: self.stats.generation_tokens,
        };
    }

    fn release_parked(&mut self, request: RequestId) {
        for seq in self.parked.remove(&request).unwrap_or_default() {
            let sid = seq.id;
            if let Err(e) = self.sched.add(seq) {
                warn!(request, error = %e, "engine: parallel sample refused");
                self.finish_seq(sid, FinishReason::Abort, None);
            }
        }
    }

    /// Ends a sample outside a step (abort, shutdown), telling its stream.
    fn finish_seq(&mut self, id: SeqId, reason: FinishReason, token: Option<u32>) {
        if let Some(st) = self.seqs.remove(&id) {
            let _ = st.out.send(EngineOutput {
                index: st.index,
                token: token.unwrap_or(0),
                logprobs: None,
                finish: Some(reason),
                metrics: Some(st.metrics()),
            });
            self.sched.abort(id);
        }
    }
}
