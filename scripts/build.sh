#!/usr/bin/env bash
# Configures and builds vispco (Release) into build/. Extra arguments go to CMake's configure step, e.g.
#   bash scripts/build.sh -DCMAKE_PREFIX_PATH=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
# to build against a pip PyTorch's LibTorch (CUDA) instead of Debian's. TARGETS (space-separated) builds only
# those, e.g. TARGETS=vispco for the CLI alone (the main job does not compile the test suite); default: all.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
targets=()
for t in ${TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" --parallel "$(nproc)" "${targets[@]}"
