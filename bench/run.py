#!/usr/bin/env python3
"""Side-by-side allocator benchmark: every workload under every allocator, interleaved.

Builds the workload programs in bench/, finds the allocators (ours, glibc, gperftools, jemalloc,
mimalloc), runs each workload under each allocator with LD_PRELOAD, interleaved, for several
rounds, and reports medians as Markdown tables, with every figure also shown as a ratio to ours.
Optional: instruction counts per malloc+free pair under callgrind, and PNG plots when matplotlib
is importable.

    bench/run.py                  # --quick: about a minute on 2 cores
    bench/run.py --callgrind      # ... plus instructions per pair under callgrind
    bench/run.py --full           # the design doc's t-test1 sweep and bigger runs of the rest
    bench/run.py --list           # print the workloads and their commands, run nothing

Only the standard library is used for measuring. Wall-clock figures on a shared 2-core machine
drift by tens of percent between runs, so allocators are never compared across separate
invocations: within each round every allocator runs every workload, in an order that changes
by round and workload (run_order).
"""
import argparse
import concurrent.futures
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
PROGRAMS = ["t-test1", "t-test2", "fastpath", "larson", "xmalloc", "cache_thrash", "stl_mix",
            "realloc_growth", "large_churn", "small_overhead", "phase", "light_batches", "binary_trees", "idle_threads",
            "hugepage"]
# Our library once more with its per-thread front end (the design document's thread caches,
# what runs where rseq is unavailable), so both modes are measured side by side.
PER_THREAD = "ours-per-thread"
# Our library with its release-build checks off (issue 15's cost, side by side); only run
# when named in --allocators.
UNHARDENED = "ours-unhardened"
# The same library with every run-time part of hardening off (the checks and guarded
# sampling): the one comparison of hardening's cost free of the code-layout differences
# between two builds, which moved binary trees by 5-9% either way (bench/README.md).
NO_HARDENING = "ours-no-hardening"
ALLOCATOR_ENV = {PER_THREAD: {"TCMALLOC_PER_CPU_CACHES": "0"},
                 UNHARDENED: {"TCMALLOC_HARDENED": "0"},
                 NO_HARDENING: {"TCMALLOC_HARDENED": "0", "TCMALLOC_GUARDED_SAMPLE_RATE": "0"}}
OPT_IN = {UNHARDENED, NO_HARDENING}
REFERENCE = "ours"  # ratios are value(allocator) / value(REFERENCE)
# The peers preloaded from their Debian libraries (glibc needs no preload).
PEERS = (("gperftools", ["libtcmalloc_minimal.so.4"]),
         ("jemalloc", ["libjemalloc.so.2"]),
         ("mimalloc", ["libmimalloc.so.2"]))


def our_variants():
    """Our library under each name: the reference and the variants, which differ only in
    their environment (ALLOCATOR_ENV, including those --variant added)."""
    return (REFERENCE,) + tuple(ALLOCATOR_ENV)


def add_variant(spec):
    """--variant NAME:VAR=VALUE[,VAR=VALUE...]: our library once more, under NAME, with those
    settings (e.g. a default being weighed, side by side with the library as it is)."""
    name, _, settings = spec.partition(":")
    pairs = [kv.partition("=") for kv in settings.split(",") if kv]
    if not name or not pairs or any(not k or not sep for k, sep, _ in pairs):
        sys.exit(f"run.py: --variant {spec!r}: expected NAME:VAR=VALUE[,VAR=VALUE...]")
    if name in ("glibc", REFERENCE) or name in dict(PEERS) or name in ALLOCATOR_ENV:
        sys.exit(f"run.py: --variant {spec!r}: {name} names an allocator already")
    ALLOCATOR_ENV[name] = {k: v for k, _, v in pairs}
    return name


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Workloads


class Workload:
    """One program invocation. `extra` maps program-reported keys worth their own table row
    (all lower-is-better) to the row's label. `throughput` is False when ops means nothing.
    `env` adds environment variables (the same for every allocator); argv[0] is a workload
    binary's name, or an absolute path (an interpreter)."""

    def __init__(self, name, argv, throughput=True, extra=None, env=None):
        self.name, self.argv, self.throughput, self.extra = name, argv, throughput, extra or {}
        self.env = env or {}


