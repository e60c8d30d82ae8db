#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with clang-14 and runs each for a while.
#
#   page_heap    PageHeap + pagemap against a model of live spans   -fsanitize=fuzzer,address,undefined
#   size_class   size-class map and nallocx rounding vs the allocator -fsanitize=fuzzer,address,undefined
#   api          the whole malloc/new API, our allocator as the        -fsanitize=fuzzer,undefined
#                process's malloc (static libtcmalloc_minimal.a)       (no ASan: it would replace malloc)
#   misuse       random misuse (interior/double/foreign frees, writes   -fsanitize=fuzzer,undefined
#                after free) in forked children: clean or diagnosed,   (same build as api)
#                never a silent overlap
#
#   scripts/fuzz.sh [--long] [--time SECONDS] [TARGET...]
#     default 30 s per target; --long = 600 s per target; TARGET names as above (default: all)
#   BUILD_ROOT=dir   build and working corpus directory (default build-fuzz)
#
# Each target starts from its seed corpus (tests/fuzz/corpus/<target>/, committed) plus what
# earlier runs found (BUILD_ROOT/corpus/<target>/, not committed). A crash leaves its input in
# BUILD_ROOT/artifacts/ and makes the script exit non-zero; reproduce it with
#   BUILD_ROOT/<target>_fuzz BUILD_ROOT/artifacts/<target>-crash-...
# The core library is built through the project's CMake with clang and the sanitizer and
# coverage flags on the command line (no CMake file changes); the targets are linked here.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_ROOT=${BUILD_ROOT:-build-fuzz}
JOBS=${JOBS:-$(nproc)}
SECONDS_PER_TARGET=30
targets=()
while (($#)); do
  case $1 in
    --long) SECONDS_PER_TARGET=600 ;;
    --time) SECONDS_PER_TARGET=$2; shift ;;
    page_heap|size_class|api|misuse) targets+=("$1") ;;
    *) echo "usage: $0 [--long] [--time SECONDS] [page_heap|size_class|api|misuse ...]" >&2; exit 2 ;;
  esac
  shift
done
((${#targets[@]})) || targets=(page_heap size_class api misuse)

CXX=${CXX_FUZZ:-clang++-14}
CC=${CC_FUZZ:-clang-14}
command -v "$CXX" >/dev/null || { echo "fuzz: $CXX not found (run scripts/install-dev-deps.sh)" >&2; exit 2; }
mkdir -p "$BUILD_ROOT"
BUILD_ROOT=$(cd "$BUILD_ROOT" && pwd)

# vptr needs RTTI, which the allocator is built without.
ASAN_FLAGS="-fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=all"
UBSAN_FLAGS="-fsanitize=undefined -fno-sanitize=vptr -fno-sanitize-recover=all"
COMMON="-g -O1 -fno-omit-frame-pointer"

# build_lib DIR "SANITIZER FLAGS" TARGET: the allocator with coverage for libFuzzer.
build_lib() {
  local dir=$1 flags="-fsanitize=fuzzer-no-link $2 $COMMON" target=$3 log=$1.log
  if ! { cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
           -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
           -DTCMALLOC_BUILD_TESTS=OFF -DTCMALLOC_BUILD_BENCH=OFF \
           -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
           -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" &&
         cmake --build "$dir" -j "$JOBS" --target "$target"; } >"$log" 2>&1; then
    tail -30 "$log" >&2
    echo "fuzz: building $target in $dir failed (log: $log)" >&2
    exit 1
  fi
}

# link_target NAME "SANITIZER FLAGS" LIBS...
link_target() {
  local name=$1 flags=$2
  shift 2
  # -fno-builtin: the compiler must not fold away malloc calls whose results it can see;
  # -fsized-deallocation: clang 14 leaves sized operator delete off by default.
  "$CXX" -std=c++20 $COMMON -fsanitize=fuzzer $flags -fno-builtin -fsized-deallocation \
    -I src -I include -I tests/fuzz \
    "tests/fuzz/${name}_fuzz.cc" "$@" -lpthread -o "$BUILD_ROOT/${name}_fuzz"
}

echo "fuzz: building with $CXX (log: $BUILD_ROOT/*.log)"
need_asan=0; need_api=0
for t in "${targets[@]}"; do
  if [ "$t" = api ] || [ "$t" = misuse ]; then need_api=1; else need_asan=1; fi
done
if ((need_asan)); then
  build_lib "$BUILD_ROOT/lib-asan" "$ASAN_FLAGS" tcmalloc_core
  for t in "${targets[@]}"; do
    { [ "$t" = api ] || [ "$t" = misuse ]; } && continue
    link_target "$t" "$ASAN_FLAGS" "$BUILD_ROOT/lib-asan/src/libtcmalloc_core.a"
  done
fi
if ((need_api)); then
  build_lib "$BUILD_ROOT/lib-ubsan" "$UBSAN_FLAGS" tcmalloc_minimal_static
  # The whole archive: malloc, operator new & co. must come from it, not from libc.
  for t in "${targets[@]}"; do
    { [ "$t" = api ] || [ "$t" = misuse ]; } || continue
    link_target "$t" "$UBSAN_FLAGS" \
      -Wl,--whole-archive "$BUILD_ROOT/lib-ubsan/src/libtcmalloc_minimal.a" -Wl,--no-whole-archive
  done
fi

# The page heap target keeps its pagemap nodes (glibc calloc in a never-freed heap) on
# purpose; they stay reachable, so leak detection can stay on.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

status=0
total_execs=0
summary=()
mkdir -p "$BUILD_ROOT/artifacts"
for t in "${targets[@]}"; do
  corpus=$BUILD_ROOT/corpus/$t
  seeds=$ROOT/tests/fuzz/corpus/$t
  mkdir -p "$corpus"
  log=$BUILD_ROOT/$t.run.log
  echo "fuzz[$t]: running ${SECONDS_PER_TARGET}s (log: $log)"
  rc=0
  # New inputs go to the first directory; the committed seeds are only read.
  "$BUILD_ROOT/${t}_fuzz" -max_total_time="$SECONDS_PER_TARGET" -timeout=60 -rss_limit_mb=4096 \
    -max_len=4096 -print_final_stats=1 -artifact_prefix="$BUILD_ROOT/artifacts/$t-" \
    "$corpus" "$seeds" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
  files=$(find "$corpus" -type f | wc -l)
  execs=${execs:-0}
  total_execs=$((total_execs + execs))
  if ((rc)); then
    grep -E 'fuzz check failed|ERROR|runtime error|SUMMARY|Test unit written|tcmalloc:' "$log" | head -20 >&2
    echo "fuzz[$t]: FAILED (exit $rc) after $execs executions; see $log" >&2
    summary+=("$t: FAILED after $execs execs")
    status=1
  else
    echo "fuzz[$t]: ok, $execs executions, coverage ${cov:-?} edges, corpus $files inputs"
    summary+=("$t: $execs execs, cov ${cov:-?}, corpus $files")
  fi
done
echo "fuzz: total $total_execs executions; $(IFS=';'; echo "${summary[*]}")"
exit $status
