#!/usr/bin/env bash
# A real server under load: redis-server on 127.0.0.1 (a free port, no persistence, its own
# temporary directory) three times:
#   jemalloc   as Debian ships it (redis-server is linked against libjemalloc)
#   glibc      with glibc_malloc_shim.so preloaded (malloc & co. forwarded to glibc)
#   tcmalloc   with our libtcmalloc_minimal.so preloaded
# Each run: redis-benchmark (bounded request count, pipelined) over set/get/lpush/lpop/incr, a
# few INFO calls, FLUSHALL, a little more traffic, then SHUTDOWN. Checks: the server starts, answers, survives the
# benchmark and shuts down cleanly (exit status 0, no crash report in its log); every
# benchmark completes; INFO lists the same sections and keys in every run; the preloaded
# server really has our library mapped (/proc/<pid>/maps) and the others do not. Prints RSS
# (INFO used_memory_rss and /proc VmRSS/VmHWM) side by side. No timing assertions.
#
#   redis_server_test.sh LIBTCMALLOC GLIBC_SHIM [REQUESTS]
# Fails with a clear message when redis-server is missing (scripts/install-dev-deps.sh).
set -uo pipefail
ours=${1:?usage: $0 LIBTCMALLOC GLIBC_SHIM [REQUESTS]}
shim=${2:?usage: $0 LIBTCMALLOC GLIBC_SHIM [REQUESTS]}
requests=${3:-100000}

for tool in redis-server redis-cli redis-benchmark; do
  if ! command -v "$tool" >/dev/null; then
    echo "server test: $tool not found: install it with scripts/install-dev-deps.sh" >&2
    exit 1
  fi
done
[ -f "$ours" ] || { echo "server test: $ours does not exist" >&2; exit 1; }

tmp=$(mktemp -d /tmp/tcm-redis.XXXXXX)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

fail=0
problem() {
  echo "server test: FAIL: $*" >&2
  fail=1
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000))
}

