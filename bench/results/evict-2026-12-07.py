#!/usr/bin/env python3
"""Drops files from the page cache and reads them back in, as a program meets a library on a
running system (bench/README.md, "Fiftieth session"). The fsync matters: a copy made by cp
has dirty pages, which POSIX_FADV_DONTNEED cannot drop, and they stay as large folios that
the kernel maps whole.
  python3 bench/results/evict-2026-12-07.py build/src/libtcmalloc_minimal.so
  for i in $(seq 9); do LD_PRELOAD=build/src/libtcmalloc_minimal.so build/bench/fastpath pair 32 1; done
Text pages after a program: preload bench/results/text-pages-2026-12-07.c in front of it."""
import os
import sys

for path in sys.argv[1:]:
    fd = os.open(os.path.realpath(path), os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    with open(os.path.realpath(path), "rb") as f:
        while f.read(1 << 20):
            pass
