#!/usr/bin/env python3
"""End-to-end tests of the heap profiler (libtcmalloc) and of heap sampling, read with the
real pprof (github.com/google/pprof, installed by scripts/install-deps.sh).

Usage: profiler_test.py --workload=... --workload-plain=... --sample-minimal=...
       --sample-full=... --pair-minimal=... --pair-full=... --libtcmalloc=...
       --build-dir=... --source-dir=... <TestCase>
where <TestCase> is one of Pprof, Triggers, Sampling, Callgrind, Package (each is one ctest
test, so they run in parallel).
"""
import argparse
import glob
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

ARGS = None
MiB = 1 << 20

# Environment variables that change what the programs do: none leaks in from the caller.
_OUR_VARS = ("HEAPPROFILE", "LD_PRELOAD", "MALLOCSTATS")


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("TCMALLOC_") or k.startswith("HEAP_PROFILE_") or k in _OUR_VARS)}
    env.update(extra or {})
    return env


def run(cmd, env=None, timeout=120, check=True):
    p = subprocess.run([str(c) for c in cmd], env=clean_env(env), capture_output=True, text=True,
                       timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd} exited {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}")
    return p


def find_pprof():
    for c in (shutil.which("pprof"), "/usr/local/bin/pprof", os.path.expanduser("~/.local/bin/pprof"),
              os.path.expanduser("~/go/bin/pprof")):
        if c and os.access(c, os.X_OK):
            return c
    raise AssertionError("pprof not found: run scripts/install-deps.sh (it builds github.com/google/pprof)")


_ROW = re.compile(r"^\s*(\S+)\s+(-?[\d.]+)%\s+(-?[\d.]+)%\s+(\S+)\s+(-?[\d.]+)%\s+(.+?)\s*$")


def number(field):
    """A pprof -top value with -unit=B ("41943360B") or an object count ("81921")."""
    return int(float(field.rstrip("B") or 0))


def pprof_top(binary, profile, sample_index):
    """{function: (flat, cum)} from `pprof -top`, in bytes (or objects), nothing dropped."""
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([find_pprof(), "-top", f"-sample_index={sample_index}", "-unit=B",
                            "-nodefraction=0", "-nodecount=100000", str(binary), str(profile)],
                           capture_output=True, text=True, timeout=120,
                           env=clean_env({"PPROF_TMPDIR": tmp, "HOME": tmp}))
    if p.returncode != 0:
        raise AssertionError(f"pprof failed on {profile}: {p.stderr}")
    rows = {}
    for line in p.stdout.splitlines():
        m = _ROW.match(line)
        if m:
            rows[m.group(6)] = (number(m.group(1)), number(m.group(4)))
    return rows, p.stdout


_DUMP = re.compile(r"^Dumping heap profile to (\S+) \((.*)\)$")


def dumps(stderr):
    """[(file, reason)] from the profiler's log lines, in order."""
    return [m.groups() for m in map(_DUMP.match, stderr.splitlines()) if m]


def header(path):
    """(inuse objs, inuse bytes, alloc objs, alloc bytes, label) of a profile file."""
    with open(path) as f:
        first = f.readline()
    m = re.match(r"heap profile: *(\d+): *(\d+) \[ *(\d+): *(\d+)\] @ (\S+)", first)
    if not m:
        raise AssertionError(f"{path}: bad first line {first!r}")
    return tuple(int(x) for x in m.groups()[:4]) + (m.group(5),)


class ProfilerCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tcm_profiler_")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.prefix = os.path.join(self.tmp, "prof")