# kb_of FIELD PID: a /proc/<pid>/status field in kB.
kb_of() { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$2/status"; }

cli() { timeout 20 redis-cli -h 127.0.0.1 -p "$port" "$@"; }

# run NAME PRELOAD: one server's life. Sets rss_<NAME>, keys_<NAME>.
run() {
  local name=$1 preload=$2 dir=$tmp/$1
  mkdir -p "$dir"
  local started=0 try
  for try in 1 2 3 4 5; do
    port=$(free_port)
    env ${preload:+LD_PRELOAD="$preload"} redis-server --bind 127.0.0.1 --port "$port" --save "" \
      --appendonly no --dir "$dir" --logfile "$dir/redis.log" --daemonize no --protected-mode yes \
      --io-threads 1 &
    server_pid=$!
    local i
    for i in $(seq 1 100); do
      if [ "$(cli ping 2>/dev/null)" = PONG ]; then started=1; break; fi
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.1
    done
    ((started)) && break
    kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null
    grep -q "Address already in use" "$dir/redis.log" 2>/dev/null || break
  done
  if ((!started)); then
    tail -20 "$dir/redis.log" >&2
    problem "$name: redis-server did not start"
    return
  fi

  # Which allocator is really in there.
  if grep -q libtcmalloc_minimal "/proc/$server_pid/maps"; then mapped=yes; else mapped=no; fi
  if [ "$name" = tcmalloc ] && [ "$mapped" != yes ]; then problem "$name: libtcmalloc_minimal is not mapped"; fi
  if [ "$name" != tcmalloc ] && [ "$mapped" = yes ]; then problem "$name: libtcmalloc_minimal is mapped"; fi

  cli info >"$dir/info.0" || problem "$name: INFO failed before the benchmark"
  # Bounded: $requests requests per test, 16 pipelined, values of 256 B over 100000 keys.
  if ! timeout 120 redis-benchmark -h 127.0.0.1 -p "$port" -q -n "$requests" -P 16 -r 100000 -d 256 \
         -t set,get,lpush,lpop,incr >"$dir/bench" 2>&1; then
    problem "$name: redis-benchmark failed"
  fi
  tr '\r' '\n' <"$dir/bench" | grep -E 'requests per second' | sed "s/^/  $name: /"
  local lines
  lines=$(tr '\r' '\n' <"$dir/bench" | grep -c 'requests per second')
  [ "$lines" -eq 5 ] || problem "$name: benchmark reported $lines of 5 tests"
  cli info >"$dir/info.1" || problem "$name: INFO failed after the benchmark"
  cli dbsize >"$dir/dbsize" || true
  local rss_info rss_proc hwm used
  rss_info=$(tr -d '\r' <"$dir/info.1" | sed -n 's/^used_memory_rss://p')
  used=$(tr -d '\r' <"$dir/info.1" | sed -n 's/^used_memory://p')
  rss_proc=$(kb_of VmRSS "$server_pid")
  hwm=$(kb_of VmHWM "$server_pid")
  cli flushall >/dev/null || problem "$name: FLUSHALL failed"
  sleep 1
  cli info >"$dir/info.2" || problem "$name: INFO failed after FLUSHALL"
  local rss_flushed rss_later
  rss_flushed=$(kb_of VmRSS "$server_pid")
  # Some light traffic after the flush: an allocator that returns memory from its own slow
  # paths (no background thread) gets the chance to do so.
  timeout 60 redis-benchmark -h 127.0.0.1 -p "$port" -q -n 20000 -r 10 -t ping,set >/dev/null 2>&1 ||
    problem "$name: light benchmark after FLUSHALL failed"
  sleep 1
  rss_later=$(kb_of VmRSS "$server_pid")
  printf -v "report_$name" '%-8s keys %-6s used_memory %5.1f MiB, used_memory_rss %5.1f MiB, VmRSS %5.1f MiB, VmHWM %5.1f MiB; VmRSS after FLUSHALL %5.1f MiB, after light traffic %5.1f MiB (our library mapped: %s)' \
    "$name" "$(cat "$dir/dbsize")" "$(echo "$used / 1048576" | bc -l)" "$(echo "$rss_info / 1048576" | bc -l)" \
    "$(echo "$rss_proc / 1024" | bc -l)" "$(echo "$hwm / 1024" | bc -l)" "$(echo "$rss_flushed / 1024" | bc -l)" \
    "$(echo "$rss_later / 1024" | bc -l)" "$mapped"

  # The shape of INFO: section headers and key names (values differ, of course).
  tr -d '\r' <"$dir/info.1" | sed -n 's/^\(#.*\)$/\1/p; s/^\([a-z_0-9]*\):.*/\1/p' >"$dir/shape"

  cli shutdown nosave >/dev/null 2>&1
  wait "$server_pid"
  local rc=$?
  server_pid=""
  [ "$rc" -eq 0 ] || problem "$name: redis-server exited with status $rc"
  if grep -qE 'crashed by signal|Segmentation|STACK TRACE|tcmalloc:' "$dir/redis.log"; then
    grep -E 'crashed by signal|Segmentation|STACK TRACE|tcmalloc:' "$dir/redis.log" | head -5 >&2
    problem "$name: crash report in the server log"
  fi
}

# MiB figures: bc if there is one, else python3.
command -v bc >/dev/null || bc() { python3 -c "import sys; print(eval(sys.stdin.read()))"; }

echo "server test: redis $(redis-server --version | grep -o 'v=[0-9.]*'), $requests requests per benchmark test"
run jemalloc ""
if [ -f "$shim" ]; then run glibc "$shim"; else problem "$shim does not exist"; fi
run tcmalloc "$ours"

for n in glibc tcmalloc; do
  [ -f "$tmp/$n/shape" ] || continue
  if ! diff -u "$tmp/jemalloc/shape" "$tmp/$n/shape" >"$tmp/shape.diff"; then
    cat "$tmp/shape.diff" >&2
    problem "INFO sections/keys differ between jemalloc and $n"
  fi
done
echo "server test: INFO shape: $(grep -c '^#' "$tmp/jemalloc/shape" 2>/dev/null) sections, $(grep -vc '^#' "$tmp/jemalloc/shape" 2>/dev/null) keys"
for n in jemalloc glibc tcmalloc; do
  v=report_$n
  [ -n "${!v:-}" ] && echo "  ${!v}"
done
if ((fail)); then
  echo "server test: FAILED"
  exit 1
fi
echo "server test: PASS"
