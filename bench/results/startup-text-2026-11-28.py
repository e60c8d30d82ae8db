#!/usr/bin/env python3
"""Which of our functions a trivial program runs at start-up, and where they lie in the text
(bench/README "Twenty-fifth session", "Start-up text"; an analysis tool, not part of any build).

    python3 bench/results/startup-text-2026-11-28.py build/src/libtcmalloc_minimal.so [ORDER_FILE]

Runs `fastpath pair 32 1` (the suite's start-up row) under callgrind with the library
preloaded (valgrind has no rseq: per-thread mode), lists our functions that ran, and prints
their count, their bytes, the 4 KiB pages they lie on and the 64 KiB fault-around windows
those pages fall in. With ORDER_FILE it also writes their sections for gold's
--section-ordering-file (meaningful for a build with -ffunction-sections)."""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
lib = os.path.realpath(sys.argv[1])
with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "cg.%p")
    subprocess.run(["valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={out}",
                    "env", f"LD_PRELOAD={lib}", os.path.join(ROOT, "build", "bench", "fastpath"), "pair", "32", "1"],
                   check=True, capture_output=True)
    ran = set()
    for f in os.listdir(tmp):
        text = subprocess.run(["callgrind_annotate", "--threshold=100", os.path.join(tmp, f)],
                              capture_output=True, text=True).stdout
        for line in text.splitlines():
            m = re.search(r"\?\?\?:(.*?) \[(.*)\]$", line)
            if m and os.path.realpath(m.group(2)) == lib:
                ran.add(m.group(1))

raw = subprocess.run(["nm", "-S", lib], capture_output=True, text=True).stdout.splitlines()
dem = subprocess.run(["nm", "-S", "-C", lib], capture_output=True, text=True).stdout.splitlines()
where, mangled = {}, {}
sized = re.compile(r"([0-9a-f]+) ([0-9a-f]+) [tTwW] (.*)")
for r, d in zip(raw, dem):
    mr, md = sized.match(r), sized.match(d)
    if mr and md:
        where.setdefault(md.group(3), (int(mr.group(1), 16), int(mr.group(2), 16)))
        mangled.setdefault(md.group(3), set()).add(mr.group(3))
found = sorted(f for f in ran if f in where)
pages = {p for f in found for p in range(where[f][0] // 4096, (sum(where[f]) - 1) // 4096 + 1)}
print(f"{len(found)} functions ran ({len(ran) - len(found)} without a symbol size), "
      f"{sum(where[f][1] for f in found)} bytes, on {len(pages)} pages; "
      f"64 KiB windows: {sorted({p // 16 for p in pages})}")
if len(sys.argv) > 2:
    with open(sys.argv[2], "w") as o:
        for f in found:
            for s in sorted(mangled[f]):
                o.write(f".text.{s}\n")
