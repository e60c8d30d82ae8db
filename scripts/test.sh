#!/usr/bin/env bash
# Builds everything and runs every test: the README's second quick-start command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh       # toolchain pieces, peers, programs the tests run, pprof
bash scripts/install-dev-deps.sh   # redis for the server test (and clang/lint tools for CI)
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD"
# Both front ends: per-CPU caches (the default where rseq works) and the per-thread caches
# that run everywhere else (old kernels, valgrind, glibc.pthread.rseq=0).
echo "== tests with per-CPU caches (default)"
ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)" "$@"
echo "== tests with per-thread caches (TCMALLOC_PER_CPU_CACHES=0)"
TCMALLOC_PER_CPU_CACHES=0 ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)" "$@"
