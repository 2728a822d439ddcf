//! Block pool, KV cache manager, prefix cache, scheduler.
