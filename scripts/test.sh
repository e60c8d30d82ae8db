#!/usr/bin/env bash
# Builds everything and runs every test: the README's second quick-start command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh       # toolchain pieces, peers, programs the tests run, pprof
bash scripts/install-dev-deps.sh   # redis for the server test (and clang/lint tools for CI)
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD"
ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)" "$@"
