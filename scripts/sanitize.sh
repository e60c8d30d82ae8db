#!/usr/bin/env bash
# Builds the unit tests of the internal components (tests/unit: they link tcmalloc_core and
# keep glibc's malloc, so a sanitizer's own malloc can sit beside our allocator), and the
# multithreaded soak program on tcmalloc_core's internal entry points (tests/soak,
# soak_stress_core: thread caches, central lists, transfer caches and the page heap under
# cross-thread traffic, which is where TSan earns its keep), under
#   asan  -fsanitize=address,undefined   (g++)
#   tsan  -fsanitize=thread              (g++)
# each in its own build directory, and runs them with `ctest -L '^(unit|sanitize)$'`. Every sanitizer
# report is fatal (-fno-sanitize-recover=all, halt_on_error=1), so a non-zero exit means a
# finding or a failed test.
#
#   scripts/sanitize.sh [asan] [tsan]      default: both
#   BUILD_ROOT=dir                         where the build directories go (default build-san)
#   SOAK_OPS=N                             operations of the longer core soak run after ctest
#                                          (default 2000000; 0 skips it)
#
# The tests that link tcmalloc_minimal (api/, integration/, ...) are not built: they replace
# malloc, and so do ASan and TSan; two allocators in one process cannot both be the malloc.
# The allocator under those is covered by the fuzzers and the soak tests instead (docs/trust.md).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_ROOT=${BUILD_ROOT:-build-san}
JOBS=${JOBS:-$(nproc)}
SOAK_OPS=${SOAK_OPS:-2000000}

modes=("$@")
((${#modes[@]})) || modes=(asan tsan)

# The unit tests leak on purpose: the private heaps of tests/unit/test_heap.h take pagemap
# nodes from calloc and never give them back (the allocator never frees pagemap nodes, so a
# reader racing a writer never sees a freed node). LeakSanitizer would report every one, so
# leak detection is off; use-after-free, overflows, UB and races stay fatal.
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}"

# Unit-test targets, as tests/unit/CMakeLists.txt declares them: tcm_unit_test(NAME), and the
# core soak program (label `sanitize` in tests/soak/CMakeLists.txt).
mapfile -t targets < <(grep -o 'tcm_unit_test([A-Za-z0-9_]*)' tests/unit/CMakeLists.txt |
                       sed 's/.*(\(.*\))/\1/')
((${#targets[@]})) || { echo "sanitize: no unit tests found in tests/unit/CMakeLists.txt" >&2; exit 1; }
# The batch check's cost program, which CTest runs briefly with the unit label.
targets+=(batch_check_cost)
labels='^unit$'
if [ -f tests/soak/CMakeLists.txt ]; then
  targets+=(soak_stress_core)
  labels='^(unit|sanitize)$'
fi

run_mode() {
  local mode=$1 flags
  case $mode in
    asan) flags="-fsanitize=address,undefined -fno-sanitize-recover=all" ;;
    tsan) flags="-fsanitize=thread" ;;
    *) echo "sanitize: unknown mode '$mode' (asan or tsan)" >&2; return 2 ;;
  esac
  flags="$flags -fno-omit-frame-pointer -g"
  local dir=$BUILD_ROOT/$mode log=$BUILD_ROOT/$mode.build.log
  mkdir -p "$BUILD_ROOT"
  echo "sanitize[$mode]: building ${#targets[@]} test programs in $dir"
  if ! { cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
           -DTCMALLOC_BUILD_BENCH=OFF \
           -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
           -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" &&
         cmake --build "$dir" -j "$JOBS" --target "${targets[@]}"; } >"$log" 2>&1; then
    tail -30 "$log" >&2
    echo "sanitize[$mode]: build failed (log: $log)" >&2
    return 1
  fi
  echo "sanitize[$mode]: running"
  if ! ctest --test-dir "$dir" -L "$labels" --output-on-failure -j "$JOBS" --timeout 600; then
    echo "sanitize[$mode]: FAILED" >&2
    return 1
  fi
  # A longer multithreaded run than the ctest one: budget stealing between thread caches and
  # the transfer caches only get busy after a while.
  local soak=$dir/tests/soak/soak_stress_core
  if [ -x "$soak" ] && ((SOAK_OPS > 0)); then
    echo "sanitize[$mode]: core soak, $SOAK_OPS operations on 4 threads"
    if ! "$soak" --ops "$SOAK_OPS" --threads 4 --epochs 4 --max-size 262144 >"$dir/soak.log" 2>&1; then
      grep -E 'SUMMARY|WARNING|ERROR|VERIFY' "$dir/soak.log" | head -10 >&2
      echo "sanitize[$mode]: FAILED in the core soak (log: $dir/soak.log)" >&2
      return 1
    fi
    grep -E '^soak: [0-9]+ ops' "$dir/soak.log" || true
  fi
  echo "sanitize[$mode]: clean"
}

status=0
for m in "${modes[@]}"; do run_mode "$m" || status=1; done
exit $status
