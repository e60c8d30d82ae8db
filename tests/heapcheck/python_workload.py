# A CPython workload for the heap checker: containers, strings, JSON, regular expressions,
# threads passing objects through a queue (their stacks are cached by glibc after they
# exit), sqlite3, hashlib and memory-heavy bytearrays. It must end without leak reports.
import collections
import hashlib
import json
import queue
import re
import sqlite3
import threading

d = {i: str(i) * 50 for i in range(20000)}
s = json.dumps(d)
assert json.loads(s)["5"] == "5" * 50

q = queue.Queue()


def worker(n):
    for i in range(2000):
        q.put(("x" * 700) + str(i * n))


threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
n = 0
while not q.empty():
    q.get()
    n += 1
print(n, len(s), hashlib.sha256(s.encode()).hexdigest()[:8])

db = sqlite3.connect(":memory:")
db.execute("create table t(a)")
db.executemany("insert into t values (?)", [(i,) for i in range(1000)])
print(db.execute("select sum(a) from t").fetchone())

big = [bytearray(3000) for _ in range(100)]
counts = collections.Counter(re.findall(r"\d+", s[:200000]))
print(len(big), counts.most_common(1)[0][0])

# A thread still running at exit holds objects only on its stack.
event = threading.Event()
held = []


def holder():
    local = [bytearray(5000) for _ in range(3)]
    held.append(len(local))
    event.wait()


daemon = threading.Thread(target=holder, daemon=True)
daemon.start()
while not held:
    pass
print("done")