class Pprof(ProfilerCase):
    """`pprof -top` on a profile of the workload names its allocating functions with what they
    really hold (to within 10%; every allocation is recorded, so it is exact in fact)."""

    # What `profile_workload hold` holds at exit, from each function (its pointer arrays too).
    HOLDS = {
        "alloc_big": 40 * MiB + 40 * 8,             # 40 x 1 MiB, plus calloc(40, 8)
        "alloc_small": 81920 * 128 + 81920 * 8,     # 81920 x new char[128], plus new char*[81920]
    }
    CHURN = 20 * MiB                                # churn(): allocated and freed

    def check_profile(self, binary, profile):
        rows, text = pprof_top(binary, profile, "inuse_space")
        print(f"pprof -top -sample_index=inuse_space {os.path.basename(binary)}:\n{text}")
        for fn, truth in self.HOLDS.items():
            self.assertIn(fn, rows, text)
            flat, cum = rows[fn]
            self.assertLessEqual(abs(flat - truth), truth / 10, f"{fn} flat {flat} vs {truth}\n{text}")
            self.assertLessEqual(abs(cum - truth), truth / 10, f"{fn} cum {cum} vs {truth}\n{text}")
        self.assertEqual(rows.get("churn", (0, 0))[0], 0, text)  # nothing of it is in use
        main_cum = rows["main"][1]
        self.assertGreaterEqual(main_cum, sum(self.HOLDS.values()), text)
        rows, text = pprof_top(binary, profile, "alloc_space")
        self.assertLessEqual(abs(rows["churn"][0] - self.CHURN), self.CHURN / 10, text)
        rows, text = pprof_top(binary, profile, "inuse_objects")
        self.assertEqual(rows["alloc_small"][0], 81921, text)
        self.assertEqual(rows["alloc_big"][0], 41, text)

    def profile_run(self, binary, env):
        p = run([binary, "hold"], env={"HEAPPROFILE": self.prefix, **env})
        self.assertEqual(p.stderr.count("Starting tracking the heap"), 1, p.stderr)
        self.assertEqual(dumps(p.stderr), [(self.prefix + ".0001.heap", "Exiting, 50 MB in use")], p.stderr)
        profile = self.prefix + ".0001.heap"
        self.assertEqual(header(profile)[4], "heapprofile")
        with open(profile) as f:
            self.assertIn("\nMAPPED_LIBRARIES:\n", f.read())
        return profile

    def test_linked_program(self):
        self.check_profile(ARGS.workload, self.profile_run(ARGS.workload, {}))

    def test_unmodified_program_with_ld_preload(self):
        profile = self.profile_run(ARGS.workload_plain, {"LD_PRELOAD": ARGS.libtcmalloc})
        self.check_profile(ARGS.workload_plain, profile)

    def test_png_picture(self):
        # pprof draws with Graphviz: without `dot` it fails ("Is Graphviz installed?").
        self.assertIsNotNone(shutil.which("dot"), "graphviz's dot is missing: run scripts/install-deps.sh")
        profile = self.profile_run(ARGS.workload, {})
        out = os.path.join(self.tmp, "out.png")
        with open(out, "wb") as f:
            p = subprocess.run([find_pprof(), "-png", "-sample_index=inuse_space", ARGS.workload, profile],
                               stdout=f, stderr=subprocess.PIPE, timeout=120, env=clean_env({"HOME": self.tmp}))
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_nothing_without_heapprofile(self):
        p = run([ARGS.workload_plain, "hold"], env={"LD_PRELOAD": ARGS.libtcmalloc})
        self.assertNotIn("heap", p.stderr)
        self.assertEqual(os.listdir(self.tmp), [])


