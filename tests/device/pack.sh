#!/usr/bin/env bash
# Packs what tests/device/run.sh needs on the GPU machine into devbin/ (ignored; carried by the
# device tool): the release binaries (built here with `cargo build --release --workspace
# --all-targets --all-features`), stripped and xz-compressed, and the real Qwen3 tokenizer.
# Usage: [AB_CUBINS="name=kernels.cubin ..."] [OLD_ENGINE=path] tests/device/pack.sh [TEST_BINARY...]
# The device tool carries at most 64 MiB: see run.sh for the SmolLM2 GGUF, which travels apart.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf devbin && mkdir -p devbin/qwen3-tokenizer
pack() { strip -o "devbin/$1" "$2" && xz -T2 -6 -f "devbin/$1"; }
pack hearth-engine target/release/hearth-engine
pack hearth target/release/hearth
# run.sh serveenv's HEARTH_BIN=old: another build of the engine to compare against.
[ -n "${OLD_ENGINE:-}" ] && pack hearth-engine-old "$OLD_ENGINE"
# Test binaries: the ones named (e.g. `pack.sh cuda_moe_mla hf_reference` for run.sh's moe stage),
# by default two of the ops stage's (cuda_linear hf_reference in a second call): each carries the
# kernels' fatbin, so all of them exceed the carry.
for t in ${@:-cuda_ops cuda_attention}; do
    pack "$t" "$(ls -t target/release/deps/$t-* | grep -v '\.d$' | head -1)"
done
# run.sh's ab stage: kernel builds to compare (nvcc -cubin of versions of engine/kernels/cu),
# AB_CUBINS="name=path ...", packed as devbin/kernels-NAME.cubin.xz.
for nv in ${AB_CUBINS:-}; do xz -T2 -c "${nv#*=}" > "devbin/kernels-${nv%%=*}.cubin.xz"; done
TOK=${QWEN3_TOKENIZER:-../shared/tokenizers/qwen3}
cp "$TOK/tokenizer_config.json" devbin/qwen3-tokenizer/
xz -T2 -c "$TOK/tokenizer.json" > devbin/qwen3-tokenizer/tokenizer.json.xz
du -sh devbin/*