def system_python():
    """Debian's /usr/bin/python3 (pymalloc on, dynamically linked so LD_PRELOAD reaches it)."""
    return "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def human_size(n):
    for unit, shift in (("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def workloads(mode, threads):
    """The workload list for a mode. Quick runs are sized to take 30-150 ms each with a fast
    allocator (long enough that process start-up is noise, short enough for a first run);
    full mode follows the design doc (10^6 ops per thread, max sizes 64 B..128 KiB, threads
    1..N) and scales the others up."""
    full = mode == "full"
    w = [Workload("startup (baseline RSS)", ["fastpath", "pair", "32", "1"], throughput=False)]
    pair_sizes = [8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384, 65536] if full else [16, 256, 4096]
    for s in pair_sizes:
        w.append(Workload(f"pair {human_size(s)}", ["fastpath", "pair", str(s), "30M" if full else "10M"]))
    for s in pair_sizes:
        # glibc gives the top of its heap back on every batch of big blocks and faults it in
        # again (~1 fault per block at 4 KiB): scale the batch count down with the size so it
        # finishes in seconds, not minutes.
        pairs = (10 if full else 4) * 10**6 * min(1, 256 / s)
        w.append(Workload(f"batch {human_size(s)}", ["fastpath", "batch", str(s), str(max(20, int(pairs / 1000)))]))
    sizes = [64 << i for i in range(12)] if full else [64, 4096, 65536]
    for t in threads:
        for s in sizes:
            # Quick: fewer ops for the big sizes, where jemalloc takes ~5 us per op. 10^7 for
            # the small ones: at 2*10^6 a run took ~45 ms and two threads' figure spread over
            # 62-99 M ops/s from one run to the next (thread start-up and scheduling), so a
            # 3-round median read 65 in one session and 91 in the next; 0.23 s runs spread
            # 76-92.
            ops = 10**6 if full else (10**7 if s <= 4096 else 2 * 10**5)
            w.append(Workload(f"t-test1 {t}t {human_size(s)}", ["t-test1", str(t), str(ops), str(s), "1000"]))
    for t in (threads if full else [max(threads)]):
        w.append(Workload(f"t-test2 {t}t 4K", ["t-test2", str(t), str(10**6), "4096", "1000"]))
    nt = str(max(threads))
    depth = "21" if full else "19"
    for t in sorted({1, max(threads)}):
        w.append(Workload(f"binary-trees {t}t", ["binary_trees", depth, str(t)]))
    if full:
        # One depth at a time, 2^24 nodes each: where the front end's capacity ends (a
        # tree of depth 12 is 8191 nodes, 128 KiB of 16-byte objects).
        for d in (4, 8, 12, 14, 16, 19):
            w.append(Workload(f"binary-trees depth {d} 1t", ["binary_trees", str(d), "1", "16M"]))
    w.append(Workload("1000 idle threads", ["idle_threads", "1000", "256", "8", "1032"], throughput=False,
                      extra={"rss_growth_mib": "1000 idle threads: RSS growth, MiB",
                             "frontend_cache_mib": "1000 idle threads: front-end cache bytes, MiB"}))
    w += [
        Workload(f"larson {nt}t", ["larson", nt, "200" if full else "40", "50000", "1000", "8", "1000"]),
        Workload("xmalloc 1+1t", ["xmalloc", "1", "10M" if full else "2M", "64"]),
        Workload(f"cache-thrash {nt}t", ["cache_thrash", "thrash", nt, "2000", "8", "20000"]),
        Workload(f"cache-scratch {nt}t", ["cache_thrash", "scratch", nt, "2000", "8", "20000"]),
        Workload(f"stl-mix {nt}t", ["stl_mix", nt, "1000" if full else "300"]),
        Workload("realloc-growth 1M", ["realloc_growth", "600" if full else "200", "1M", "64"],
                 extra={"move_frac": "realloc-growth 1M: fraction of reallocs that moved"}),
    ]
    # 48M: one block above the page heap's surplus trigger (32 MiB + the bytes in use).
    for size, iters in (("128K", 200000), ("1M", 20000), ("4M", 5000), ("48M", 300)):
        w.append(Workload(f"large-churn {size}", ["large_churn", size, str(iters * (3 if full else 1))],
                          extra={"minflt_per_iter": f"large-churn {size}: minor faults per iteration"}))
    w.append(Workload("8B objects held", ["small_overhead", "10000000" if full else "2000000", "8"],
                      extra={"heap_ratio": "8 B objects: RSS growth / bytes requested",
                             "rss_after_free_mib": "8 B objects: RSS after all were freed, MiB"}))
    # The design's two-phase program (300 MB per phase, 16..512-byte objects), then a quiet
    # second of pure thread-cache hits; and again with five seconds of sleep, background
    # release on (ours: TCMALLOC_BACKGROUND_RELEASE; jemalloc: its background_thread).
    phase_extra = {"rss_phase2_mib": "two-phase: RSS after phase 2, MiB",
                   "rss_idle_mib": "two-phase: RSS after the quiet period, MiB",
                   "idle_s_to_20mib": "two-phase: seconds of quiet until RSS <= 20 MiB (-1 never)"}
    w.append(Workload("two-phase, then cache hits", ["phase", "300", "hits"], throughput=False,
                      extra={k: v.replace("two-phase", "two-phase+hits") for k, v in phase_extra.items()}))
    w.append(Workload("two-phase, then sleep (bg)", ["phase", "300", "sleep"], throughput=False,
                      extra={k: v.replace("two-phase", "two-phase+sleep, background on") for k, v in phase_extra.items()},
                      env={"TCMALLOC_BACKGROUND_RELEASE": "1", "MALLOC_CONF": "background_thread:true"}))
    # A burst of 256 MiB of 64..3904-byte blocks, freed, then 3 s of light traffic past the
    # CPU's cache (300 blocks of each of 16 sizes every 10 ms): what the middle tier keeps.
    w.append(Workload("burst, then light batches", ["light_batches", "256", "3", "300"], throughput=False,
                      extra={"rss_burst_mib": "light batches: RSS after the burst was freed, MiB",
                             "rss_light_mib": "light batches: RSS after 3 s of light traffic, MiB"}))
    # A key-value server that loads 1M keys, deletes them and serves light traffic for 2 s.
    w.append(Workload("kv-server 1M keys", ["kv_server", "1M", "2000"], throughput=False,
                      extra={"rss_loaded_mib": "kv-server: RSS loaded, MiB",
                             "rss_served_mib": "kv-server: RSS after 2 s of light traffic, MiB",
                             "served_frac": "kv-server: RSS served / RSS loaded"}))
    # Huge pages (issue 13): a 1 GiB heap of mixed small objects and a few large blocks (share
    # of its RSS not on huge pages); a TLB-bound random walk over 1 GiB of 64..256-byte nodes,
    # then 75% of them freed in random order (48 of 64 allocation-order groups) and a second
    # of light traffic: RSS over the bytes still in use, and the share of it on small pages.
    hp_mib = "1024"
    w.append(Workload("hugepage coverage 1G", ["hugepage", "coverage", hp_mib], throughput=False,
                      extra={"small_page_frac": "hugepage coverage 1G: heap RSS not on huge pages (1 - coverage)"}))
    w.append(Workload("hugepage TLB walk 1G", ["hugepage", "tlb", hp_mib, "1000"], throughput=False,
                      extra={"walk_ns_per_node": "TLB walk 1G: ns per node visited (random order)",
                             "rss_over_inuse": "TLB walk 1G, 75% freed + 1 s idle: heap RSS / bytes in use",
                             "after_small_page_frac": "TLB walk 1G, 75% freed + 1 s idle: RSS not on huge pages"}))
    # An allocation-heavy Python program (pymalloc on): peak RSS is the figure.
    w.append(Workload("python alloc mix", [system_python(), os.path.join(BENCH, "python_alloc.py"),
                                           "1.0" if full else "0.25"], throughput=False,
                      extra={"rss_end_mib": "python: RSS after everything was dropped, MiB"}))
    return w


# ---------------------------------------------------------------------------------------------
# Allocators


def lib_dirs():
    dirs = []
    try:
        arch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip()
        if arch:
            dirs.append(f"/usr/lib/{arch}")
    except OSError:
        pass
    return dirs + ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"]


def find_lib(names):
    for d in lib_dirs():
        for n in names:
            p = os.path.join(d, n)
            if os.path.exists(p):
                return p
    return None


def find_allocators(args):
    """Returns [(name, preload path or None)]; prints a line for each one skipped."""
    found = []
    # Named on the command line, so run even when --allocators lists others only (a variant
    # left out by a subset it was not added to would silently not be measured).
    asked = {add_variant(spec) for spec in getattr(args, "variant", None) or []}
    taken = {"glibc", *dict(PEERS), *our_variants()}
    for spec in args.extra:
        # A name already taken would put two libraries under one name: the samples and
        # tables are keyed by it, so one would silently shadow the other.
        name, sep, path = spec.partition("=")
        if not name or not sep or not path:
            sys.exit(f"run.py: --extra {spec!r}: expected NAME=PATH")
        if name in taken:
            sys.exit(f"run.py: --extra {spec!r}: {name} names an allocator already")
        taken.add(name)
        asked.add(name)
    ours = args.ours or os.path.join(ROOT, "build", "src", "libtcmalloc_minimal.so")
    if os.path.exists(ours):
        found += [(name, os.path.realpath(ours)) for name in our_variants()]
    else:
        log(f"skip ours: {ours} not found (build it, or pass --ours PATH)")
    found.append(("glibc", None))
    for name, libs in PEERS:
        p = find_lib(libs)
        if p:
            found.append((name, p))
        else:
            log(f"skip {name}: {libs[0]} not found (bash scripts/install-deps.sh installs it)")
    for spec in args.extra:
        name, _, path = spec.partition("=")
        if not os.path.exists(path):
            log(f"skip {name}: {path} not found")
        else:
            found.append((name, os.path.realpath(path)))
    if args.allocators:
        keep = args.allocators.split(",")
        found = [a for a in found if a[0] in keep or a[0] in asked]
    else:
        found = [a for a in found if a[0] not in OPT_IN]
    return found


def snapshot(lib, outdir):
    dst = os.path.join(outdir, "ours-" + os.path.basename(lib))
    shutil.copy2(lib, dst)
    return dst


def with_snapshots(allocs, outdir):
    """Our library is measured from a private copy in outdir: a rebuild during the run (ours
    is the one under development) would otherwise swap the allocator halfway, or catch it
    half-written. Every name it runs under gets the copy, also when "ours" itself is left
    out of --allocators and only a variant runs."""
    mine = {lib: snapshot(lib, outdir) for lib in {lib for n, lib in allocs if n in our_variants()}}
    return [(n, mine[lib] if n in our_variants() else lib) for n, lib in allocs]


def preload_env(path, name=None):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    # A variable a variant sets must not reach the others from the caller's environment
    # (an exported TCMALLOC_HARDENED=0 would make "ours" unhardened too).
    for variant_env in ALLOCATOR_ENV.values():
        for key in variant_env:
            env.pop(key, None)
    if path:
        env["LD_PRELOAD"] = path
    env.update(ALLOCATOR_ENV.get(name, {}))
    return env


# ---------------------------------------------------------------------------------------------
# Building


def build(args):
    """Returns the directory holding the workload binaries. Prefers the project's build tree
    (what scripts/demo.sh just built); falls back to building bench/ on its own, which needs
    neither the allocator nor its tests to compile."""
    if args.bin_dir:
        return os.path.abspath(args.bin_dir)
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    project = os.path.join(ROOT, "build")
    if os.path.exists(os.path.join(project, "CMakeCache.txt")):
        r = subprocess.run(["cmake", "--build", project, "--target", "bench_workloads"],
                           capture_output=True, text=True)
        if r.returncode == 0:
            return os.path.join(project, "bench")
        log("building the workloads in build/ failed; building bench/ on its own instead")
    own = os.path.join(ROOT, "out", "bench-build")
    for cmd in (["cmake", "-S", BENCH, "-B", own, "-DCMAKE_BUILD_TYPE=Release"] + gen,
                ["cmake", "--build", own]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"run.py: {' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")
    return own


# ---------------------------------------------------------------------------------------------
# Running and measuring


def parse_kv(text):
    """The last line of the form `key=value ...` a workload printed, as a dict of floats."""
    for line in reversed(text.strip().splitlines()):
        pairs = dict(p.split("=", 1) for p in line.split() if "=" in p)
        if "ops" in pairs:
            out = {}
            for k, v in pairs.items():
                try:
                    out[k] = float(v)
                except ValueError:
                    pass
            return out
    return None


def exit_text(rc):
    return signal.Signals(-rc).name if rc < 0 else f"exit {rc}"


def last_line(text):
    """The last non-empty line of a program's stderr, shortened: enough to recognise a CHECK
    failure or an abort message in a table footnote."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return lines[-1][:200] if lines else "(no output)"


def run_once(argv, env, timeout):
    """Runs one process; returns (metrics dict, error string or None). Uses wait4 so the
    figures (CPU time, peak RSS, minor faults) are this child's alone."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=out, stderr=err, env=env, stdin=subprocess.DEVNULL)
        killer = threading.Timer(timeout, p.kill)
        killer.start()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        killer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)  # already reaped: keep Popen from waiting
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    if p.returncode != 0:
        what = "timeout" if wall >= timeout and p.returncode == -signal.SIGKILL else exit_text(p.returncode)
        return None, f"{what}: {last_line(stderr)}"
    if "cannot be preloaded" in stderr:
        # ld.so ignores a preload it cannot load and runs glibc malloc instead: that must not
        # be reported as the allocator's figure.
        return None, "preload failed: " + stderr.strip().splitlines()[0]
    kv = parse_kv(stdout)
    if kv is None:
        return None, f"no result line in output: {stdout.strip()[-200:]}"
    # Peak RSS comes from the program (VmHWM): ru_maxrss would include this Python process,
    # whose high-water mark Linux carries over into the child across exec.
    hwm = kv.get("peak_rss_kib", -1)
    m = {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
         "maxrss_mib": (hwm if hwm > 0 else ru.ru_maxrss) / 1024.0, "minflt": float(ru.ru_minflt)}
    m.update({"prog_" + k: v for k, v in kv.items()})
    return m, None


def command_line(argv, lib, env=None):
    pre = "".join(f"{k}={v} " for k, v in (env or {}).items())
    pre += f"LD_PRELOAD={lib} " if lib else ""
    return pre + " ".join(argv)


class Progress:
    """One self-overwriting status line on a terminal; otherwise (a log file) the caller prints
    one plain line per workload and round."""

    def __init__(self, total):
        self.total, self.done, self.t0 = total, 0, time.monotonic()
        self.tty = sys.stderr.isatty()

    def step(self, label):
        self.done += 1
        if self.tty:
            el = time.monotonic() - self.t0
            eta = el / self.done * (self.total - self.done)
            sys.stderr.write(f"\r\033[K[{self.done}/{self.total} {el:4.0f}s, ~{eta:3.0f}s left] {label}")
            sys.stderr.flush()

    def line(self, msg):
        if self.tty:
            sys.stderr.write("\r\033[K")
        log(msg)


def run_order(n, row):
    """The order in which n allocators run in schedule row `row`: a Williams design, in
    which every allocator follows every other one equally often over a full period of rows
    (n rows for even n, 2n for odd n: each row and its reverse), and runs in every position.
    What ran just before matters on these VMs: the balloon's free page reporting hands
    free 2 MiB blocks back to the host, so a process that faults huge pages in right after
    one that used 4 KiB pages pays ~5x the system time of one that reuses huge pages
    another process has just freed (bench/README.md, twenty-sixth session). A plain rotation
    keeps the same neighbour in front of each allocator in every row."""
    first = [0]
    for t in range(1, n):
        first.append((t + 1) // 2 if t % 2 else n - t // 2)
    period = n if n % 2 == 0 else 2 * n
    row %= max(period, 1)
    order = [(x + row) % n for x in first]
    return order if row < n else order[::-1]


def run_timing(ws, allocs, bindir, rounds, timeout):
    """Returns samples {(workload, allocator): [metrics dict per round]} and failures
    {(workload, allocator): message}. A pair that failed once is not run again."""
    samples = {(w.name, a): [] for w in ws for a, _ in allocs}
    failures = {}
    prog = Progress(rounds * len(ws) * len(allocs))
    for r in range(rounds):
        t0 = time.monotonic()
        for i, w in enumerate(ws):
            # A new row of the schedule each round and workload, so no allocator always runs
            # right after the same neighbour (warm caches, frequency boosts, page cache state,
            # huge pages the host took back) or in the same position.
            walls = {}
            for name, lib in [allocs[j] for j in run_order(len(allocs), r + i)]:
                if (w.name, name) in failures:
                    prog.step(f"{w.name} / {name} (skipped: failed before)")
                    continue
                prog.step(f"round {r + 1}/{rounds}: {w.name} / {name}")
                argv = [w.argv[0] if os.path.isabs(w.argv[0]) else os.path.join(bindir, w.argv[0])] + w.argv[1:]
                env = preload_env(lib, name)
                env.update(w.env)
                m, err = run_once(argv, env, timeout)
                if err:
                    failures[(w.name, name)] = f"{err}\n    reproduce: {command_line(argv, lib, w.env)}"
                    prog.line(f"FAILED {w.name} under {name}: {err}")
                else:
                    samples[(w.name, name)].append(m)
                    walls[name] = m["wall_s"]
            if not prog.tty:  # a log file gets one line per workload instead of a status line
                log(f"  round {r + 1}/{rounds} [{i + 1}/{len(ws)}] {w.name}: "
                    + ", ".join(f"{n} {walls[n]:.3f}s" for n in walls))  # in the order they ran
        prog.line(f"round {r + 1}/{rounds} done in {time.monotonic() - t0:.1f} s")
    return samples, failures


def callgrind_ir(argv, env):
    with tempfile.TemporaryDirectory() as d:
        outf = os.path.join(d, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={outf}"] + argv
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0 or not os.path.exists(outf):
            # valgrind's own report buries the program's message; the program's last words
            # are in the lines without the ==pid== prefix.
            own = "\n".join(l for l in r.stderr.splitlines() if not l.startswith("=="))
            raise RuntimeError(f"{exit_text(r.returncode)}: {last_line(own)}")
        with open(outf) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
    raise RuntimeError("no instruction total in callgrind output")


def run_callgrind(allocs, bindir, sizes):
    """Instructions per malloc+free pair: (Ir(N2) - Ir(N1)) / (N2 - N1) pairs, so program
    start-up, allocator initialisation and the first refills cancel out. Deterministic, so
    one run each suffices; the runs go two at a time since their timing does not matter."""
    cases = []
    for s in sizes:
        cases.append((f"pair {human_size(s)}", ["fastpath", "pair", str(s)], 100000, 300000, 1))
        cases.append((f"batch {human_size(s)}", ["fastpath", "batch", str(s)], 100, 300, 1000))
    jobs = [(c, a) for c in cases for a in allocs]
    results, failures = {}, {}
    lock = threading.Lock()
    done = [0]

    def one(job):
        (label, argv, n1, n2, per), (name, lib) = job
        base = [os.path.join(bindir, argv[0])] + argv[1:]
        try:
            i1 = callgrind_ir(base + [str(n1)], preload_env(lib, name))
            i2 = callgrind_ir(base + [str(n2)], preload_env(lib, name))
            with lock:
                results[(label, name)] = (i2 - i1) / ((n2 - n1) * per)
        except RuntimeError as e:
            with lock:
                cmd = command_line(["valgrind", "--tool=callgrind"] + base + [str(n2)], lib)
                failures[(label, name)] = f"callgrind: {e}\n    reproduce: {cmd}"
        with lock:
            done[0] += 1
            log(f"  callgrind {done[0]}/{len(jobs)}: {label} / {name}")

    log(f"callgrind: {len(jobs)} measurements (two runs each)")
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(2, os.cpu_count() or 1))) as ex:
        list(ex.map(one, jobs))
    return [c[0] for c in cases], results, failures


# ---------------------------------------------------------------------------------------------
# Reporting


def fmt(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def table(title, note, rows, names, ref):
    """rows: [(label, {alloc: value or error str})]. Each non-reference cell also shows
    value / reference value."""
    out = [f"### {title}", "", note, "", "| workload | " + " | ".join(names) + " |",
           "|---|" + "---:|" * len(names)]
    for label, vals in rows:
        cells = []
        base = vals.get(ref)
        for n in names:
            v = vals.get(n)
            if isinstance(v, str):
                cells.append(v)
            elif v is None:
                cells.append("—")
            elif n != ref and isinstance(base, (int, float)) and base:
                cells.append(f"{fmt(v)} ({v / base:.2f}×)")
            else:
                cells.append(fmt(v))
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def medians(samples, key):
    out = {}
    for k, ms in samples.items():
        vals = [m[key] for m in ms if key in m]
        out[k] = statistics.median(vals) if vals else None
    return out


def report(ws, allocs, samples, failures, cg, meta):
    names = [a for a, _ in allocs]
    ref = REFERENCE if REFERENCE in names else names[0]
    ref_name = "ours" if ref == REFERENCE else f"{ref}'s (ours was not available)"
    ref_note = f"Ratio in brackets: that allocator's figure divided by {ref_name}."
    how = f"{meta['mode']}, {meta['rounds']} rounds, medians" if ws else meta["mode"]
    parts = [f"## Allocator benchmark ({how})", "",
             f"{meta['when']} on {meta['cpus']} CPUs, {meta['uname']}. Allocators: "
             + ", ".join(f"{n} ({lib or 'no preload'})" for n, lib in allocs) + ".",
             f"Command: `{meta['command']}`. Other processes used {meta['others_cpus']:.2f} CPUs "
             "on average meanwhile"
             + (": wall-clock figures are unreliable." if meta["others_cpus"] > 0.25 else "."),
             "", ref_note, ""]

    def cell(w, a, key, scale=1.0):
        if (w.name, a) in failures:
            return "FAIL"
        v = medians_cache[key].get((w.name, a))
        return None if v is None else v * scale

    keys = ["prog_ops_per_wall_s", "prog_ops_per_cpu_s", "wall_s", "cpu_s", "maxrss_mib", "minflt"]
    keys += sorted({"prog_" + k for w in ws for k in w.extra})
    medians_cache = {k: medians(samples, k) for k in keys}

    def rows(key, scale=1.0, pred=lambda w: True):
        return [(w.name, {a: cell(w, a, key, scale) for a in names}) for w in ws if pred(w)]

    if ws:
        parts.append(table("Throughput, million ops per wall-second (higher is better)",
                           "As each workload measures its own timed section; an op is one allocator call "
                           "(pair/batch: one malloc+free pair; cache-*: one write; stl-mix: one key).",
                           rows("prog_ops_per_wall_s", 1e-6, lambda w: w.throughput), names, ref))
        parts.append(table("t-test: million ops per CPU-second (higher is better)",
                           "CPU time of all threads: exposes spinning that wall time on 2 cores hides.",
                           rows("prog_ops_per_cpu_s", 1e-6, lambda w: w.name.startswith("t-test")), names, ref))
        parts.append(table("Process wall time, s (lower is better)", "Whole process, start to exit.",
                           rows("wall_s"), names, ref))
        parts.append(table("Process CPU time, s (lower is better)", "User + system, from wait4.",
                           rows("cpu_s"), names, ref))
        parts.append(table("Peak RSS, MiB (lower is better)", "VmHWM of the workload process, read "
                           "by the workload just before it exits.",
                           rows("maxrss_mib"), names, ref))
        parts.append(table("Minor page faults (lower is better)", "ru_minflt from wait4: pages touched "
                           "for the first time, including ones the allocator gave back and took again.",
                           rows("minflt"), names, ref))
        extra_rows = []
        for w in ws:
            for k, label in w.extra.items():
                extra_rows.append((label, {a: cell(w, a, "prog_" + k) for a in names}))
        if extra_rows:
            parts.append(table("Workload-specific figures (lower is better)", "As the workload reports them.",
                               extra_rows, names, ref))
    if cg is not None:
        labels, res, cg_fail = cg
        cg_rows = [(lab, {a: "FAIL" if (lab, a) in cg_fail else res.get((lab, a)) for a in names})
                   for lab in labels]
        parts.append(table("Instructions per malloc+free pair under callgrind (lower is better)",
                           "(Ir(N2) − Ir(N1)) / (N2 − N1): start-up cancels; the loop's own few "
                           "instructions are included. Deterministic.", cg_rows, names, ref))
        failures = dict(failures)
        failures.update(cg_fail)
    if failures:
        parts.append("### Failures\n")
        for (w, a), e in sorted(failures.items()):
            parts.append(f"- **{w}** under **{a}**: {e}")
        parts.append("")
    return "\n".join(parts)


def busy_cpu_s():
    """CPU seconds all CPUs spent busy since boot (everything in /proc/stat but idle and iowait;
    steal counts as busy: the hypervisor gave the time to someone else)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = v
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_cpu_s():
    """CPU seconds of this process and every child it has reaped."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def plots(ws, allocs, samples, outdir):
    """PNG plots if matplotlib is available; returns the files written."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib not importable: no plots (python3-matplotlib provides it)")
        return []
    names = [a for a, _ in allocs]
    med = medians(samples, "prog_ops_per_wall_s")
    files = []
    # t-test1, as the design doc draws it: ops per wall-second against max size with one panel
    # per thread count, and ops per CPU-second against threads with one panel per max size.
    tt = {}  # (threads, max size) -> workload name
    for w in ws:
        m = re.match(r"t-test1 (\d+)t ", w.name)
        if m:
            tt[(int(m.group(1)), int(w.argv[3]))] = w.name
    threads = sorted({t for t, _ in tt})
    sizes = sorted({s for _, s in tt})
    cpu = medians(samples, "prog_ops_per_cpu_s")

    def grid(panels, title, xlabel, ylabel, key_of, xs_all, logx, values, fname):
        cols = min(4, len(panels))
        rows = (len(panels) + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.6 * rows), squeeze=False)
        for ax, p in zip(axes.flat, panels):
            for a in names:
                pts = [(x, values.get((tt.get(key_of(p, x)), a))) for x in xs_all]
                pts = [(x, y / 1e6) for x, y in pts if y]
                ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=a)
            if logx:
                ax.set_xscale("log", base=2)
            else:
                ax.set_xticks(xs_all)
            ax.set_ylim(bottom=0)  # differences look as big as they are
            ax.set_title(title(p))
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3)
        for ax in list(axes.flat)[len(panels):]:
            ax.set_visible(False)
        axes[0][0].legend(fontsize=8)
        fig.tight_layout()
        f = os.path.join(outdir, fname)
        fig.savefig(f, dpi=100)
        plt.close(fig)
        files.append(f)

    if len(sizes) > 1:
        grid(threads, lambda t: f"t-test1, {t} thread{'s' if t > 1 else ''}",
             "max allocation size, bytes", "million ops / wall-second",
             lambda t, s: (t, s), sizes, True, med, "t-test1.png")
    if len(threads) > 1:
        grid(sizes, lambda s: f"t-test1, max size {human_size(s)}", "threads",
             "million ops / CPU-second", lambda s, t: (t, s), threads, False, cpu,
             "t-test1-cpu.png")
    # Summary: throughput ratio to the reference per workload.
    ref = REFERENCE if REFERENCE in names else names[0]
    labels = [w.name for w in ws if w.throughput and med.get((w.name, ref))]
    others = [a for a in names if a != ref]
    if labels and others:
        fig, ax = plt.subplots(figsize=(9, 0.32 * len(labels) * (len(others) + 1) / 2 + 1.5))
        h = 0.8 / len(others)
        for j, a in enumerate(others):
            ys = [i + j * h for i in range(len(labels))]
            xs = [(med.get((n, a)) or float("nan")) / med[(n, ref)] for n in labels]
            ax.barh(ys, xs, height=h, label=a)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yticks([i + 0.4 - h / 2 for i in range(len(labels))])
        ax.set_yticklabels(labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(f"throughput / {'ours' if ref == REFERENCE else ref + ' throughput'}"
                      f" (right of 1 = faster than {ref})")
        ax.legend(fontsize=8)
        fig.tight_layout()
        f = os.path.join(outdir, "summary.png")
        fig.savefig(f, dpi=100)
        plt.close(fig)
        files.append(f)
    return files


# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", dest="mode", action="store_const", const="quick",
                   help="short runs (the default; about a minute on 2 cores)")
    g.add_argument("--full", dest="mode", action="store_const", const="full",
                   help="design-doc sweep: threads 1..N, max sizes 64 B..128 KiB, 10^6 ops/thread")
    ap.add_argument("--callgrind", action="store_true",
                    help="also measure instructions per malloc+free pair under valgrind --tool=callgrind")
    ap.add_argument("--callgrind-only", action="store_true", help="only the callgrind measurements")
    ap.add_argument("--ours", help="our libtcmalloc_minimal.so (default: build/src/libtcmalloc_minimal.so)")
    ap.add_argument("--extra", action="append", default=[], metavar="NAME=PATH",
                    help="one more allocator to preload (repeatable)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:VAR=VALUE[,VAR=VALUE]",
                    help="our library once more under NAME with these environment settings "
                    "(repeatable), e.g. ours-8m:TCMALLOC_MAX_PER_CPU_CACHE_SIZE=8388608")
    ap.add_argument("--allocators", help="comma-separated subset, e.g. ours,glibc (--extra and "
                    "--variant ones run too); ours-unhardened (TCMALLOC_HARDENED=0) and "
                    "ours-no-hardening (that and TCMALLOC_GUARDED_SAMPLE_RATE=0) run only when named here")
    ap.add_argument("--filter", help="regex: only workloads whose name matches")
    ap.add_argument("--rounds", type=int, help="rounds (default 5)")
    ap.add_argument("--threads", help="comma-separated thread counts (default 1,2 quick; 1..2*CPUs full)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per run before it counts as hung")
    ap.add_argument("--bin-dir", help="use workload binaries from here instead of building them")
    ap.add_argument("--out", help="Markdown results file (default out/bench/<time>/results.md)")
    ap.add_argument("--list", action="store_true", help="print the workloads and exit")
    args = ap.parse_args()
    mode = args.mode or "quick"
    cpus = os.cpu_count() or 1
    if args.threads:
        threads = [int(t) for t in args.threads.split(",")]
    else:
        threads = [1, 2] if mode == "quick" else list(range(1, 2 * cpus + 1))
    rounds = args.rounds or 5
    ws = workloads(mode, threads)
    if args.filter:
        ws = [w for w in ws if re.search(args.filter, w.name)]
    if args.list:
        for w in ws:
            env = "".join(f"{k}={v} " for k, v in w.env.items())
            print(f"{w.name:28s} {env}{' '.join(w.argv)}")
        return 0

    stamp = time.strftime("%Y%m%d-%H%M%S")
    outfile = args.out or os.path.join(ROOT, "out", "bench", stamp, "results.md")
    outdir = os.path.dirname(os.path.abspath(outfile))
    os.makedirs(outdir, exist_ok=True)

    allocs = with_snapshots(find_allocators(args), outdir)
    log("allocators: " + ", ".join(f"{n} ({lib or 'no preload'})" for n, lib in allocs))
    bindir = build(args)
    missing = [p for p in PROGRAMS if not os.path.exists(os.path.join(bindir, p))]
    if missing:
        sys.exit(f"run.py: missing workload programs in {bindir}: {' '.join(missing)}")

    # A library ld.so cannot load is ignored with a warning and glibc runs instead: drop such
    # an allocator now rather than report glibc's figures under its name.
    usable = []
    for name, lib in allocs:
        _, err = run_once([os.path.join(bindir, "fastpath"), "pair", "32", "1"], preload_env(lib, name), 30)
        if err and err.startswith("preload failed"):
            log(f"skip {name}: {err}")
        else:
            usable.append((name, lib))
    allocs = usable

    busy0, mine0, t0 = busy_cpu_s(), own_cpu_s(), time.monotonic()
    samples, failures = {}, {}
    if args.callgrind_only:
        ws = []
    else:
        log(f"{mode}: {len(ws)} workloads x {len(allocs)} allocators x {rounds} rounds")
        samples, failures = run_timing(ws, allocs, bindir, rounds, args.timeout)
    cg = None
    if args.callgrind or args.callgrind_only:
        if shutil.which("valgrind"):
            cg = run_callgrind(allocs, bindir, [32] if mode == "quick" else [16, 32, 256, 4096])
        else:
            log("skip callgrind: valgrind not found (bash scripts/install-deps.sh installs it)")

    meta = {"mode": mode if not args.callgrind_only else "callgrind only", "rounds": rounds,
            "when": time.strftime("%Y-%m-%d %H:%M"), "cpus": cpus,
            "uname": " ".join(os.uname()[i] for i in (0, 2, 4)),
            "command": "bench/run.py " + " ".join(sys.argv[1:]),
            "others_cpus": ((busy_cpu_s() - busy0) - (own_cpu_s() - mine0)) / (time.monotonic() - t0)}
    text = report(ws, allocs, samples, failures, cg, meta)
    pngs = plots(ws, allocs, samples, outdir) if ws else []
    with open(outfile, "w") as f:
        f.write(text + "\n")
        for p in pngs:
            f.write(f"![{os.path.basename(p)}]({os.path.basename(p)})\n")
    with open(os.path.join(outdir, "raw.json"), "w") as f:
        json.dump({"meta": meta, "allocators": allocs,
                   "workloads": [{"name": w.name, "argv": w.argv} for w in ws],
                   "samples": {f"{w} | {a}": v for (w, a), v in samples.items()},
                   "failures": {f"{w} | {a}": v for (w, a), v in failures.items()},
                   "callgrind": {f"{w} | {a}": v for (w, a), v in (cg[1].items() if cg else [])}},
                  f, indent=1)
    print(text)
    log(f"results: {outfile}" + "".join(f"\nplot: {p}" for p in pngs))
    return 1 if failures or (cg and cg[2]) else 0


if __name__ == "__main__":
    sys.exit(main())
