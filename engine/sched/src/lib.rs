//! Block pool, KV cache manager, prefix cache and continuous-batching scheduler.
//!
//! Plain data in ([`NewSeq`], sampled tokens), plain data out ([`SchedulerOutput`]): no model,
//! no backend, no async. The design follows vLLM v1 (see DESIGN.md, "Engine contracts"):
//! - `block_pool.rs`: ref-counted blocks, LRU free queue, hash -> block map;
//! - `kv_cache.rs`: per-sequence block tables, allocation, prefix lookup and registration;
//! - `scheduler.rs`: budgets, FIFO admission, chunked prefill, preemption by recompute;
//! - `request.rs`, `output.rs`, `error.rs`: the data that crosses the boundary;
//! - `hash.rs`: the stable chained block hash.

mod block_pool;
mod error;
mod hash;
mod kv_cache;
mod output;
mod request;
mod scheduler;

pub use block_pool::{BlockId, BlockPool};
pub use error::SchedError;
pub use hash::{block_hash, extra_key, BlockHash};
pub use kv_cache::{KvCacheManager, PrefixHit};
pub use output::{SchedStats, ScheduledSeq, SchedulerOutput};
pub use request::{NewSeq, SeqId, SeqStatus, Sequence};
pub use scheduler::{Scheduler, SchedulerConfig};
