#!/usr/bin/env bash
# The long soak: tests/soak/soak_stress for a fixed time (default 10 minutes), then the fork and
# thread storms at five times their CTest size. Prints operations, verification failures and
# RSS; exits non-zero on any failure. (The bounded versions run in CTest: ctest -L soak.)
#
#   scripts/soak.sh [--duration SECONDS] [--threads N] [--no-storms]
#   BUILD=dir     build directory (default build-soak; Release)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-soak}
JOBS=${JOBS:-$(nproc)}
duration=600
threads=4
storms=1
while (($#)); do
  case $1 in
    --duration) duration=$2; shift ;;
    --threads) threads=$2; shift ;;
    --no-storms) storms=0 ;;
    *) echo "usage: $0 [--duration SECONDS] [--threads N] [--no-storms]" >&2; exit 2 ;;
  esac
  shift
done

mkdir -p "$BUILD"
log=$BUILD/soak-build.log
if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTCMALLOC_BUILD_BENCH=OFF &&
       cmake --build "$BUILD" -j "$JOBS" --target soak_stress fork_storm thread_storm; } >"$log" 2>&1; then
  tail -30 "$log" >&2
  echo "soak: build failed (log: $log)" >&2
  exit 1
fi
bin=$BUILD/tests/soak

# One epoch (fresh threads, leftovers handed on) every 30 s or so, at least 4.
epochs=$((duration / 30))
((epochs >= 4)) || epochs=4
status=0
echo "soak: stress for ${duration}s on $threads threads ($epochs epochs)"
"$bin/soak_stress" --seconds "$duration" --threads "$threads" --epochs "$epochs" || status=1

if ((storms)); then
  echo "soak: fork storm, 10000 forks"
  "$bin/fork_storm" --forks 10000 --workers 2 --in-flight 4 || status=1
  echo "soak: thread storm, 500000 threads"
  "$bin/thread_storm" --threads 500000 --batch 100 || status=1
fi
if ((status)); then echo "soak: FAILED" >&2; else echo "soak: all passed"; fi
exit $status
