#!/usr/bin/env bash
# The README's first quick-start command: installs the peers, builds the project in Release and
# runs the quick side-by-side benchmark (our allocator vs glibc, gperftools, jemalloc, mimalloc)
# with the callgrind instruction counts, printing the tables. About two minutes on 2 cores.
#
#   bash scripts/demo.sh                 # from any directory
#   bash scripts/demo.sh --full          # extra arguments go to bench/run.py (see --help)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

BUILD=${BUILD:-build}
echo "demo: building the project (Release) in $BUILD/"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target tcmalloc_minimal bench_workloads

# Plots need matplotlib, which install-deps.sh installs for the system Python: prefer that one
# over whatever python3 comes first in PATH (a pyenv or venv Python would not see it).
PY=python3
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  PY=/usr/bin/python3
fi

# Quick mode is run.py's default, so "--full" can be passed through. The result tables go to
# stdout and to out/bench/<time>/results.md; progress goes to stderr.
echo "demo: benchmarking ours against glibc, gperftools, jemalloc and mimalloc"
exec "$PY" bench/run.py --callgrind --ours "$BUILD/src/libtcmalloc_minimal.so" \
  --bin-dir "$BUILD/bench" "$@"