class Triggers(ProfilerCase):
    """Dumps every HEAP_PROFILE_ALLOCATION_INTERVAL bytes, every HEAP_PROFILE_INUSE_INTERVAL of
    in-use growth, every HEAP_PROFILE_TIME_INTERVAL seconds, at exit; file names; log lines."""

    def run_workload(self, args, env):
        p = run([ARGS.workload, *args], env={"HEAPPROFILE": self.prefix, **env})
        self.assertEqual(p.stderr.count("Starting tracking the heap"), 1, p.stderr)
        ds = dumps(p.stderr)
        # Files are numbered in order, each is complete, and the last dump is the exit dump.
        for i, (path, _) in enumerate(ds, 1):
            self.assertEqual(path, f"{self.prefix}.{i:04d}.heap")
            self.assertEqual(header(path)[4], "heapprofile")
        self.assertTrue(ds and ds[-1][1].startswith("Exiting"), p.stderr)
        return ds[:-1], p

    def test_allocation_interval(self):
        for value in ("10485760", "10M"):
            with self.subTest(value=value):
                for f in glob.glob(self.prefix + "*"):
                    os.unlink(f)
                ds, p = self.run_workload(["churn", "50"], {"HEAP_PROFILE_ALLOCATION_INTERVAL": value})
                self.assertGreaterEqual(len(ds), 4, p.stderr)
                for _, reason in ds:
                    self.assertRegex(reason, r"^\d+ MB allocated cumulatively, \d+ MB currently in use$")
                cumulative = [int(r.split()[0]) for _, r in ds]
                self.assertEqual(cumulative, sorted(cumulative))
                self.assertGreaterEqual(cumulative[-1], 40)

    def test_inuse_interval(self):
        ds, p = self.run_workload(["grow", "30"], {"HEAP_PROFILE_INUSE_INTERVAL": "5M"})
        self.assertGreaterEqual(len(ds), 4, p.stderr)
        inuse = [int(re.match(r"^(\d+) MB currently in use$", r).group(1)) for _, r in ds]
        self.assertEqual(inuse, sorted(inuse))
        # Each dump comes once in-use bytes passed the previous high-water mark by 5 MiB.
        for a, b in zip(inuse, inuse[1:]):
            self.assertGreaterEqual(b - a, 5)
        self.assertGreaterEqual(header(ds[-1][0])[1], 25 * MiB)

    def test_time_interval(self):
        ds, p = self.run_workload(["timed", "2600"], {"HEAP_PROFILE_TIME_INTERVAL": "1"})
        self.assertGreaterEqual(len(ds), 2, p.stderr)
        for _, reason in ds:
            self.assertRegex(reason, r"^\d+ sec since the last dump$")

    def test_defaults_dump_only_at_exit(self):
        ds, p = self.run_workload(["churn", "50"], {})
        self.assertEqual(ds, [], p.stderr)

    def test_garbage_warns_once_and_uses_the_default(self):
        bad = {"HEAP_PROFILE_ALLOCATION_INTERVAL": "lots", "HEAP_PROFILE_INUSE_INTERVAL": "-3",
               "HEAP_PROFILE_TIME_INTERVAL": "1.5s"}
        ds, p = self.run_workload(["churn", "50"], bad)
        self.assertEqual(ds, [], p.stderr)  # 1 GiB / 100 MiB / never: no interval dump
        for name, value in bad.items():
            warnings = [l for l in p.stderr.splitlines() if name in l]
            self.assertEqual(len(warnings), 1, p.stderr)
            self.assertIn(f"ignoring {name}={value}", warnings[0])
            self.assertIn("using the default", warnings[0])

    def test_forked_child_writes_its_own_files(self):
        p = run([ARGS.workload, "fork"], env={"HEAPPROFILE": self.prefix})
        child = int(re.search(r"child (\d+)", p.stdout).group(1))
        child_file = f"{self.prefix}_{child}.0001.heap"
        parent_file = f"{self.prefix}.0001.heap"
        self.assertEqual(p.stderr.count("Starting tracking the heap"), 1, p.stderr)
        self.assertEqual(sorted(dumps(p.stderr)),
                         sorted([(child_file, "Exiting, 5 MB in use"), (parent_file, "Exiting, 2 MB in use")]),
                         p.stderr)
        self.assertEqual(sorted(os.listdir(self.tmp)), sorted(map(os.path.basename, [child_file, parent_file])))
        rows, text = pprof_top(ARGS.workload, child_file, "inuse_space")
        self.assertEqual(rows["child_alloc"][0], 3 * MiB, text)      # the child's own
        self.assertEqual(rows["alloc_big"][0], 2 * MiB + 16, text)   # inherited from the parent
        rows, text = pprof_top(ARGS.workload, parent_file, "inuse_space")
        self.assertNotIn("child_alloc", rows, text)

    def test_unwritable_prefix_is_reported_not_fatal(self):
        p = run([ARGS.workload, "churn", "50"],
                env={"HEAPPROFILE": "/nonexistent/dir/prof", "HEAP_PROFILE_ALLOCATION_INTERVAL": "10M"})
        self.assertIn("cannot create /nonexistent/dir/prof.0001.heap", p.stderr)
        # One failure per trigger (5 intervals and the exit), not one per later allocation.
        self.assertLessEqual(p.stderr.count("cannot create"), 7, p.stderr)


