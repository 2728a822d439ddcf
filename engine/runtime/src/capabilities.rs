//! What this engine build runs, against what a spec may ask for. The spec takes all of vLLM's
//! serve flags (so a vLLM command line ports over), but some name work this engine does not do
//! yet: several GPUs for one model, speculative decoding, config overrides. Serving such a spec
//! on one GPU without a word would leave a user believing, say, that tensor parallelism is on,
//! or run out of memory later; so each is refused here, before anything loads, naming the key,
//! its value and what is allowed. What a checkpoint holds is checked where it loads. Settings
//! the engine honours in its own way (the compute and KV cache dtypes) are not refused; they
//! are said in the startup log (`adjustments`).

use hearth_spec::{Dtype, EngineSpec, KvCacheDtype, Quantization};

use crate::RuntimeError;

/// Why this build cannot load weights as `q` asks, if it cannot.
pub fn quantization(q: Option<Quantization>) -> Option<String> {
    match q {
        None | Some(Quantization::Fp8) => None,
        Some(q) => Some(format!(
            "engine.quantization: {}: this build runs checkpoints as they are (unquantized \
             safetensors, GGUF blocks) or quantizes a dense model's linear layers to fp8 as it \
             loads (supported: none, fp8)",
            q.as_str()
        )),
    }
}

/// Every spec setting this build cannot honour, as one error listing them all.
pub fn check(e: &EngineSpec) -> Result<(), RuntimeError> {
    let mut issues = Vec::new();
    let mut one_gpu = |key: &str, n: u32| {
        if n > 1 {
            issues.push(format!(
                "engine.{key}: {n}: this engine build runs a model on one GPU (parallelism \
                 across GPUs is not built yet); allowed: 1"
            ));
        }
    };
    one_gpu("tensor_parallel_size", e.tensor_parallel_size);
    one_gpu("pipeline_parallel_size", e.pipeline_parallel_size);
    one_gpu(
        "decode_context_parallel_size",
        e.decode_context_parallel_size,
    );
    if e.enable_expert_parallel {
        issues.push(
            "engine.enable_expert_parallel: true: expert parallelism needs several GPUs, which \
             this engine build does not run a model on yet; allowed: false"
                .to_owned(),
        );
    }
    if let Some(s) = &e.speculative_config {
        issues.push(format!(
            "engine.speculative_config: {{method: {}, num_speculative_tokens: {}}}: speculative \
             decoding is not built yet; remove the key",
            s.method.as_str(),
            s.num_speculative_tokens
        ));
    }
    issues.extend(quantization(e.quantization));
    if !e.hf_overrides.is_empty() {
        let keys: Vec<&str> = e.hf_overrides.keys().map(String::as_str).collect();
        issues.push(format!(
            "engine.hf_overrides: {{{}}}: this engine build reads config.json as it is and \
             applies no overrides; remove the key",
            keys.join(", ")
        ));
    }
    if issues.is_empty() {
        Ok(())
    } else {
        Err(RuntimeError::Unsupported(issues.join("\n")))
    }
}

