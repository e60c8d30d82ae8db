#!/usr/bin/env bash
# Installs what the tests and benchmarks need beyond the preinstalled toolchain.
# Idempotent and quiet: packages already present are not touched; output goes to a log.
set -euo pipefail

# Debian packages. Peers for the side-by-side benchmarks, programs for the real-program tests.
PACKAGES=(
  libtcmalloc-minimal4 libjemalloc2 libmimalloc2.0   # peer allocators
  sqlite3 git perl                                   # real programs under LD_PRELOAD
  python3 python3-matplotlib                         # benchmark plots, CPython regression tests
  valgrind pkg-config cmake ninja-build g++ libgtest-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null; then
    echo "install-deps: need root to install: ${missing[*]}" >&2
    exit 1
  fi
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  log=$(mktemp /tmp/install-deps.XXXXXX.log)
  echo "install-deps: installing ${missing[*]} (log: $log)"
  export DEBIAN_FRONTEND=noninteractive
  if ! { $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    tail -20 "$log" >&2
    echo "install-deps: apt-get failed" >&2
    exit 1
  fi
fi
