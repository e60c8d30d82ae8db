#!/bin/bash
# Throwaway behind bench/README "A fix: churn on a loaded machine": integration.churn_test's
# large-block case RUNS times beside six busy loops; prints how often each 4 MiB figure came
# out (0.512 = the block released once and faulted back in). Run from the repository root
# with build/ built: bench/results/churn-under-load-2026-12-06.sh [RUNS=60]
set -u
runs=${1:-60}
pids=()
for _ in 1 2 3 4 5 6; do (while :; do :; done) & pids+=($!); done
for _ in $(seq 1 "$runs"); do build/tests/integration/churn_test --gtest_filter='*WarmUp' 2>&1 | grep "4096 KiB"; done | sort | uniq -c
kill "${pids[@]}"