class Sampling(ProfilerCase):
    """Heap sampling's estimate per stack is within the statistical bound of the sample rate.

    With TCMALLOC_SAMPLE_PARAMETER = T, the gaps between sample points are exponential with
    mean T: the points form a Poisson process over the allocated bytes. An allocation of s
    bytes is sampled iff it contains a point, with probability p = 1 - exp(-s/T),
    independently of every other allocation (the process is memoryless). GetHeapSample lists
    each live sample with its size; the estimate of the bytes a function holds is the sum
    over its samples of s / p(s). For n objects of size s, K ~ Binomial(n, p) are sampled:
        estimate = K s / p,   E[estimate] = n s (unbiased),
        SD[estimate] = (s/p) sqrt(n p (1-p)) = s sqrt(n (1-p) / p).
    The bound: the estimate must lie in the central 1 - 6.3e-5 of its distribution, the mass
    within 4 SD of a normal. Where K is large and p small (tiny and medium objects) that is
    +-4 SD; we take the quantiles of the exact binomial instead, because where p is near 1
    (100 KB objects at T = 16 KiB: p = 0.998, about 0.2 of 100 missed) the distribution is so
    skewed that a 4 SD normal bound (under one object) would fail a correct sampler 2% of
    the time. A correct sampler fails a check with probability about 6e-5.
    pprof applies the same 1/p scaling itself to a heap_v2/<T> profile, so its -top figures
    are held to the same interval (plus one byte per sample: it truncates each to whole bytes).
    """

    ALPHA = math.erfc(4 / math.sqrt(2))  # two-sided mass beyond 4 SD of a normal: 6.3e-5

    @staticmethod
    def binomial_interval(n, p, alpha):
        """(k_lo, k_hi): P(K < k_lo) <= alpha/2 and P(K > k_hi) <= alpha/2 for K ~ B(n, p)."""
        if p >= 1.0:
            return n, n
        mean, sd = n * p, math.sqrt(n * p * (1 - p))
        lo, hi = max(0, int(mean - 12 * sd) - 10), min(n, int(mean + 12 * sd) + 10)  # the rest is < 1e-30
        log_p, log_q, log_nf = math.log(p), math.log1p(-p), math.lgamma(n + 1)
        pmf = [math.exp(log_nf - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_p + (n - k) * log_q)
               for k in range(lo, hi + 1)]
        k_lo, acc = lo, 0.0
        for i, v in enumerate(pmf):
            if acc + v > alpha / 2:
                k_lo = lo + i
                break
            acc += v
        k_hi, acc = hi, 0.0
        for i, v in enumerate(reversed(pmf)):
            if acc + v > alpha / 2:
                k_hi = hi - i
                break
            acc += v
        return k_lo, k_hi

    PERIOD = 16384

    def symbols(self, binary, stdout):
        """{name: (start, end)} of the workload's functions at run time (it prints where each
        one is; nm gives the size)."""
        where = {}
        for line in stdout.splitlines():
            _, name, addr, size, count = line.split()
            where[name] = (int(addr, 16), int(size), int(count))
        nm = subprocess.run(["nm", "-S", "--defined-only", str(binary)], capture_output=True, text=True,
                            check=True).stdout
        sizes = {}
        for line in nm.splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[3] in where:
                sizes[parts[3]] = int(parts[1], 16)
        return {name: (addr, addr + sizes[name], s, n) for name, (addr, s, n) in where.items()}

    def check(self, binary):
        out = os.path.join(self.tmp, "sample.heap")
        p = run([binary, out], env={"TCMALLOC_SAMPLE_PARAMETER": str(self.PERIOD)})
        fns = self.symbols(binary, p.stdout)
        hdr = header(out)
        self.assertEqual(hdr[4], f"heap_v2/{self.PERIOD}")
        estimate = {name: 0.0 for name in fns}
        samples = {name: 0 for name in fns}
        with open(out) as f:
            lines = f.read().split("\nMAPPED_LIBRARIES:")[0].splitlines()[1:]
        for line in lines:
            counts, _, stack = line.partition("@")
            size = int(counts.split(":")[1].split()[0])
            leaf = int(stack.split()[0], 16) - 1  # a return address: step back into the call
            for name, (lo, hi, _, _) in fns.items():
                if lo <= leaf < hi:
                    estimate[name] += size / (1 - math.exp(-size / self.PERIOD))
                    samples[name] += 1
        rows, text = pprof_top(binary, out, "inuse_space")
        print(f"{os.path.basename(binary)}, TCMALLOC_SAMPLE_PARAMETER={self.PERIOD}:")
        print(f"  {'function':12} {'samples':>7} {'true bytes':>11} {'estimate':>11} {'pprof':>11}"
              f" {'4 SD':>9}   accepted estimates")
        for name, (_, _, s, n) in fns.items():
            truth = s * n
            p = 1 - math.exp(-s / self.PERIOD)
            k_lo, k_hi = self.binomial_interval(n, p, self.ALPHA)
            lo, hi = k_lo * s / p, k_hi * s / p
            sd4 = 4 * s * math.sqrt(n * (1 - p) / p)
            got_pprof = rows.get(name, (0, 0))[0]
            print(f"  {name:12} {samples[name]:7} {truth:11} {estimate[name]:11.0f} {got_pprof:11} {sd4:9.0f}"
                  f"   [{lo:.0f}, {hi:.0f}]")
            self.assertTrue(lo - 1 <= estimate[name] <= hi + 1, f"{name}: estimate {estimate[name]:.0f}")
            slack = samples[name] + 1
            self.assertTrue(lo - slack <= got_pprof <= hi + slack, f"{name}: pprof says {got_pprof}\n{text}")

    def test_minimal_library(self):
        self.check(ARGS.sample_minimal)

    def test_full_library(self):
        self.check(ARGS.sample_full)


