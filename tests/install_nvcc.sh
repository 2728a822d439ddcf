#!/usr/bin/env bash
# Installs nvcc from PyPI (no CUDA toolkit or GPU needed) into $HEARTH_CACHE/venv-nvcc, so the
# `cuda` feature's kernels compile on every test run, and prints the nvcc path. The packages are
# pinned to one CUDA release: a newer nvvm/crt with an older ptxas fails with "Unsupported
# .version".
set -euo pipefail
CACHE="${HEARTH_CACHE:-$HOME/.cache/hearth}"
VENV="$CACHE/venv-nvcc"
PKGS=(nvidia-cuda-nvcc==13.0.88 nvidia-cuda-cccl==13.0.85 nvidia-nvvm==13.0.88
      nvidia-cuda-crt==13.0.88 nvidia-cuda-runtime==13.0.96)
STAMP="$VENV/.hearth-pkgs"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "${PKGS[*]}" ]; then
    echo "installing nvcc from PyPI into $VENV" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "${PKGS[@]}" >&2
    echo "${PKGS[*]}" > "$STAMP"
fi
NVCC=$(ls "$VENV"/lib/python3*/site-packages/nvidia/cu13/bin/nvcc)
"$NVCC" --version | tail -1 >&2
echo "$NVCC"
