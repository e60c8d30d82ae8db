#!/bin/bash
# Throwaway behind bench/README "Forty-third and forty-fourth sessions": t-test1 at 64 KiB,
# two threads in one process against two single-thread processes run at once (what the
# threads share inside the allocator), and one thread alone. Run from the repository root
# with build/bench built: bench/results/threads-vs-processes-2026-12-06.sh LIB
set -eu
L=$1
wall() { grep -oE ' wall_s=[0-9.]+' "$1" | cut -d= -f2; }
LD_PRELOAD=$L build/bench/t-test1 2 400000 65536 1000 > /tmp/tvp.2t
LD_PRELOAD=$L build/bench/t-test1 1 400000 65536 1000 > /tmp/tvp.pa &
LD_PRELOAD=$L build/bench/t-test1 1 400000 65536 1000 > /tmp/tvp.pb &
wait
LD_PRELOAD=$L build/bench/t-test1 1 400000 65536 1000 > /tmp/tvp.1t
echo "$(basename "$L"): 1 thread alone $(wall /tmp/tvp.1t)  2 threads $(wall /tmp/tvp.2t)  2 processes $(wall /tmp/tvp.pa) $(wall /tmp/tvp.pb)"
