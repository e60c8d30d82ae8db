#!/usr/bin/env bash
# Installs what the trust tooling needs beyond scripts/install-deps.sh: clang for libFuzzer and
# the sanitizer runtimes (scripts/fuzz.sh), clang-tidy and cppcheck (scripts/lint.sh), and a
# real server with its load generator (tests/server, scripts/soak.sh).
# Idempotent and quiet: packages already present are not touched; output goes to a log.
set -euo pipefail

PACKAGES=(
  clang-14 libclang-rt-14-dev      # libFuzzer (-fsanitize=fuzzer) and the ASan/UBSan runtimes
  clang-tidy-14 cppcheck           # static analysis
  redis-server redis-tools         # server under load: redis-server, redis-cli, redis-benchmark
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null; then
    echo "install-dev-deps: need root to install: ${missing[*]}" >&2
    exit 1
  fi
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  log=$(mktemp /tmp/install-dev-deps.XXXXXX.log)
  echo "install-dev-deps: installing ${missing[*]} (log: $log)"
  export DEBIAN_FRONTEND=noninteractive
  # The redis-server package starts a system service on port 6379; the tests never use it
  # (they start their own server on a free port), so a policy-rc.d keeps it from starting
  # while we install. Only if none is there already: it is not ours to replace.
  policy=/usr/sbin/policy-rc.d
  made_policy=0
  if [ ! -e "$policy" ] && [ "$(id -u)" -eq 0 ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
  fi
  status=0
  { $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"; } \
    >"$log" 2>&1 || status=$?
  ((made_policy)) && rm -f "$policy"
  if ((status)); then
    tail -20 "$log" >&2
    echo "install-dev-deps: apt-get failed" >&2
    exit 1
  fi
fi

# Fail clearly if a tool is still not where the scripts look for it.
for tool in clang++-14 clang-tidy-14 cppcheck redis-server redis-benchmark redis-cli; do
  command -v "$tool" >/dev/null || { echo "install-dev-deps: $tool not found after install" >&2; exit 1; }
done
