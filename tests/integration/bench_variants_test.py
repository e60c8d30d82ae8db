#!/usr/bin/env python3
"""bench/run.py's variants of our library: which run by default, which library each
preloads, and which environment each gets (nothing leaks in from the caller's).

Usage: bench_variants_test.py LIBRARY (any existing file stands for our library)."""
import argparse
import importlib.util
import os
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("bench_run", os.path.join(ROOT, "bench", "run.py"))
run = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run)
LIB = None


def allocators(names=None, variants=None, extra=None):
    args = argparse.Namespace(ours=LIB, extra=extra or [], allocators=names, variant=variants or [])
    return dict(run.find_allocators(args))


class Variants(unittest.TestCase):
    def test_default_set_leaves_out_the_opt_in_variants(self):
        found = allocators()
        self.assertEqual(found["ours"], os.path.realpath(LIB))
        self.assertEqual(found["ours-per-thread"], os.path.realpath(LIB))
        self.assertNotIn("ours-unhardened", found)
        self.assertNotIn("ours-no-hardening", found)

    def test_named_opt_in_variants_run_our_library(self):
        found = allocators("ours,ours-unhardened,ours-no-hardening")
        self.assertEqual(set(found), {"ours", "ours-unhardened", "ours-no-hardening"})
        self.assertEqual(set(found.values()), {os.path.realpath(LIB)})

    def test_each_variant_gets_its_own_settings_and_no_one_elses(self):
        saved = dict(os.environ)
        try:
            # A caller that exported the variants' settings must not change "ours".
            os.environ.update(TCMALLOC_HARDENED="0", TCMALLOC_GUARDED_SAMPLE_RATE="0",
                              TCMALLOC_PER_CPU_CACHES="0", LD_PRELOAD="/elsewhere.so")
            ours = run.preload_env(LIB, "ours")
            for key in ("TCMALLOC_HARDENED", "TCMALLOC_GUARDED_SAMPLE_RATE", "TCMALLOC_PER_CPU_CACHES"):
                self.assertNotIn(key, ours)
            self.assertEqual(ours["LD_PRELOAD"], LIB)
            none = run.preload_env(LIB, "ours-no-hardening")
            self.assertEqual(none["TCMALLOC_HARDENED"], "0")
            self.assertEqual(none["TCMALLOC_GUARDED_SAMPLE_RATE"], "0")
            self.assertNotIn("TCMALLOC_PER_CPU_CACHES", none)
            unhardened = run.preload_env(LIB, "ours-unhardened")
            self.assertEqual(unhardened["TCMALLOC_HARDENED"], "0")
            self.assertNotIn("TCMALLOC_GUARDED_SAMPLE_RATE", unhardened)
            per_thread = run.preload_env(LIB, "ours-per-thread")
            self.assertEqual(per_thread["TCMALLOC_PER_CPU_CACHES"], "0")
            self.assertNotIn("TCMALLOC_HARDENED", per_thread)
            glibc = run.preload_env(None, "glibc")
            self.assertNotIn("LD_PRELOAD", glibc)
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def test_a_named_variant_runs_our_library_with_its_settings_only(self):
        saved = dict(os.environ)
        try:
            os.environ["TCMALLOC_MAX_PER_CPU_CACHE_SIZE"] = "1"  # must not reach anyone
            found = allocators("ours,ours-8m", ["ours-8m:TCMALLOC_MAX_PER_CPU_CACHE_SIZE=8388608,X=1"])
            self.assertEqual(set(found), {"ours", "ours-8m"})
            self.assertEqual(found["ours-8m"], os.path.realpath(LIB))
            mine = run.preload_env(LIB, "ours-8m")
            self.assertEqual(mine["TCMALLOC_MAX_PER_CPU_CACHE_SIZE"], "8388608")
            self.assertEqual(mine["X"], "1")
            self.assertNotIn("TCMALLOC_MAX_PER_CPU_CACHE_SIZE", run.preload_env(LIB, "ours"))
        finally:
            os.environ.clear()
            os.environ.update(saved)
            run.ALLOCATOR_ENV.pop("ours-8m", None)

    def test_variants_and_extras_run_beside_a_subset(self):
        # --allocators ours,glibc with a --variant: the variant was asked for by name (it
        # once dropped out of the tables without a word).
        try:
            args = argparse.Namespace(ours=LIB, extra=[f"other={LIB}"], allocators="ours,glibc",
                                      variant=["v:X=1"])
            found = dict(run.find_allocators(args))
            self.assertEqual(set(found), {"ours", "glibc", "v", "other"})
        finally:
            run.ALLOCATOR_ENV.pop("v", None)

    def test_a_variant_alone_runs_from_the_snapshot(self):
        # --allocators glibc --variant v:...: "ours" is not measured, yet v must not preload
        # the library under development (a rebuild during the run would swap it).
        try:
            args = argparse.Namespace(ours=LIB, extra=[], allocators="glibc", variant=["v:X=1"])
            with tempfile.TemporaryDirectory() as out:
                found = dict(run.with_snapshots(run.find_allocators(args), out))
                self.assertEqual(set(found), {"glibc", "v"})
                self.assertEqual(os.path.dirname(found["v"]), out)
                self.assertTrue(os.path.exists(found["v"]))
                self.assertIsNone(found["glibc"])
        finally:
            run.ALLOCATOR_ENV.pop("v", None)

    def test_an_extra_under_a_taken_name_is_refused(self):
        for extra in ([f"ours={LIB}"], [f"mimalloc={LIB}"], [f"glibc={LIB}"], [f"ours-per-thread={LIB}"],
                      [f"x{LIB}"], ["x="], [f"x={LIB}", f"x={LIB}"]):
            with self.assertRaises(SystemExit, msg=extra):
                allocators(extra=extra)
        self.assertEqual(allocators(extra=[f"x={LIB}"])["x"], os.path.realpath(LIB))

    def test_a_malformed_variant_is_refused(self):
        for spec in ("nameonly", "x:", "x:NOEQUALS", "glibc:A=1", ":A=1", "ours-per-thread:A=1"):
            with self.assertRaises(SystemExit):
                allocators(None, [spec])
        self.assertNotIn("x", run.ALLOCATOR_ENV)


