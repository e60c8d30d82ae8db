#!/usr/bin/env python3
"""Peak RSS of an allocation-heavy Python program (bench/python_alloc.py, pymalloc on) under
our library must stay within 5% of the best peer installed (glibc always; jemalloc and
mimalloc when their libraries are there). What this catches: memory the page heap keeps
free and backed while Python maps its own arenas beside it (before issue 12 our peak was
1.39x glibc's on this program).

Usage: python_peak_test.py LIBTCMALLOC_MINIMAL_SO PYTHON_ALLOC_PY [scale]"""
import os
import subprocess
import sys

PEERS = {"jemalloc": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
         "mimalloc": "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"}


def peak_kib(python, script, scale, preload):
    env = dict(os.environ, PYTHONHASHSEED="0")
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    out = subprocess.run([python, script, scale], env=env, capture_output=True, text=True, check=True)
    if "cannot be preloaded" in out.stderr:
        raise RuntimeError(f"{preload} was not preloaded: {out.stderr.strip()}")
    fields = dict(kv.split("=", 1) for kv in out.stdout.split())
    return int(fields["peak_rss_kib"])


def main():
    ours, script = os.path.abspath(sys.argv[1]), sys.argv[2]
    scale = sys.argv[3] if len(sys.argv) > 3 else "0.15"
    python = "/usr/bin/python3"
    if not os.path.exists(python):
        print("SKIP: no /usr/bin/python3 (a dynamically linked CPython with pymalloc)")
        return 77
    peaks = {"glibc": peak_kib(python, script, scale, None)}
    for name, lib in PEERS.items():
        if os.path.exists(lib):
            peaks[name] = peak_kib(python, script, scale, lib)
    mine = peak_kib(python, script, scale, ours)
    best = min(peaks, key=peaks.get)
    print(f"peak RSS, MiB: ours {mine / 1024:.1f}; " +
          ", ".join(f"{n} {v / 1024:.1f}" for n, v in peaks.items()) +
          f"; ours / best ({best}) = {mine / peaks[best]:.3f}")
    if mine > peaks[best] * 1.05:
        print(f"FAIL: our peak is more than 5% above {best}'s")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
