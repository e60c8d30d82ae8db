#!/usr/bin/env bash
# Static analysis of the allocator: clang-tidy-14 (checks in .clang-tidy) over every source
# of every src/ folder with the real compile flags, then cppcheck over src/
# (false positives listed, with reasons, in scripts/cppcheck-suppressions.txt).
# Exits non-zero on any finding of either tool.
#
#   scripts/lint.sh            both tools
#   scripts/lint.sh tidy       clang-tidy only
#   scripts/lint.sh cppcheck   cppcheck only
#   BUILD=dir                  where compile_commands.json is generated (default build-lint)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-lint}
JOBS=${JOBS:-$(nproc)}
what=${1:-all}

for tool in clang-tidy-14 cppcheck; do
  command -v "$tool" >/dev/null ||
    { echo "lint: $tool not found (run scripts/install-dev-deps.sh)" >&2; exit 2; }
done

status=0

run_tidy() {
  # Configuring is enough: compile_commands.json is written at configure time.
  mkdir -p "$BUILD"
  if ! cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
       -DTCMALLOC_BUILD_TESTS=OFF -DTCMALLOC_BUILD_BENCH=OFF >"$BUILD/configure.log" 2>&1; then
    cat "$BUILD/configure.log" >&2
    echo "lint: cmake configure failed" >&2
    return 1
  fi
  local files=(src/*/*.cc) out=$BUILD/clang-tidy.log
  # src/CMakeLists.txt may compile a source several times with different -D flags (debug
  # checks, fault injection). Each variant gets its own compilation database, so every
  # variant's #if branches are checked (in the files whose code, or whose headers', the
  # variant's macros can change), and clang-tidy sees each file once per process
  # (clang-tidy 14's analyzer reports a false "uninitialized va_list" when one process
  # analyses the same file twice).
  python3 - "$BUILD" <<'PY' || { echo "lint: cannot split compile_commands.json" >&2; return 1; }
import json, os, re, shutil, sys
build = sys.argv[1]
variants = {}
for entry in json.load(open(os.path.join(build, "compile_commands.json"))):
    defines = tuple(sorted(d for d in re.findall(r"-D(\S+)", entry["command"]) if not d.endswith("_EXPORTS")))
    variants.setdefault(defines, {}).setdefault(os.path.realpath(entry["file"]), entry)
for old in os.listdir(build):
    if old.startswith("tidy-db-"):
        shutil.rmtree(os.path.join(build, old))
def mentions(path, names, depth=2):
    """Whether path, or a project header it includes (two levels), names one of the macros."""
    try:
        text = open(path).read()
    except OSError:
        return False
    if any(n in text for n in names):
        return True
    if depth == 0:
        return False
    for inc in re.findall(r'#include "([^"]+)"', text):
        for base in (os.path.dirname(path), "src"):
            if os.path.exists(os.path.join(base, inc)) and mentions(os.path.join(base, inc), names, depth - 1):
                return True
    return False
base = min(variants, key=len)
for i, (defines, entries) in enumerate(sorted(variants.items(), key=lambda kv: len(kv[0]))):
    d = os.path.join(build, "tidy-db-%d" % i)
    os.makedirs(d)
    json.dump(list(entries.values()), open(os.path.join(d, "compile_commands.json"), "w"), indent=1)
    # Other variants: only the files whose code their extra macros can change.
    extra = [x.split("=")[0] for x in defines if x not in base]
    keep = [f for f in entries if defines == base or mentions(f, extra)]
    with open(os.path.join(d, "files"), "w") as f:
        f.write("\n".join(keep) + "\n")
PY
  local jobs=() db f
  for db in "$BUILD"/tidy-db-*; do
    for f in "${files[@]}"; do
      grep -qxF "$(realpath "$f")" "$db/files" && jobs+=("$db $f")
    done
  done
  echo "lint: clang-tidy-14 on ${#files[@]} files, ${#jobs[@]} file × build-variant runs"
  # One process per (variant, file), JOBS at a time; each prints its findings, and the
  # summary lines ("N warnings generated") go to stderr, which we drop.
  local rc=0
  printf '%s\n' "${jobs[@]}" |
    xargs -P "$JOBS" -L 1 sh -c 'clang-tidy-14 -p "$1" --quiet "$2" 2>/dev/null || echo "lint-failed: $2 ($1)"' _ \
      >"$out" || rc=1
  local n
  n=$(grep -cE '(warning|error): .*\[[A-Za-z0-9.,-]+\]$' "$out" || true)
  if ((n)) || grep -q '^lint-failed' "$out" || ((rc)); then
    cat "$out"
    echo "lint: clang-tidy: $n finding(s)" >&2
    return 1
  fi
  echo "lint: clang-tidy clean"
}

run_cppcheck() {
  local out
  out=$(mktemp)
  echo "lint: cppcheck on src/"
  # --std=c++20 and the include paths of the real build; every configuration of the #ifs.
  if ! cppcheck --quiet --std=c++20 --language=c++ -I src -I include \
       --enable=warning,performance,portability,style --inline-suppr \
       --suppressions-list=scripts/cppcheck-suppressions.txt --suppress=missingIncludeSystem \
       --error-exitcode=1 -j "$JOBS" \
       --template='{file}:{line}:{column}: {severity}: {message} [{id}]' src/ 2>"$out"; then
    cat "$out" >&2
    echo "lint: cppcheck: $(grep -c '\[[A-Za-z0-9_]*\]$' "$out" || true) finding(s)" >&2
    rm -f "$out"
    return 1
  fi
  if [ -s "$out" ]; then cat "$out" >&2; fi
  rm -f "$out"
  echo "lint: cppcheck clean"
}

case $what in
  all) run_tidy || status=1; run_cppcheck || status=1 ;;
  tidy) run_tidy || status=1 ;;
  cppcheck) run_cppcheck || status=1 ;;
  *) echo "usage: $0 [all|tidy|cppcheck]" >&2; exit 2 ;;
esac
exit $status
