#!/usr/bin/env python3
"""The heap profiler's gperftools flags beyond the three intervals, and the naming of an
exec'd program's files, end to end with profiler_flags_workload and the real pprof.

  profiler_flags_test.py --workload=PATH [unittest args]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

ARGS = None
MiB = 1 << 20
_DUMP = re.compile(r"^Dumping heap profile to (\S+) \((.*)\)$")


def clean_env(extra):
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("TCMALLOC_") or k.startswith("HEAP_PROFILE_") or k.startswith("HEAPPROFILE")
                   or k in ("LD_PRELOAD", "MALLOCSTATS"))}
    env.update(extra)
    return env


def run(args, env):
    p = subprocess.run([ARGS.workload, *map(str, args)], env=clean_env(env), capture_output=True, text=True,
                       timeout=120)
    if p.returncode != 0:
        raise AssertionError(f"{args} exited {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}")
    return p


def dumps(stderr):
    return [m.groups() for m in map(_DUMP.match, stderr.splitlines()) if m]


def find_pprof():
    for c in (shutil.which("pprof"), "/usr/local/bin/pprof", os.path.expanduser("~/.local/bin/pprof"),
              os.path.expanduser("~/go/bin/pprof")):
        if c and os.access(c, os.X_OK):
            return c
    raise AssertionError("pprof not found: run scripts/install-deps.sh")


_ROW = re.compile(r"^\s*(\S+)\s+(-?[\d.]+)%\s+(-?[\d.]+)%\s+(\S+)\s+(-?[\d.]+)%\s+(.+?)\s*$")


def pprof_flat(profile):
    """{function: flat in-use bytes} from pprof -top."""
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([find_pprof(), "-top", "-sample_index=inuse_space", "-unit=B", "-nodefraction=0",
                            "-nodecount=100000", ARGS.workload, profile], capture_output=True, text=True,
                           timeout=120, env=clean_env({"PPROF_TMPDIR": tmp, "HOME": tmp}))
    if p.returncode != 0:
        raise AssertionError(f"pprof failed on {profile}: {p.stderr}")
    rows = {}
    for line in p.stdout.splitlines():
        m = _ROW.match(line)
        if m:
            rows[m.group(6)] = int(float(m.group(1).rstrip("B") or 0))
    return rows, p.stdout


class Case(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tcm_profflags_")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.prefix = os.path.join(self.tmp, "prof")


class DeallocationInterval(Case):
    def test_dumps_every_interval_of_freed_bytes(self):
        p = run(["free", 40], {"HEAPPROFILE": self.prefix, "HEAP_PROFILE_DEALLOCATION_INTERVAL": "10M"})
        ds = dumps(p.stderr)
        self.assertTrue(ds and ds[-1][1].startswith("Exiting"), p.stderr)
        interval = ds[:-1]
        self.assertGreaterEqual(len(interval), 3, p.stderr)
        for i, (path, reason) in enumerate(interval, 1):
            self.assertEqual(path, f"{self.prefix}.{i:04d}.heap")
            self.assertRegex(reason, r"^\d+ MB freed cumulatively, \d+ MB currently in use$")
        freed = [int(r.split()[0]) for _, r in interval]
        self.assertEqual(freed, sorted(freed))
        for a, b in zip(freed, freed[1:]):
            self.assertGreaterEqual(b - a, 10)
        self.assertGreaterEqual(freed[-1], 30)

    def test_off_by_default_and_garbage_warns(self):
        p = run(["free", 40], {"HEAPPROFILE": self.prefix})
        self.assertEqual(len(dumps(p.stderr)), 1, p.stderr)  # the exit dump only
        p = run(["free", 40], {"HEAPPROFILE": self.prefix, "HEAP_PROFILE_DEALLOCATION_INTERVAL": "lots"})
        self.assertEqual(len(dumps(p.stderr)), 1, p.stderr)
        self.assertIn("ignoring HEAP_PROFILE_DEALLOCATION_INTERVAL=lots", p.stderr)


class ExecdChild(Case):
    def test_an_execd_program_writes_prefix_pid_files(self):
        p = run(["exec"], {"HEAPPROFILE": self.prefix})
        pid = int(re.search(r"pid (\d+)", p.stdout).group(1))
        self.assertEqual(p.stderr.count("Starting tracking the heap"), 2, p.stderr)
        before = f"{self.prefix}.0001.heap"
        after = f"{self.prefix}_{pid}.0001.heap"
        self.assertEqual([d[0] for d in dumps(p.stderr)], [before, after], p.stderr)
        self.assertEqual(dumps(p.stderr)[0][1], "before exec")
        self.assertEqual(sorted(os.listdir(self.tmp)), sorted([os.path.basename(before), os.path.basename(after)]))


class MmapProfiling(Case):
    def exit_profile(self, env):
        p = run(["mmap"], {"HEAPPROFILE": self.prefix, **env})
        ds = dumps(p.stderr)
        self.assertEqual(len(ds), 1, p.stderr)
        return pprof_flat(ds[0][0]), p

    def test_mmap_regions_are_profiled_by_their_stack(self):
        (rows, text), _ = self.exit_profile({"HEAP_PROFILE_MMAP": "true"})
        self.assertEqual(rows.get("map_region"), 3 * MiB, text)    # the unmapped 2 MiB is gone
        self.assertEqual(rows.get("main"), 4 * MiB, text)          # mremap'ed, called from main
        self.assertGreaterEqual(rows.get("malloc_region", 0), MiB, text)

    def test_only_mmap_leaves_malloc_out(self):
        (rows, text), _ = self.exit_profile({"HEAP_PROFILE_ONLY_MMAP": "1"})
        self.assertEqual(rows.get("map_region"), 3 * MiB, text)
        self.assertNotIn("malloc_region", rows, text)

    def test_without_the_flag_mappings_are_not_profiled(self):
        (rows, text), _ = self.exit_profile({})
        self.assertNotIn("map_region", rows, text)
        self.assertGreaterEqual(rows.get("malloc_region", 0), MiB, text)

    def test_mmap_log_logs_every_call(self):
        (rows, text), p = self.exit_profile({"HEAP_PROFILE_MMAP_LOG": "yes"})
        self.assertRegex(p.stderr, r"mmap\(start=\S+, len=3145728, prot=0x3, flags=0x22, fd=-1, offset=0x0\) = 0x")
        self.assertRegex(p.stderr, r"munmap\(start=0x[0-9a-f]+, len=2097152\)")
        self.assertRegex(p.stderr, r"mremap\(old_addr=0x[0-9a-f]+, old_size=1048576, new_size=4194304, flags=0x1")
        self.assertNotIn("map_region", rows, text)  # logging alone does not profile them

    def test_garbage_warns_and_keeps_the_default(self):
        (rows, text), p = self.exit_profile({"HEAP_PROFILE_MMAP": "maybe"})
        self.assertIn("ignoring HEAP_PROFILE_MMAP=maybe", p.stderr)
        self.assertNotIn("map_region", rows, text)


class SignalDump(Case):
    SIGUSR2 = 12

    def test_the_signal_dumps(self):
        p = run(["signal", self.SIGUSR2], {"HEAPPROFILE": self.prefix, "HEAPPROFILESIGNAL": str(self.SIGUSR2)})
        ds = dumps(p.stderr)
        self.assertEqual(ds[0], (f"{self.prefix}.0001.heap", "signal"), p.stderr)
        self.assertTrue(ds[-1][1].startswith("Exiting"), p.stderr)
        self.assertEqual(len(ds), 2, p.stderr)

    def test_garbage_warns_and_the_signal_keeps_its_default(self):
        p = subprocess.run([ARGS.workload, "signal", str(self.SIGUSR2)],
                           env=clean_env({"HEAPPROFILE": self.prefix, "HEAPPROFILESIGNAL": "usr2"}),
                           capture_output=True, text=True, timeout=120)
        self.assertIn("ignoring HEAPPROFILESIGNAL=usr2", p.stderr)
        self.assertEqual(p.returncode, -self.SIGUSR2)  # not handled: SIGUSR2 terminates


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)


if __name__ == "__main__":
    main()
