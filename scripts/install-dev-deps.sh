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

source "$(dirname "$0")/apt-install.sh"
apt_install install-dev-deps "${PACKAGES[@]}"

# Fail clearly if a tool is still not where the scripts look for it.
for tool in clang++-14 clang-tidy-14 cppcheck redis-server redis-benchmark redis-cli; do
  command -v "$tool" >/dev/null || { echo "install-dev-deps: $tool not found after install" >&2; exit 1; }
done
