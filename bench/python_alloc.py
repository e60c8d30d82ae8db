#!/usr/bin/env python3
"""Allocation-heavy Python program for peak-RSS comparisons (run it under each allocator
with LD_PRELOAD; pymalloc stays on, so objects up to 512 bytes stay in Python's own arenas
and what reaches malloc is what real Python programs send there: dict and list buffers,
strings and bytes over 512 bytes, JSON text, and the arenas' neighbours).

Stages, each building structures, replacing part of them and dropping them:
  records   class instances with per-instance dicts, indexed by dicts of several sizes
  json      a document list dumped to JSON text and parsed back, twice
  strings   text built by joins and slicing, kept in lists that grow and shrink
  tables    dicts of lists of tuples regrouped into new shapes (rehashing, list growth)

Usage: python_alloc.py [scale=1.0]
Prints one line: ops=<objects created> wall_s=... cpu_s=... peak_rss_kib=... and
rss_end_mib (after everything was dropped)."""
import gc
import json
import random
import sys
import time


def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class Record:
    def __init__(self, i, rng):
        self.id = i
        self.name = "user-%08d" % i
        self.email = "user%d@example.%s" % (i, rng.choice(("com", "org", "net")))
        self.tags = [rng.choice(("a", "bb", "ccc", "dddd")) for _ in range(rng.randint(0, 12))]
        self.score = rng.random()
        self.history = {"k%d" % j: j * i for j in range(rng.randint(1, 40))}


def records(rng, n):
    objs = [Record(i, rng) for i in range(n)]
    by_name = {r.name: r for r in objs}
    by_bucket = {}
    for r in objs:
        by_bucket.setdefault(r.id % 997, []).append(r)
    # Replace a third with new, bigger records; drop the indexes and rebuild one.
    for i in range(0, n, 3):
        r = Record(n + i, rng)
        r.history.update({"x%d" % j: j for j in range(50)})
        objs[i] = r
    del by_name
    by_email = {r.email: r for r in objs}
    count = len(objs) + len(by_bucket) + len(by_email)
    del objs, by_bucket, by_email
    return count


def documents(rng, n):
    docs = []
    for i in range(n):
        docs.append({
            "id": i,
            "title": " ".join(rng.choice(("alpha", "beta", "gamma", "delta", "epsilon")) for _ in range(rng.randint(3, 30))),
            "values": [rng.random() for _ in range(rng.randint(5, 80))],
            "meta": {"owner": "team-%d" % (i % 50), "flags": [bool(i & b) for b in (1, 2, 4, 8)]},
        })
    return docs


def json_stage(rng, n):
    count = 0
    for _ in range(2):
        docs = documents(rng, n)
        text = json.dumps(docs)
        back = json.loads(text)
        chunks = [json.dumps(d) for d in back]
        count += len(docs) + len(back) + len(chunks) + len(text) // 1000
        del docs, text, back, chunks
    return count


def strings_stage(rng, n):
    words = ["w%d" % i * rng.randint(1, 30) for i in range(5000)]
    lines = []
    for i in range(n):
        lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(20, 200))))
    big = "\n".join(lines)
    pieces = [big[i:i + rng.randint(600, 5000)] for i in range(0, len(big), 4096)]
    del lines[::2]
    upper = [p.upper() for p in pieces[::3]]
    count = len(lines) + len(pieces) + len(upper)
    del big, pieces, upper, lines
    return count


def tables_stage(rng, n):
    rows = [(i, rng.randint(0, 5000), "cat%d" % rng.randint(0, 200), rng.random()) for i in range(n)]
    by_cat = {}
    for r in rows:
        by_cat.setdefault(r[2], []).append(r)
    by_key = {}
    for cat, rs in by_cat.items():
        for r in rs:
            by_key.setdefault(r[1] % 4096, {})[r[0]] = r
    regrouped = {k: sorted(v.values(), key=lambda r: r[3]) for k, v in by_key.items()}
    count = len(rows) + len(by_cat) + len(by_key) + len(regrouped)
    del rows, by_cat, by_key, regrouped
    return count


def main():
    scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    rng = random.Random(12345)
    w0, c0 = time.monotonic(), time.process_time()
    ops = 0
    for _ in range(2):
        ops += records(rng, int(120000 * scale))
        ops += json_stage(rng, int(40000 * scale))
        ops += strings_stage(rng, int(40000 * scale))
        ops += tables_stage(rng, int(400000 * scale))
        gc.collect()
    w1, c1 = time.monotonic(), time.process_time()
    print("ops=%d wall_s=%.6f cpu_s=%.6f ops_per_wall_s=%.0f ops_per_cpu_s=%.0f peak_rss_kib=%d rss_end_mib=%.1f" % (
        ops, w1 - w0, c1 - c0, ops / (w1 - w0), ops / (c1 - c0), status_kib("VmHWM"), status_kib("VmRSS") / 1024.0))


if __name__ == "__main__":
    main()