class Callgrind(ProfilerCase):
    """The malloc+free fast path did not get slower: instructions per 32-byte pair, counted by
    callgrind (deterministic), with sampling off and the profiler not running, in both
    libraries. Under valgrind the per-thread front end runs (no rseq), so this is its count:
    59.3 a pair, loop included, with the lists as one array per field (an array of 32-byte
    list structs cost a shift and an add in both malloc and free: 61.5), and 64.3 since free()
    tests that it was given a block's first byte (five instructions: lea, sub, the
    multiplication by the class's reciprocal, a compare and its branch; PageMap::LookUpBlock;
    per-CPU mode, which valgrind cannot run, pays three, as the test replaces its class-0
    branch), 62.3 since free's push keeps the list's low-water mark where malloc's pop
    did (the pop is one decrement in memory; ThreadCache::LowWater), 61.3 since the class
    look-up and the block-start test read the entry in one addressing mode
    (PageMap::LookUpBlock), and 60.3 since a list keeps its room rather than its length, so
    free's push tests and takes it with one subtraction (ThreadCache::spaces_).
    Issue 11 asked for at most 60.4, the per-thread path's count before per-CPU caches
    landed. The bound is that figure: the count now (60.28 in both libraries) has less than
    one instruction of room under it, so any further instruction a pair fails it.
    pair_loop freezes the clock the library reads (it defines clock_gettime): the
    maintenance passes come every 100 ms of it, so with a running clock their number
    followed valgrind's speed, and a loaded machine read 60.40 where an idle one read
    60.31 (the suite failed on it under ctest -j2). Frozen, the count is 60.28 on any machine, run after run."""

    BOUND = 60.4
    N1, N2 = 100_000, 1_100_000

    # An in-place realloc (40 <-> 48 bytes, one class), loop included: 40 (12 of them the
    # loop's own, since the loop reads its size argument), with the class read as free()
    # reads it, inside Reallocate. The size look-up through the span record (FindBlock)
    # made it 130.5, with the in-place test inside the whole function's register saves
    # 79.5, through OwnedSize's call 71. The block-start test (free()'s, which also refuses
    # class 0, so it replaces that test) added 4: 44.
    REALLOC_BOUND = 45

    def instructions(self, binary, n, *mode):
        out = os.path.join(self.tmp, f"cg.{os.path.basename(binary)}.{n}{''.join(mode)}")
        run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary, n, *mode], timeout=300)
        with open(out) as f:
            for line in f:
                if line.startswith("summary:") or line.startswith("totals:"):
                    return int(line.split()[1])
        raise AssertionError(f"no instruction total in {out}")

    def per_call(self, binary, *mode):
        """Instructions per loop iteration of pair_loop (N2 minus N1 iterations)."""
        self.assertIsNotNone(shutil.which("valgrind"), "valgrind is missing: run scripts/install-deps.sh")
        return (self.instructions(binary, self.N2, *mode) - self.instructions(binary, self.N1, *mode)) / (
            self.N2 - self.N1)

    def check(self, binary):
        per_pair = self.per_call(binary)
        print(f"{os.path.basename(binary)}: {per_pair:.2f} instructions per malloc(32)+free pair")
        self.assertLessEqual(per_pair, self.BOUND)

    def test_minimal_library(self):
        self.check(ARGS.pair_minimal)

    def test_full_library_profiler_not_running(self):
        self.check(ARGS.pair_full)

    # Pairs of 64 KiB blocks, loop included: every malloc runs the housekeeping tick. It took
    # the whole slow path (and CheckSize's atomic walk every 16 frees): 201 a pair; with the
    # per-thread TickOnly and the owner's vectorized size walk, 132.
    BIG_PAIR_BOUND = 150

    def test_big_block_pair(self):
        per_pair = self.per_call(ARGS.pair_minimal, "65536")
        print(f"pair_loop_minimal: {per_pair:.2f} instructions per malloc(65536)+free pair")
        self.assertLessEqual(per_pair, self.BIG_PAIR_BOUND)

    # calloc(4, 8)+free, loop included: 81.4 with calloc inline over malloc's fast path and
    # memset as its tail call; 108.3 when calloc was a call that kept its arguments for the
    # new-handler's retry and AllocateZeroed one with a frame.
    CALLOC_BOUND = 88

    def test_calloc_pair(self):
        per_pair = self.per_call(ARGS.pair_minimal, "calloc")
        print(f"pair_loop_minimal: {per_pair:.2f} instructions per calloc(4, 8)+free pair")
        self.assertLessEqual(per_pair, self.CALLOC_BOUND)

    def test_realloc_in_place(self):
        per_call = self.per_call(ARGS.pair_minimal, "realloc")
        print(f"pair_loop_minimal: {per_call:.2f} instructions per in-place realloc")
        self.assertLessEqual(per_call, self.REALLOC_BOUND)


