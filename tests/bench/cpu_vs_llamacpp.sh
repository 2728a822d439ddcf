#!/usr/bin/env bash
# Benchmarks the CPU backend against llama.cpp on the same GGUF, on this machine, in one run:
# llama-bench (llama.cpp from the llama-cpp-python 0.3.36 sdist, native build, ~8 min the first
# time) and `hearth-engine bench`, both pp128 / pp512 / tg64 with the same thread count.
# Not part of the test command: it is a benchmark, not a test.
#   tests/bench/cpu_vs_llamacpp.sh [THREADS]
set -euo pipefail
cd "$(dirname "$0")/../.."
THREADS="${1:-$(nproc)}"
CACHE="${HEARTH_CACHE:-$HOME/.cache/hearth}"
SRC="$CACHE/dl/lcp-full/llama_cpp_python-0.3.36/vendor/llama.cpp"
if [ ! -x "$SRC/build/bin/llama-bench" ]; then
    tests/fetch_fixtures.sh >/dev/null
    mkdir -p "$CACHE/dl/lcp-full"
    tar xzf "$CACHE/dl/llama_cpp_python-0.3.36.tar.gz" -C "$CACHE/dl/lcp-full"
    command -v cmake >/dev/null || python3 -m pip install --quiet cmake
    cmake -S "$SRC" -B "$SRC/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DGGML_NATIVE=ON \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
    cmake --build "$SRC/build" -j "$(nproc)" --target llama-bench
fi
cargo build --release -p hearth-server >/dev/null 2>&1
# The default spec's model, fetched through its pip: source if needed.
MODEL=$(target/release/hearth-engine check-spec specs/default.yaml 2>/dev/null | sed -n 's/^model: *//p')
GGUF=$(HEARTH_LOG=info target/release/hearth-engine bench --spec specs/default.yaml -p 1 -n 1 -r 1 2>&1 |
    sed -n 's/.*resolved model source.*path=\([^ ]*\).*/\1/p' | head -1)
echo "model: $MODEL -> $GGUF"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; threads: $THREADS; $(date -u +%F)"
echo "--- llama.cpp"
"$SRC/build/bin/llama-bench" -m "$GGUF" -t "$THREADS" -p 128,512 -n 64 -r 3 2>/dev/null | grep -E '^\|'
echo "--- hearth"
target/release/hearth-engine bench --spec specs/default.yaml -t "$THREADS" -p 128,512 -n 64 -r 3 2>/dev/null
