//! What `chat`, `bench` and `eval` share to talk to any OpenAI-compatible server (Hearth's
//! engine, vLLM, llama.cpp): which server and key to use, requests whose failures say what
//! to do, SSE streams with per-token timing, and the server's extras (`/tokenize`,
//! `/metrics`, `max_model_len`) with fallbacks where a server lacks them.
//!
//! It knows nothing about printing answers, load patterns or grading; those are the tools'.

pub mod http;
pub mod rng;
pub mod server;
pub mod sse;
pub mod stream;
pub mod target;
pub mod timing;

pub use target::{ServerArgs, Target};

/// `ROOT/MODEL` with the model name made safe for a path: where a tool writes its results
/// unless told otherwise.
pub fn results_dir(root: &str, model: &str) -> std::path::PathBuf {
    let name: String = model
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    std::path::Path::new(root).join(name)
}
