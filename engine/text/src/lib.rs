//! Tokenizers, chat templates, detokenizer, stop strings, parsers.