class Package(ProfilerCase):
    """libtcmalloc installs like libtcmalloc_minimal: soname, static archive, headers, a
    relocatable libtcmalloc.pc, and tcmalloc::tcmalloc / tcmalloc::tcmalloc_static for CMake."""

    CONSUMER_C = r"""
#include <gperftools/heap-profiler.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void* volatile keep; /* or the compiler drops the malloc/free pair */
int main(int argc, char** argv) {
  if (argc > 1) HeapProfilerStart(argv[1]);
  void* p = malloc(12345);
  keep = p;
  char* text = GetHeapProfile();
  int ok = argc == 1 || (IsHeapProfilerRunning() && strstr(text, " 12345 [") != NULL);
  free(text);
  if (argc > 1) { HeapProfilerDump("consumer"); HeapProfilerStop(); }
  free(p);
  puts(ok ? "ok" : "bad");
  return ok ? 0 : 1;
}
"""

    def test_install_and_consume(self):
        prefix = os.path.join(self.tmp, "installed")
        run(["cmake", "--install", ARGS.build_dir, "--prefix", prefix], timeout=120)
        pcs = glob.glob(os.path.join(prefix, "**", "pkgconfig", "libtcmalloc.pc"), recursive=True)
        self.assertEqual(len(pcs), 1)
        libdir = os.path.dirname(os.path.dirname(pcs[0]))
        for f in ("libtcmalloc.so", "libtcmalloc.so.4", "libtcmalloc.a"):
            self.assertTrue(os.path.exists(os.path.join(libdir, f)), f)
        for h in ("gperftools/heap-profiler.h", "google/heap-profiler.h"):
            self.assertTrue(os.path.exists(os.path.join(prefix, "include", h)), h)
        soname = run(["readelf", "-d", os.path.join(libdir, "libtcmalloc.so")]).stdout
        self.assertIn("[libtcmalloc.so.4]", soname)
        # Relocatable: move the whole prefix; pkg-config follows.
        moved = os.path.join(self.tmp, "moved")
        shutil.move(prefix, moved)
        libdir = libdir.replace(prefix, moved)
        pc_env = {"PKG_CONFIG_PATH": os.path.join(libdir, "pkgconfig")}
        libs = run(["pkg-config", "--libs", "libtcmalloc"], env=pc_env).stdout.split()
        self.assertEqual(len(libs), 2, libs)
        self.assertEqual(os.path.realpath(libs[0][2:]), os.path.realpath(libdir))
        self.assertEqual(libs[1], "-ltcmalloc")
        cflags = run(["pkg-config", "--cflags", "libtcmalloc"], env=pc_env).stdout.split()
        src = os.path.join(self.tmp, "consumer.c")
        with open(src, "w") as f:
            f.write(self.CONSUMER_C)
        exe = os.path.join(self.tmp, "consumer")
        run(["cc", "-o", exe, src, *cflags, *libs, f"-Wl,-rpath,{libdir}"])
        p = run([exe, os.path.join(self.tmp, "c")])
        self.assertEqual(p.stdout.strip(), "ok")
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "c.0001.heap")))
        # CMake: the shared and static targets, the static one started by HEAPPROFILE alone.
        proj = os.path.join(self.tmp, "proj")
        os.mkdir(proj)
        with open(os.path.join(proj, "consumer.c"), "w") as f:
            f.write(self.CONSUMER_C)
        with open(os.path.join(proj, "CMakeLists.txt"), "w") as f:
            f.write("cmake_minimum_required(VERSION 3.20)\nproject(consumer C CXX)\n"
                    "find_package(tcmalloc REQUIRED)\n"
                    "add_executable(shared_app consumer.c)\n"
                    "target_link_libraries(shared_app tcmalloc::tcmalloc)\n"
                    "add_executable(static_app consumer.c)\n"
                    "target_link_libraries(static_app tcmalloc::tcmalloc_static)\n"
                    "set_target_properties(static_app PROPERTIES LINKER_LANGUAGE CXX)\n")
        build = os.path.join(self.tmp, "proj-build")
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        run(["cmake", "-S", proj, "-B", build, *gen, f"-DCMAKE_PREFIX_PATH={moved}"], timeout=120)
        run(["cmake", "--build", build], timeout=120)
        p = run([os.path.join(build, "shared_app"), os.path.join(self.tmp, "s")])
        self.assertEqual(p.stdout.strip(), "ok")
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "s.0001.heap")))
        p = run([os.path.join(build, "static_app")], env={"HEAPPROFILE": os.path.join(self.tmp, "st")})
        self.assertIn("Starting tracking the heap", p.stderr)
        self.assertEqual(header(os.path.join(self.tmp, "st.0001.heap"))[4], "heapprofile")


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    for opt in ("workload", "workload-plain", "sample-minimal", "sample-full", "pair-minimal", "pair-full",
                "libtcmalloc", "build-dir", "source-dir"):
        parser.add_argument(f"--{opt}", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], "-v", *rest])


if __name__ == "__main__":
    main()
