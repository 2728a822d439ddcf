//! `ForwardBatch`: the plain data a model runner hands a model for one step. It lives in
//! hearth-backend, whose `begin_step` stages it for the device; re-exported here for callers.

pub use hearth_backend::ForwardBatch;
