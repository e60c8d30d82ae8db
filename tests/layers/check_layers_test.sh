#!/usr/bin/env bash
# scripts/check-layers.sh must pass on the real tree and fail, naming the file, on each kind of
# violation planted in a copy of it: an upward include, a sideways include into the
# profiler, an include without its folder, and a system call outside src/platform/.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CHECK="$ROOT/scripts/check-layers.sh"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0

"$CHECK" "$ROOT/src" >"$TMP/real.log" || { cat "$TMP/real.log"; echo "FAIL: the real tree"; exit 1; }

# plant NAME FILE LINE EXPECTED: copy src/, append LINE to FILE, expect failure mentioning EXPECTED.
plant() {
  local name=$1 file=$2 line=$3 expected=$4
  rm -rf "$TMP/src" && cp -r "$ROOT/src" "$TMP/src"
  printf '%s\n' "$line" >>"$TMP/src/$file"
  if "$CHECK" "$TMP/src" >"$TMP/$name.log" 2>&1; then
    echo "FAIL [$name]: check-layers accepted: $file += $line"; failures=$((failures + 1))
  elif ! grep -q -- "$expected" "$TMP/$name.log"; then
    echo "FAIL [$name]: output lacks '$expected':"; cat "$TMP/$name.log"; failures=$((failures + 1))
  else
    echo "ok [$name]: $(grep -- "$expected" "$TMP/$name.log" | grep -v '^debt:' | head -1)"
  fi
}

plant upward      core/page_heap.cc    '#include "api/globals.h"'           'core/page_heap.cc:.*may not include "api/globals.h"'
plant base-up     base/log.cc          '#include "core/span.h"'             'base/log.cc:.*may not include "core/span.h"'
# platform/ is the bottom layer (src/README.md): base/ may use it, not the other way round.
plant platform-up platform/os.cc       '#include "base/log.h"'              'platform/os.cc:.*may not include "base/log.h"'
plant to-profiler api/allocation.cc    '#include "profiler/heap_profiler.h"' 'api/allocation.cc:.*may not include "profiler/heap_profiler.h"'
plant no-folder   core/arena.cc        '#include "span.h"'                  'core/arena.cc:.*without its folder'
plant syscall     core/page_heap.cc    'static void* f() { return mmap(0, 1, 0, 0, -1, 0); }' 'core/page_heap.cc:.*system call mmap()'
plant raw-sys     api/options.cc       'static long g() { return syscall(1); }' 'api/options.cc:.*system call syscall()'
plant sysheader   core/span_tree.cc    '#include <sys/mman.h>'              'core/span_tree.cc:.*<sys/mman.h>'
# The profiler and the checker see the allocator only through api/introspection.h, and make
# no system call of their own (their debt lines are gone: these fail outright).
plant checker-in  heapcheck/heap_checker.cc '#include "api/globals.h"'     'heapcheck/heap_checker.cc:.*may not include "api/globals.h"'
plant profiler-in profiler/heap_profiler.cc '#include "core/arena.h"'      'profiler/heap_profiler.cc:.*may not include "core/arena.h"'
plant checker-sys heapcheck/thread_list.cc  'static int k() { return sigaction(1, 0, 0); }' 'heapcheck/thread_list.cc:.*system call sigaction()'

# What must not be flagged: the word in a comment or string, a member named read, members named read, os:: calls.
rm -rf "$TMP/src" && cp -r "$ROOT/src" "$TMP/src"
cat >>"$TMP/src/core/span_tree.cc" <<'CC'
// mmap(2) is only named here
static const char* kText = "read( write(";
struct R { int (*read)(int); };
static int h(R r, R* q) { return r.read(1) + q->read(2) + os::write(3); }
CC
printf '%s\n' '#include "api/introspection.h"' >>"$TMP/src/profiler/heap_profile_table.cc"
"$CHECK" "$TMP/src" >"$TMP/clean.log" 2>&1 || { echo "FAIL [false-positive]:"; cat "$TMP/clean.log"; failures=$((failures + 1)); }

echo "$((12 - failures)) passed, $failures failed"
exit $((failures > 0))