/// The spec settings this build runs otherwise than asked, one startup-log line each.
pub fn adjustments(e: &EngineSpec) -> Vec<String> {
    let mut lines = Vec::new();
    if matches!(e.dtype, Dtype::Float16 | Dtype::Float32) {
        lines.push(format!(
            "engine.dtype: {}: this engine computes in bfloat16 on a GPU and float32 on the CPU, \
             whatever the dtype; running so (auto or bfloat16 say it)",
            e.dtype.as_str()
        ));
    }
    if e.kv_cache_dtype == KvCacheDtype::Float16 {
        lines.push(
            "engine.kv_cache_dtype: float16: a GPU's KV cache is bfloat16 or fp8; storing it in \
             bfloat16 (auto or bfloat16 say it)"
                .to_owned(),
        );
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(yaml: &str) -> EngineSpec {
        let spec = format!("name: x\nmodel: /m/x.gguf\nengine: {yaml}\ndeploy: {{gpus: 8}}\n");
        let opts = hearth_spec::LoadOptions {
            env: Some(Default::default()),
            dotenv: hearth_spec::DotenvFile::Off,
        };
        hearth_spec::load_str(&spec, std::path::Path::new("x.yaml"), &opts)
            .expect("a valid spec")
            .engine
    }

    fn message(yaml: &str) -> String {
        match check(&engine(yaml)) {
            Err(RuntimeError::Unsupported(m)) => m,
            other => panic!("{yaml}: expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_one_gpu_spec_runs() {
        check(&engine(
            "{device: cuda, kv_cache_dtype: fp8, max_num_seqs: 64}",
        ))
        .expect("runs");
        check(&engine(
            "{tensor_parallel_size: 1, enable_expert_parallel: false}",
        ))
        .expect("runs");
    }

    #[test]
    fn parallel_settings_are_refused_by_key_value_and_allowed() {
        assert_eq!(
            message("{device: cuda, tensor_parallel_size: 4}"),
            "engine.tensor_parallel_size: 4: this engine build runs a model on one GPU \
             (parallelism across GPUs is not built yet); allowed: 1"
        );
        let m = message(
            "{device: cuda, tensor_parallel_size: 2, pipeline_parallel_size: 2, \
             decode_context_parallel_size: 2, enable_expert_parallel: true}",
        );
        let lines: Vec<&str> = m.lines().collect();
        assert_eq!(lines.len(), 4, "{m}");
        assert!(
            lines[1].starts_with("engine.pipeline_parallel_size: 2:"),
            "{m}"
        );
        assert!(
            lines[2].starts_with("engine.decode_context_parallel_size: 2:"),
            "{m}"
        );
        assert!(
            lines[3].starts_with("engine.enable_expert_parallel: true:"),
            "{m}"
        );
        assert!(lines[3].ends_with("allowed: false"), "{m}");
    }

    #[test]
    fn every_refusal_is_listed_at_once() {
        let m = message("{device: cuda, tensor_parallel_size: 4, quantization: modelopt_fp4}");
        let lines: Vec<&str> = m.lines().collect();
        assert_eq!(lines.len(), 2, "{m}");
        assert!(
            lines[0].starts_with("engine.tensor_parallel_size: 4:"),
            "{m}"
        );
        assert!(
            lines[1].starts_with("engine.quantization: modelopt_fp4:"),
            "{m}"
        );
        assert!(lines[1].ends_with("(supported: none, fp8)"), "{m}");
        check(&engine("{quantization: fp8}")).expect("fp8 runs");
    }

    #[test]
    fn dtypes_run_otherwise_are_said_not_refused() {
        let e = engine("{dtype: half, kv_cache_dtype: float16}");
        check(&e).expect("runs");
        let lines = adjustments(&e);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with("engine.dtype: float16: "), "{lines:?}");
        assert!(
            lines[1].starts_with("engine.kv_cache_dtype: float16: "),
            "{lines:?}"
        );
        assert!(adjustments(&engine("{dtype: bfloat16, kv_cache_dtype: fp8}")).is_empty());
        assert!(adjustments(&engine("{dtype: auto}")).is_empty());
    }

    #[test]
    fn speculative_decoding_and_overrides_are_refused() {
        let m = message("{speculative_config: {method: mtp, num_speculative_tokens: 2}}");
        assert_eq!(
            m,
            "engine.speculative_config: {method: mtp, num_speculative_tokens: 2}: speculative \
             decoding is not built yet; remove the key"
        );
        let m = message("{hf_overrides: {rope_scaling: {factor: 2}, max_position_embeddings: 8}}");
        assert!(
            m.starts_with("engine.hf_overrides: {rope_scaling, max_position_embeddings}:"),
            "{m}"
        );
    }
}
