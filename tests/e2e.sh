#!/usr/bin/env bash
# End-to-end checks of the release `hearth-engine` binary, as a user runs it. Prints
# "e2e: N passed, M failed" and exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
ENGINE=target/release/hearth-engine
PY="${HEARTH_E2E_PYTHON:-python3}"
PROMTOOL="${HEARTH_PROMTOOL:-${HEARTH_CACHE:-$HOME/.cache/hearth}/promtool/usr/bin/promtool}"
passed=0
failed=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

check() { # name, then a command that must succeed
    local name=$1
    shift
    if "$@" >"$TMP/out" 2>&1; then
        passed=$((passed + 1))
        echo "ok   $name"
    else
        failed=$((failed + 1))
        echo "FAIL $name"
        sed 's/^/     | /' "$TMP/out" | tail -20
    fi
}

every_spec_passes_check_spec() {
    local s
    for s in specs/*.yaml; do
        MODEL_DIR="$TMP/models" "$ENGINE" check-spec "$s" >/dev/null || { echo "$s failed"; return 1; }
    done
}

bad_spec_names_key_value_and_allowed() {
    printf 'name: x\nmodel: /nowhere.gguf\nengine:\n  kv_cache_dtype: fp9\n' >"$TMP/bad.yaml"
    if "$ENGINE" check-spec "$TMP/bad.yaml" >"$TMP/bad.out" 2>&1; then
        echo "check-spec accepted a bad spec"
        return 1
    fi
    cat "$TMP/bad.out"
    grep -q "engine.kv_cache_dtype" "$TMP/bad.out" && grep -q "fp9" "$TMP/bad.out" &&
        grep -q "fp8" "$TMP/bad.out"
}

default_spec_answers_paris() {
    "$ENGINE" generate --spec specs/default.yaml --prompt "What is the capital of France?" \
        --max-tokens 32 | tee "$TMP/paris.out"
    grep -q "Paris" "$TMP/paris.out"
}

unsupported_architecture_fails_fast() {
    mkdir -p "$TMP/mixtral"
    printf '{"architectures":["MixtralForCausalLM"],"hidden_size":8,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":1,"vocab_size":8}' >"$TMP/mixtral/config.json"
    : >"$TMP/mixtral/model.safetensors"
    local rc=0
    "$ENGINE" generate --model "$TMP/mixtral" --prompt hi >"$TMP/mixtral.out" 2>&1 || rc=$?
    cat "$TMP/mixtral.out"
    [ "$rc" -eq 1 ] && grep -q "MixtralForCausalLM" "$TMP/mixtral.out" &&
        grep -q "LlamaForCausalLM" "$TMP/mixtral.out" && ! grep -q "panicked" "$TMP/mixtral.out"
}

seed_specs_fail_fast_with_what_is_supported() {
    local s rc
    for s in specs/glm-4.7-nvfp4-tp4.yaml specs/deepseek-v4-flash-tp2.yaml; do
        rc=0
        MODEL_DIR="$TMP/models" timeout 20 "$ENGINE" generate --spec "$s" --prompt hi \
            >"$TMP/seed.out" 2>&1 || rc=$?
        cat "$TMP/seed.out"
        [ "$rc" -eq 1 ] && grep -q "engine.tensor_parallel_size" "$TMP/seed.out" &&
            grep -q "engine.quantization: modelopt_fp4" "$TMP/seed.out" &&
            grep -q "supported: none, fp8" "$TMP/seed.out" &&
            ! grep -q "panicked" "$TMP/seed.out" || return 1
    done
}

# A spec the engine could load but asks for several GPUs: refused before anything loads (it
# would otherwise run on one GPU as if tensor parallelism were on), key, value and allowed.
multi_gpu_spec_is_refused_not_ignored() {
    sed 's/^  device: cpu$/  device: auto\n  tensor_parallel_size: 2\n  speculative_config: {method: ngram, num_speculative_tokens: 3}/' \
        specs/default.yaml >"$TMP/tp2.yaml"
    grep -q "tensor_parallel_size: 2" "$TMP/tp2.yaml" || return 1
    local rc=0
    timeout 20 "$ENGINE" serve --spec "$TMP/tp2.yaml" >"$TMP/tp2.out" 2>&1 || rc=$?
    cat "$TMP/tp2.out"
    [ "$rc" -eq 1 ] &&
        grep -q "engine.tensor_parallel_size: 2: .*allowed: 1" "$TMP/tp2.out" &&
        grep -q "engine.speculative_config: {method: ngram" "$TMP/tp2.out" &&
        ! grep -q "resolved model source" "$TMP/tp2.out" && ! grep -q "panicked" "$TMP/tp2.out"
}

bench_reports_prefill_and_decode() {
    "$ENGINE" bench --spec specs/default.yaml -p 64 -n 16 -r 1 | tee "$TMP/bench.out"
    grep -q "pp64" "$TMP/bench.out" && grep -q "tg16" "$TMP/bench.out"
}

openai_sdk_against_serve() {
    local port=18437 pid rc=0
    API_KEY=e2e-key PORT=$port "$ENGINE" serve --spec specs/default.yaml >"$TMP/serve.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 120); do
        curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break
        sleep 0.5
    done
    "$PY" tests/e2e/openai_client.py "http://127.0.0.1:$port/v1" e2e-key smollm2-135m-instruct || rc=$?
    "$PY" tests/e2e/anthropic_client.py "http://127.0.0.1:$port" e2e-key smollm2-135m-instruct || rc=$?
    "$PY" tests/e2e/load_disconnect.py "http://127.0.0.1:$port" e2e-key smollm2-135m-instruct "${HEARTH_LOAD_N:-300}" || rc=$?
    # vLLM's metric names carry a colon, and its tokens-per-step histogram is named
    # vllm:iteration_tokens_total; promtool's linter flags both. Anything else fails.
    curl -sf "http://127.0.0.1:$port/metrics" >"$TMP/metrics.txt" || rc=1
    grep -q '^vllm:time_to_first_token_seconds_count{.*} [1-9]' "$TMP/metrics.txt" || { echo "no TTFT observed"; rc=1; }
    "$PROMTOOL" check metrics <"$TMP/metrics.txt" 2>&1 | grep -v "metric names should not contain ':'" |
        grep -v '^vllm:iteration_tokens_total non-counter metrics should not have "_total" suffix$' \
            >"$TMP/promtool.out" || true
    if [ -s "$TMP/promtool.out" ]; then echo "promtool:"; cat "$TMP/promtool.out"; rc=1; else echo "promtool: exposition ok"; fi
    kill -TERM "$pid"
    wait "$pid" || true
    grep -q "e2e-key" "$TMP/serve.log" && { echo "the API key reached the log"; rc=1; }
    tail -3 "$TMP/serve.log"
    return $rc
}

guided_decoding_with_the_sdks() {
    local port=18438 pid rc=0
    # The default spec with the hermes tool-call format, so tool_choice required / named work.
    sed 's/^  max_num_seqs: 8$/  max_num_seqs: 8\n  tool_call_parser: hermes/' specs/default.yaml >"$TMP/guided.yaml"
    grep -q "tool_call_parser: hermes" "$TMP/guided.yaml" || { echo "could not write the spec"; return 1; }
    PORT=$port "$ENGINE" serve --spec "$TMP/guided.yaml" >"$TMP/guided.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 120); do
        curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break
        sleep 0.5
    done
    "$PY" tests/e2e/guided_client.py "http://127.0.0.1:$port" smollm2-135m-instruct || rc=$?
    kill -TERM "$pid"
    wait "$pid" || true
    grep "guided decoding" "$TMP/guided.log" | tail -1
    return $rc
}

hf_sources_are_downloaded_with_the_hub_client() {
    local port=18439 hub rc=0 hf
    hf="$(dirname "$PY")/hf"
    [ -x "$hf" ] || { echo "no hf client at $hf (tests/fetch_fixtures.sh installs it)"; return 1; }
    # The tiny Qwen3 fixture with a three-word tokenizer, plus a PyTorch file that must be skipped.
    mkdir -p "$TMP/hubrepo"
    cp tests/fixtures/tiny/qwen3/config.json tests/fixtures/tiny/qwen3/model.safetensors "$TMP/hubrepo/"
    echo '{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
      "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
      "decoder": null, "model": {"type": "WordLevel", "unk_token": "<unk>",
      "vocab": {"<unk>": 0, "hello": 1, "world": 2}}}' >"$TMP/hubrepo/tokenizer.json"
    echo "not loaded" >"$TMP/hubrepo/pytorch_model.bin"
    "$PY" tests/e2e/fake_hub.py $port acme/tiny-qwen3 "$TMP/hubrepo" 2>"$TMP/hub.log" &
    hub=$!
    for _ in $(seq 1 50); do curl -s "http://127.0.0.1:$port/" >/dev/null && break; sleep 0.1; done
    PATH="$(dirname "$hf"):$PATH" HF_ENDPOINT="http://127.0.0.1:$port" HF_HUB_CACHE="$TMP/hf" \
        HF_HUB_DISABLE_TELEMETRY=1 "$ENGINE" generate --model hf:acme/tiny-qwen3 \
        --prompt "hello world" --max-tokens 4 || rc=1
    kill "$hub"
    wait "$hub" 2>/dev/null
    ls "$TMP"/hf/models--acme--tiny-qwen3/snapshots/*/model.safetensors || rc=1
    if ls "$TMP"/hf/models--acme--tiny-qwen3/snapshots/*/pytorch_model.bin 2>/dev/null; then
        echo "a PyTorch checkpoint was downloaded"
        rc=1
    fi
    # Cached now: no hub needed (the endpoint is unreachable and no client is on PATH).
    PATH=/usr/bin:/bin HF_ENDPOINT="http://127.0.0.1:1" HF_HUB_CACHE="$TMP/hf" "$ENGINE" generate \
        --model hf:acme/tiny-qwen3 --prompt "hello" --max-tokens 2 || rc=1
    return $rc
}

check "every spec in specs/ passes check-spec" every_spec_passes_check_spec
check "a bad spec names the key, the value and the allowed values" bad_spec_names_key_value_and_allowed
check "default spec: 'What is the capital of France?' -> Paris" default_spec_answers_paris
check "an unsupported architecture fails at once, listing the supported ones" unsupported_architecture_fails_fast
check "seed specs we cannot run yet fail at once, saying what is supported" seed_specs_fail_fast_with_what_is_supported
check "a spec asking for several GPUs is refused, not run on one" multi_gpu_spec_is_refused_not_ignored
check "bench reports pp and tg" bench_reports_prefill_and_decode
check "the official OpenAI and Anthropic SDKs against hearth-engine serve; load with disconnects; promtool on /metrics" openai_sdk_against_serve
check "guided decoding through the SDKs: json_schema validates, forced tool calls parse" guided_decoding_with_the_sdks
check "hf: sources are downloaded into the Hugging Face cache by the hub's own client (fake hub), then run from the cache" hf_sources_are_downloaded_with_the_hub_client

echo "e2e: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