class Schedule(unittest.TestCase):
    """run_order: the order of the allocators in each round and workload."""

    def rows(self, n):
        return [run.run_order(n, row) for row in range(n if n % 2 == 0 else 2 * n)]

    def test_every_row_runs_each_allocator_once(self):
        for n in range(1, 9):
            for row in range(3 * n):
                self.assertEqual(sorted(run.run_order(n, row)), list(range(n)), (n, row))

    def test_each_allocator_follows_every_other_equally_often(self):
        for n in range(2, 9):
            follows = {}
            for order in self.rows(n):
                for a, b in zip(order, order[1:]):
                    follows[(a, b)] = follows.get((a, b), 0) + 1
            want = 1 if n % 2 == 0 else 2
            pairs = [(a, b) for a in range(n) for b in range(n) if a != b]
            self.assertEqual({p: follows.get(p, 0) for p in pairs}, {p: want for p in pairs}, n)

    def test_each_allocator_runs_in_every_position(self):
        for n in range(2, 9):
            for pos in range(n):
                self.assertEqual(sorted(order[pos] for order in self.rows(n))[::2 if n % 2 else 1],
                                 list(range(n)), (n, pos))

    def test_the_runner_follows_it(self):
        # run_timing with a run_once that records the order instead of running anything: six
        # allocators, four workloads, three rounds. ours-per-thread must not always come right
        # after ours (the old rotation's order), and each workload's round r must run its
        # allocators in the order of row r + i.
        names = ["ours", "ours-per-thread", "glibc", "gperftools", "jemalloc", "mimalloc"]
        allocs = [(n, "") for n in names]
        ws = [run.Workload(f"w{i}", ["true"]) for i in range(4)]
        ran = []
        saved = run.run_once, run.log
        run.run_once = lambda argv, env, timeout: (ran.append(env.get("BENCH_ALLOCATOR_NAME", "")) or
                                                   ({"wall_s": 0.0}, None))
        run.log = lambda msg: None
        original_env = run.preload_env
        run.preload_env = lambda lib, name=None: {"BENCH_ALLOCATOR_NAME": name}
        try:
            run.run_timing(ws, allocs, "/nonexistent", 3, 1)
        finally:
            run.run_once, run.log = saved
            run.preload_env = original_env
        self.assertEqual(len(ran), 3 * 4 * 6)
        rows = [ran[k:k + 6] for k in range(0, len(ran), 6)]
        for k, order in enumerate(rows):
            r, i = divmod(k, 4)
            self.assertEqual(order, [names[j] for j in run.run_order(6, r + i)])
        before = {order[order.index("ours-per-thread") - 1] for order in rows if order[0] != "ours-per-thread"}
        self.assertGreater(len(before), 2, rows)


if __name__ == "__main__":
    LIB = sys.argv.pop(1)
    unittest.main()
