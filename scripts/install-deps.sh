#!/usr/bin/env bash
# Installs what the tests and benchmarks need beyond the preinstalled toolchain.
# Idempotent and quiet: packages already present are not touched; output goes to a log.
set -euo pipefail

# Debian packages. Peers for the side-by-side benchmarks, programs for the real-program tests.
PACKAGES=(
  libtcmalloc-minimal4 libjemalloc2 libmimalloc2.0   # peer allocators
  sqlite3 git perl                                   # real programs under LD_PRELOAD
  python3 python3-matplotlib libpython3.11-testsuite # benchmark plots, CPython regression tests
  valgrind pkg-config cmake ninja-build g++ libgtest-dev
  graphviz                                           # `dot`: pprof -png/-svg draw with it
  libgoogle-perftools-dev                            # gperftools 2.10 headers + .so: the ABI test
)

source "$(dirname "$0")/apt-install.sh"
apt_install install-deps "${PACKAGES[@]}"

# pprof (github.com/google/pprof), which reads the heap profiles, built from the Go module
# proxy with the preinstalled Go toolchain. Pinned, so the tests parse a known output format.
# It goes to /usr/local/bin (or ~/.local/bin without root); the tests look in both.
PPROF_VERSION=v0.0.0-20261016150608-1facf8f91b50
if [ -w /usr/local/bin ]; then PPROF_BIN=/usr/local/bin; else PPROF_BIN="$HOME/.local/bin"; fi
# A `pprof` already on PATH counts only if it is the Go one (gperftools' Perl pprof differs).
go_pprof_on_path() {
  command -v pprof >/dev/null || return 1
  case "$(pprof -h 2>&1 || true)" in *-sample_index*) return 0 ;; esac
  return 1
}
if [ ! -x "$PPROF_BIN/pprof" ] && ! go_pprof_on_path; then
  GO=$(command -v go || echo /usr/local/go/bin/go)
  if [ ! -x "$GO" ]; then
    echo "install-deps: need the Go toolchain (go) to build pprof" >&2
    exit 1
  fi
  mkdir -p "$PPROF_BIN"
  log=$(mktemp /tmp/install-deps.XXXXXX.log)
  echo "install-deps: building pprof $PPROF_VERSION into $PPROF_BIN (log: $log)"
  if ! GOBIN="$PPROF_BIN" GOFLAGS=-buildvcs=false "$GO" install "github.com/google/pprof@$PPROF_VERSION" >"$log" 2>&1; then
    tail -20 "$log" >&2
    echo "install-deps: go install github.com/google/pprof failed" >&2
    exit 1
  fi
fi
