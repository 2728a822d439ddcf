//! hearth-text: everything between text on the wire and token ids.
//!
//! - [`Tokenizer`]: Hugging Face tokenizer.json or GGUF vocabulary ([`GgufVocab`]) -> ids and back.
//! - [`ChatTemplate`]: Hugging Face chat templates on minijinja, rendering like transformers.
//! - [`Detokenizer`]: token ids one at a time -> UTF-8-safe text deltas.
//! - [`StopChecker`]: stop strings across delta boundaries, stop token ids.
//! - [`guided`]: grammar-constrained decoding (JSON schema, JSON mode, forced tool calls).
//!
//! Tool-call and reasoning parsers build on these; the server wires them per request.

mod chat_template;
mod detokenizer;
mod error;
mod gguf_pre;
mod gguf_vocab;
pub mod guided;
mod hf_config;
pub mod parsers;
mod pieces;
mod pyfmt;
mod stop;
mod strftime;
mod tokenizer;

pub use chat_template::{ChatRequest, ChatTemplate};
pub use detokenizer::Detokenizer;
pub use error::TextError;
pub use gguf_vocab::{GgufTokenType, GgufVocab};
pub use stop::{StopChecker, StopOutput, StopReason};
pub use tokenizer::{EncodeOptions, Tokenizer};

#[cfg(test)]
mod tests {
    /// The server shares these across request tasks.
    #[test]
    fn shared_types_are_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<crate::Tokenizer>();
        send_sync::<crate::ChatTemplate>();
        send_sync::<crate::StopChecker>();
        send_sync::<crate::Detokenizer<'static>>();
    }
}
