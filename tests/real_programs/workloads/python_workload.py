# Allocation-heavy Python workload with deterministic output.
#
# Run by run_real_program.py once on the system allocator and once under LD_PRELOAD; the two
# stdouts must match byte for byte. Everything printed is derived from the data only: no ids,
# addresses, timings or thread scheduling order. The driver sets PYTHONHASHSEED=0 and
# PYTHONMALLOC=malloc so that set/dict order is stable and every object goes through malloc
# (instead of CPython's own small-object arena), which is what we want to stress.

import array
import collections
import hashlib
import json
import queue
import re
import threading


def digest(data):
    """Short stable fingerprint of a str or bytes value."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:16]


class Lcg:
    """Tiny linear congruential generator: same numbers on every run and every Python."""

    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def next(self):
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        return self.state >> 33

    def below(self, n):
        return self.next() % n

    def word(self, length):
        return "".join(chr(97 + self.below(26)) for _ in range(length))


def section(title):
    print(f"== {title}")


def dicts_and_sets():
    # Many small objects of many sizes: keys, values, tuples, the dict's own tables as it grows
    # and shrinks. Deleting half and refilling reuses freed memory of every size class.
    section("dicts and sets")
    rng = Lcg(1)
    table = {}
    for i in range(200_000):
        key = f"k{i}-{rng.word(1 + rng.below(24))}"
        table[key] = (i, rng.word(rng.below(40)), [i] * rng.below(8))
    print("entries", len(table))
    for key in [k for k in table if table[k][0] % 2 == 0]:
        del table[key]
    print("after delete", len(table))
    for i in range(100_000):
        table[f"r{i}"] = {"n": i, "s": "x" * (i % 300)}
    print("after refill", len(table))
    keys = sorted(table)
    print("first keys", keys[:3], "last keys", keys[-3:])
    print("keys digest", digest("\n".join(keys)))
    words = {rng.word(1 + rng.below(6)) for _ in range(150_000)}
    print("distinct words", len(words), "digest", digest(" ".join(sorted(words))))
    counts = collections.Counter(w[0] for w in words)
    print("by first letter", sorted(counts.items())[:5])


def strings():
    # Strings growing by concatenation (realloc), joins, replace/split producing many
    # temporaries, and a few multi-megabyte strings that come from the large-object path.
    section("strings")
    rng = Lcg(2)
    text = ""
    for i in range(20_000):
        text += rng.word(1 + rng.below(12)) + (" " if i % 13 else "\n")
    print("text length", len(text), "digest", digest(text))
    upper = text.upper().replace("A", "<a>").replace("E", "")
    print("transformed", len(upper), digest(upper))
    lines = text.split("\n")
    print("lines", len(lines), "longest", max(len(s) for s in lines))
    big = "-".join(str(i) for i in range(1_000_000))
    print("big join", len(big), digest(big))
    big_unicode = "\u00e9\u4e2d\U0001f600" * 400_000
    print("unicode", len(big_unicode), digest(big_unicode))
    for size in (1 << 10, 1 << 16, 1 << 18, (1 << 18) + 1, 1 << 20, 3 << 20, 17 << 20):
        blob = bytes([size % 251]) * size
        print("blob", size, digest(blob))


def regexes():
    section("regex")
    rng = Lcg(3)
    corpus = "\n".join(
        f"user{rng.below(1000)}@host{rng.below(50)}.example id={rng.below(10**6)} "
        f"tag={rng.word(5)}"
        for _ in range(30_000))
    emails = re.findall(r"(\w+)@(host\d+)\.example", corpus)
    print("emails", len(emails), emails[:2])
    hosts = collections.Counter(h for _, h in emails)
    print("top hosts", sorted(hosts.items(), key=lambda kv: (-kv[1], kv[0]))[:3])
    swapped = re.sub(r"id=(\d+) tag=(\w+)", r"tag=\2 id=\1", corpus)
    print("swapped", digest(swapped))
    # A fresh pattern per iteration defeats re's cache: compiled programs are allocated
    # and freed over and over.
    total = 0
    for i in range(600):
        total += len(re.findall(f"user{i}@host(\\d+)", corpus))
    print("per-user matches", total)


def json_round_trip():
    section("json")
    rng = Lcg(4)

    def tree(depth):
        if depth == 0:
            return [rng.below(1000), rng.word(rng.below(10))]
        return {f"n{depth}-{i}": tree(depth - 1) for i in range(1 + rng.below(5))}

    doc = {"trees": [tree(6) for _ in range(6)], "numbers": list(range(50_000)),
           "floats": [i / 7 for i in range(20_000)], "text": "\u00fcnicode \" \\ \n"}
    encoded = json.dumps(doc, sort_keys=True)
    print("encoded", len(encoded), digest(encoded))
    decoded = json.loads(encoded)
    print("round trip equal", decoded == doc)
    pretty = json.dumps(decoded, indent=2, sort_keys=True)
    print("pretty", len(pretty), digest(pretty))


def threads():
    # Objects made in one thread and freed in another (through queues) exercise the
    # allocator's cross-thread free path; each thread also churns its own cache. Results are
    # collected per worker and printed in worker order, so scheduling cannot show.
    section("threads")
    work = queue.Queue()
    done = queue.Queue()
    results = {}

    def producer(pid):
        rng = Lcg(100 + pid)
        for i in range(20_000):
            work.put([rng.word(1 + rng.below(30)) for _ in range(1 + rng.below(4))])
        work.put(None)

    def consumer(cid):
        count = 0
        chars = 0
        while True:
            item = work.get()
            if item is None:
                break
            count += 1
            chars += sum(len(s) for s in item)
            del item
        done.put((cid, count, chars))

    def churner(tid):
        rng = Lcg(200 + tid)
        keep = []
        checksum = 0
        for i in range(150_000):
            obj = bytearray(1 + rng.below(2000))
            obj[0] = i & 0xFF
            keep.append(obj)
            if len(keep) > 500:
                victim = keep.pop(rng.below(len(keep)))
                checksum = (checksum * 31 + len(victim) + victim[0]) & 0xFFFFFFFF
        results[tid] = checksum

    producers = [threading.Thread(target=producer, args=(p,)) for p in range(4)]
    consumers = [threading.Thread(target=consumer, args=(c,)) for c in range(4)]
    churners = [threading.Thread(target=churner, args=(t,)) for t in range(4)]
    for t in producers + consumers + churners:
        t.start()
    for t in producers + consumers + churners:
        t.join()
    # Which consumer got which item depends on scheduling; the totals do not.
    tallies = [done.get() for _ in consumers]
    print("items consumed", sum(t[1] for t in tallies), "chars", sum(t[2] for t in tallies))
    for tid in sorted(results):
        print("churner", tid, results[tid])


def buffers():
    # Growing buffers one element at a time: repeated realloc of the same block through every
    # size class up into the page-level allocator.
    section("buffers")
    buf = bytearray()
    for i in range(3_000_000):
        buf.append(i % 256)
    print("bytearray", len(buf), digest(bytes(buf)))
    arr = array.array("q")
    for i in range(1_000_000):
        arr.append(i * i)
    print("array", len(arr), digest(arr.tobytes()))
    lists = [list(range(n)) for n in range(0, 3000, 7)]
    print("lists", len(lists), sum(len(x) for x in lists))


def main():
    dicts_and_sets()
    strings()
    regexes()
    json_round_trip()
    threads()
    buffers()
    print("== done")


if __name__ == "__main__":
    main()
