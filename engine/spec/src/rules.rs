//! Combinations of keys that cannot work together (the checks of single keys are in
//! validate.rs). Each rule names the key to change, both values and why. A rule whose inputs
//! already had an issue is skipped, so one mistake is reported once.

use crate::choices::{Device, ToolCallParser};
use crate::error::Issues;
use crate::resolved::ResolvedSpec;

const TP: &str = "engine.tensor_parallel_size";
const PP: &str = "engine.pipeline_parallel_size";
const DCP: &str = "engine.decode_context_parallel_size";
const DEVICE: &str = "engine.device";

pub(crate) fn check(spec: &ResolvedSpec, issues: &mut Issues) {
    let e = &spec.engine;
    let bad = |issues: &Issues, keys: &[&str]| keys.iter().any(|k| issues.has(k));
    let (tp, pp, dcp) = (
        e.tensor_parallel_size,
        e.pipeline_parallel_size,
        e.decode_context_parallel_size,
    );

    if !bad(issues, &[TP]) && !tp.is_power_of_two() {
        issues.push(
            TP,
            format!("{tp} is not a power of two; allowed: 1, 2, 4, 8, ..."),
        );
    }
    if !bad(issues, &[TP, DCP]) && (dcp > tp || tp % dcp != 0) {
        issues.push(
            DCP,
            format!(
                "{dcp} must divide tensor_parallel_size ({tp}): decode context parallel shards \
                 the KV cache across the ranks of one tensor-parallel group"
            ),
        );
    }

    if e.device == Device::Cpu && !bad(issues, &[DEVICE]) {
        for (key, n) in [(TP, tp), (PP, pp), (DCP, dcp)] {
            if n > 1 && !bad(issues, &[key]) {
                issues.push(key, format!("{n} needs GPUs; with device cpu it must be 1"));
            }
        }
        let kv = "engine.kv_cache_dtype";
        if e.kv_cache_dtype.is_fp8() && !bad(issues, &[kv]) {
            issues.push(
                kv,
                format!(
                    "\"{}\" is not available with device cpu (the CPU backend has no fp8 KV \
                     cache); use auto, bfloat16 or float16",
                    e.kv_cache_dtype
                ),
            );
        }
    }

    let auto = "engine.enable_auto_tool_choice";
    if e.enable_auto_tool_choice && e.tool_call_parser.is_none() && !bad(issues, &[auto]) {
        issues.push(
            auto,
            format!(
                "true needs engine.tool_call_parser to be set (one of {})",
                ToolCallParser::ACCEPTED.join(", ")
            ),
        );
    }

    let batched = "engine.max_num_batched_tokens";
    let seqs = "engine.max_num_seqs";
    let len = "engine.max_model_len";
    if let Some(b) = e.max_num_batched_tokens {
        if b < e.max_num_seqs && !bad(issues, &[batched, seqs]) {
            issues.push(
                batched,
                format!(
                    "{b} is less than max_num_seqs ({}); every running sequence needs at least \
                     one token per step",
                    e.max_num_seqs
                ),
            );
        }
        if let Some(l) = e.max_model_len {
            if !e.enable_chunked_prefill && b < l && !bad(issues, &[batched, len]) {
                issues.push(
                    batched,
                    format!(
                        "{b} is less than max_model_len ({l}) while enable_chunked_prefill is \
                         false, so a long prompt could never be scheduled; raise it or enable \
                         chunked prefill"
                    ),
                );
            }
        }
    }

    // With device auto and no GPUs the engine runs on the CPU, which is not a mistake.
    let gpus_key = "deploy.gpus";
    if e.device != Device::Cpu && !bad(issues, &[gpus_key, TP, PP, DEVICE]) {
        if let Some(n) = spec.deploy.gpus.count() {
            let need = e.world_size();
            let cpu_fallback = e.device == Device::Auto && n == 0;
            if !cpu_fallback && n < usize::try_from(need).unwrap_or(usize::MAX) {
                issues.push(
                    gpus_key,
                    format!(
                        "{n} GPU(s) is fewer than tensor_parallel_size x pipeline_parallel_size \
                         = {tp} x {pp} = {need}"
                    ),
                );
            }
        }
    }

    let pattern = "engine.hf_overrides.index_topk_pattern";
    if let Some(p) = e.hf_overrides.get("index_topk_pattern") {
        let ok = p
            .as_str()
            .is_some_and(|s| !s.is_empty() && s.chars().all(|c| c == 'F' || c == 'S'));
        if !ok {
            issues.push(
                pattern,
                format!("{p} is not a per-layer pattern of the letters F and S (one per layer)"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::tests::{issues, load_yaml, MINIMAL};

    fn with(extra: &str) -> String {
        format!("{MINIMAL}{extra}")
    }

    #[test]
    fn tensor_parallel_is_a_power_of_two() {
        assert_eq!(
            issues(&with("engine: {tensor_parallel_size: 3}")),
            ["engine.tensor_parallel_size: 3 is not a power of two; allowed: 1, 2, 4, 8, ..."]
        );
        assert!(load_yaml(&with("engine: {tensor_parallel_size: 8}"), &[]).is_ok());
    }

    #[test]
    fn dcp_divides_tp() {
        let got = issues(&with(
            "engine: {tensor_parallel_size: 2, decode_context_parallel_size: 4}",
        ));
        assert_eq!(got.len(), 1);
        assert!(got[0].starts_with(
            "engine.decode_context_parallel_size: 4 must divide tensor_parallel_size (2)"
        ));
        let got = issues(&with(
            "engine: {tensor_parallel_size: 4, decode_context_parallel_size: 3}",
        ));
        assert!(got[0].starts_with("engine.decode_context_parallel_size: 3 must divide"));
        assert!(load_yaml(
            &with("engine: {tensor_parallel_size: 4, decode_context_parallel_size: 2}"),
            &[]
        )
        .is_ok());
    }

    #[test]
    fn a_bad_input_is_reported_once() {
        // tp is not a number: no follow-up complaint about dcp not dividing it.
        let got = issues(&with(
            "engine: {tensor_parallel_size: x, decode_context_parallel_size: 4}",
        ));
        assert_eq!(
            got,
            ["engine.tensor_parallel_size: \"x\" is not a whole number"]
        );
    }

    #[test]
    fn auto_tool_choice_needs_a_parser() {
        let got = issues(&with("engine: {enable_auto_tool_choice: true}"));
        assert_eq!(got.len(), 1);
        assert!(got[0].starts_with(
            "engine.enable_auto_tool_choice: true needs engine.tool_call_parser to be set (one of glm47, glm45, hermes,"
        ));
        assert!(load_yaml(
            &with("engine: {enable_auto_tool_choice: true, tool_call_parser: glm47}"),
            &[]
        )
        .is_ok());
    }

    #[test]
    fn batched_tokens_cover_the_batch() {
        let got = issues(&with(
            "engine: {max_num_seqs: 64, max_num_batched_tokens: 32}",
        ));
        assert_eq!(got.len(), 1);
        assert!(
            got[0].starts_with("engine.max_num_batched_tokens: 32 is less than max_num_seqs (64)")
        );
        // The default max_num_seqs (256) counts too.
        assert_eq!(
            issues(&with("engine: {max_num_batched_tokens: 128}")).len(),
            1
        );
        let got = issues(&with(
            "engine: {max_num_seqs: 4, max_num_batched_tokens: 2048, max_model_len: 8192, \
             enable_chunked_prefill: false}",
        ));
        assert!(got[0].starts_with(
            "engine.max_num_batched_tokens: 2048 is less than max_model_len (8192) while \
             enable_chunked_prefill is false"
        ));
    }

    #[test]
    fn cpu_has_no_fp8_kv_and_no_parallelism() {
        let got = issues(&with("engine: {device: cpu, kv_cache_dtype: fp8_e4m3}"));
        assert_eq!(
            got,
            [
                "engine.kv_cache_dtype: \"fp8_e4m3\" is not available with device cpu (the CPU \
              backend has no fp8 KV cache); use auto, bfloat16 or float16"
            ]
        );
        let got = issues(&with("engine: {device: cpu, tensor_parallel_size: 2}"));
        assert_eq!(
            got,
            ["engine.tensor_parallel_size: 2 needs GPUs; with device cpu it must be 1"]
        );
        assert!(load_yaml(&with("engine: {device: cuda, kv_cache_dtype: fp8}"), &[]).is_ok());
    }

    #[test]
    fn gpus_cover_tp_times_pp() {
        let got = issues(&with(
            "engine: {tensor_parallel_size: 4, pipeline_parallel_size: 2}\ndeploy: {gpus: 4}",
        ));
        assert_eq!(
            got,
            ["deploy.gpus: 4 GPU(s) is fewer than tensor_parallel_size x pipeline_parallel_size = 4 x 2 = 8"]
        );
        let got = issues(&with(
            "engine: {tensor_parallel_size: 2}\ndeploy: {gpus: [0]}",
        ));
        assert!(
            got[0].starts_with("deploy.gpus: 1 GPU(s) is fewer"),
            "{got:?}"
        );
        assert!(load_yaml(
            &with("engine: {tensor_parallel_size: 2}\ndeploy: {gpus: all}"),
            &[]
        )
        .is_ok());
        assert!(load_yaml(
            &with("engine: {tensor_parallel_size: 2}\ndeploy: {gpus: '0,1'}"),
            &[]
        )
        .is_ok());
        // CPU deployments need no GPUs; device auto with none falls back to the CPU.
        assert!(load_yaml(&with("engine: {device: cpu}\ndeploy: {gpus: 0}"), &[]).is_ok());
        assert!(load_yaml(&with("deploy: {gpus: 0}"), &[]).is_ok());
        assert_eq!(
            issues(&with("engine: {device: cuda}\ndeploy: {gpus: none}")).len(),
            1
        );
    }

    #[test]
    fn index_topk_pattern_is_letters_f_and_s() {
        let got = issues(&with("engine: {hf_overrides: {index_topk_pattern: FFX}}"));
        assert_eq!(
            got,
            ["engine.hf_overrides.index_topk_pattern: \"FFX\" is not a per-layer pattern of the \
              letters F and S (one per layer)"]
        );
    }
}
