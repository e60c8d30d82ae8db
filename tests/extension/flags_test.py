#!/usr/bin/env python3
"""Every environment flag, each in a child process: its effect, and what garbage does.

Usage: flags_test.py <path to flag_probe>
"""
import os
import subprocess
import sys
import tempfile
import unittest

PROBE = None


def run(env_extra, *args, check=True):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TCMALLOC_") and k != "MALLOCSTATS"}
    env.update(env_extra)
    p = subprocess.run([PROBE, *map(str, args)], env=env, capture_output=True, text=True, timeout=60)
    if check and p.returncode != 0:
        raise AssertionError(f"probe {args} with {env_extra} exited {p.returncode}: {p.stderr}")
    values = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
    return p, values


def source_bytes(values, name):
    words = values["sources"].split(":", 1)[1].split()
    return int(words[words.index(name) + 1])


class Garbage(unittest.TestCase):
    """Bad values are reported once on stderr and replaced by the default."""

    CASES = [
        ("TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES", "lots", "tcmalloc.max_total_thread_cache_bytes", "16777216"),
        ("TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES", "-5", "tcmalloc.max_total_thread_cache_bytes", "16777216"),
        ("TCMALLOC_SAMPLE_PARAMETER", "1.5x", "tcmalloc.sample_parameter", "0"),
        ("TCMALLOC_RELEASE_RATE", "fast", "release_rate", "1"),
        ("TCMALLOC_RELEASE_RATE", "-1", "release_rate", "1"),
        ("TCMALLOC_HEAP_LIMIT_MB", "12q", "tcmalloc.heap_limit_mb", "0"),
        ("TCMALLOC_AGGRESSIVE_DECOMMIT", "maybe", "tcmalloc.aggressive_memory_decommit", "0"),
        # The default batch depends on the front end: 128 per-CPU, 32 per-thread.
        ("TCMALLOC_TRANSFER_NUM_OBJ", "zillion", "batch16", "by-mode"),
        ("TCMALLOC_TRANSFER_NUM_OBJ", "0", "batch16", "by-mode"),
        ("TCMALLOC_GUARDED_SAMPLE_RATE", "often", "tcmalloc.guarded_sample_rate", "67108864"),
        ("TCMALLOC_GUARDED_SAMPLE_RATE", "-1", "tcmalloc.guarded_sample_rate", "67108864"),
        ("TCMALLOC_HARDENED", "sometimes", "tcmalloc.hardened", "1"),
    ]

    def test_each_garbage_value(self):
        for name, bad, key, default in self.CASES:
            with self.subTest(name=name, value=bad):
                p, v = run({name: bad}, "props")
                if default == "by-mode":
                    default = "128" if v["tcmalloc.per_cpu_caches_active"] == "1" else "32"
                self.assertEqual(v[key], default)
                warnings = [l for l in p.stderr.splitlines() if name in l]
                self.assertEqual(len(warnings), 1, p.stderr)
                self.assertIn(f"ignoring {name}={bad}", warnings[0])
                if key == "batch16":  # an unset default reads as chosen by the library
                    self.assertIn("using the default (automatic)", warnings[0])

    def test_garbage_in_other_flags_does_not_crash(self):
        for name in ["TCMALLOC_SKIP_MMAP", "TCMALLOC_SKIP_SBRK", "TCMALLOC_DEVMEM_START", "TCMALLOC_DEVMEM_LIMIT",
                     "TCMALLOC_MEMFS_LIMIT_MB", "TCMALLOC_MEMFS_ABORT_ON_FAIL", "TCMALLOC_MEMFS_IGNORE_MMAP_FAIL",
                     "TCMALLOC_MEMFS_MAP_PRIVATE", "TCMALLOC_MEMFS_MAP_PRVIATE", "TCMALLOC_DISABLE_MEMORY_RELEASE",
                     "TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD", "MALLOCSTATS", "TCMALLOC_BACKGROUND_RELEASE"]:
            with self.subTest(name=name):
                p, v = run({name: "~garbage~"}, "alloc", 4)
                self.assertEqual(v["allocated_mb"], "4")
                self.assertIn(f"ignoring {name}=~garbage~", p.stderr)


class Effects(unittest.TestCase):
    def test_max_total_thread_cache_bytes(self):
        _, v = run({"TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES": "4M"}, "props")
        self.assertEqual(v["tcmalloc.max_total_thread_cache_bytes"], str(4 << 20))

    def test_sample_parameter(self):
        _, v = run({"TCMALLOC_SAMPLE_PARAMETER": "524288"}, "props")
        self.assertEqual(v["tcmalloc.sample_parameter"], "524288")

    def test_release_rate(self):
        _, v = run({"TCMALLOC_RELEASE_RATE": "7.5"}, "props")
        self.assertEqual(v["release_rate"], "7.5")

    def test_transfer_num_obj(self):
        _, v = run({"TCMALLOC_TRANSFER_NUM_OBJ": "8"}, "props")
        self.assertEqual(v["batch16"], "8")
        # Unset: 128 with per-CPU caches, gperftools' 32 with per-thread caches.
        _, v = run({}, "props")
        self.assertEqual(v["batch16"], "128" if v["tcmalloc.per_cpu_caches_active"] == "1" else "32")
        _, v = run({"TCMALLOC_PER_CPU_CACHES": "0"}, "props")
        self.assertEqual(v["tcmalloc.per_cpu_caches_active"], "0")
        self.assertEqual(v["batch16"], "32")

    def test_heap_limit(self):
        _, v = run({"TCMALLOC_HEAP_LIMIT_MB": "64"}, "alloc", 200)
        self.assertEqual(v.get("errno"), "ENOMEM")
        self.assertLess(int(v["allocated_mb"]), 64)
        self.assertGreater(int(v["allocated_mb"]), 40)

    def test_aggressive_decommit(self):
        _, off = run({}, "aggressive")
        _, on = run({"TCMALLOC_AGGRESSIVE_DECOMMIT": "1"}, "aggressive")
        self.assertEqual(off["unmapped"], "0")
        self.assertGreaterEqual(int(on["unmapped"]), 10 << 20)

    def test_disable_memory_release(self):
        _, normal = run({}, "release")
        _, disabled = run({"TCMALLOC_DISABLE_MEMORY_RELEASE": "1"}, "release")
        self.assertGreaterEqual(int(normal["unmapped"]), 20 << 20)
        self.assertEqual(disabled["unmapped"], "0")

    def test_background_release_for_quiet_programs(self):
        _, quiet = run({}, "quiet")
        _, background = run({"TCMALLOC_BACKGROUND_RELEASE": "1"}, "quiet")
        self.assertLess(int(quiet["unmapped"]), 30 << 20, "nothing runs the scavenger in a quiet program")
        self.assertGreaterEqual(int(background["unmapped"]), 55 << 20)

    def test_large_alloc_report(self):
        p, _ = run({"TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD": "1M"}, "large_report")
        reports = [l for l in p.stderr.splitlines() if l.startswith("tcmalloc: large alloc 2097152 bytes == 0x")]
        # Threshold 1 MiB, then +1/8 after each report: 1, 1.125, ... 1.80 MiB <= 2 MiB: 6 reports.
        self.assertEqual(len(reports), 6, p.stderr)
        self.assertIn(" @ ", reports[0])
        p, _ = run({}, "large_report")
        self.assertNotIn("large alloc", p.stderr)

    def test_skip_mmap_uses_sbrk(self):
        _, v = run({"TCMALLOC_SKIP_MMAP": "1"}, "alloc", 8)
        self.assertEqual(v["allocated_mb"], "8")
        self.assertEqual(source_bytes(v, "mmap"), 0)
        self.assertGreaterEqual(source_bytes(v, "sbrk"), 8 << 20)

    def test_skip_sbrk_keeps_mmap(self):
        _, v = run({"TCMALLOC_SKIP_SBRK": "1"}, "alloc", 8)
        self.assertEqual(source_bytes(v, "sbrk"), 0)
        self.assertGreaterEqual(source_bytes(v, "mmap"), 8 << 20)

    def test_memfs_with_limit_falls_back(self):
        with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
            for private_flag in ["TCMALLOC_MEMFS_MAP_PRIVATE", "TCMALLOC_MEMFS_MAP_PRVIATE", None]:
                with self.subTest(private_flag=private_flag):
                    env = {"TCMALLOC_MEMFS_MALLOC_PATH": d, "TCMALLOC_MEMFS_LIMIT_MB": "16"}
                    if private_flag:
                        env[private_flag] = "1"
                    _, v = run(env, "alloc", 40)
                    self.assertEqual(v["allocated_mb"], "40")
                    self.assertGreater(source_bytes(v, "memfs"), 0)
                    self.assertLessEqual(source_bytes(v, "memfs"), 16 << 20)
                    self.assertGreater(source_bytes(v, "mmap"), 0)
            self.assertEqual(os.listdir(d), [], "memfs files are unlinked")

    def test_memfs_abort_on_fail(self):
        with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
            p, _ = run({"TCMALLOC_MEMFS_MALLOC_PATH": d, "TCMALLOC_MEMFS_LIMIT_MB": "8",
                        "TCMALLOC_MEMFS_ABORT_ON_FAIL": "1"}, "alloc", 40, check=False)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("memfs", p.stderr)

    def test_memfs_bad_path_falls_back(self):
        p, v = run({"TCMALLOC_MEMFS_MALLOC_PATH": "/nonexistent/dir"}, "alloc", 4)
        self.assertEqual(v["allocated_mb"], "4")
        self.assertIn("memfs: cannot create a file in /nonexistent/dir", p.stderr)

    def test_memfs_ignore_mmap_fail_is_accepted(self):
        with tempfile.TemporaryDirectory() as d:
            p, v = run({"TCMALLOC_MEMFS_MALLOC_PATH": d, "TCMALLOC_MEMFS_IGNORE_MMAP_FAIL": "1"}, "alloc", 4)
            self.assertEqual(v["allocated_mb"], "4")
            self.assertNotIn("ignoring", p.stderr)

    def test_devmem_with_an_ordinary_file(self):
        with tempfile.NamedTemporaryFile() as f:
            f.truncate(64 << 20)
            f.flush()
            env = {"TCMALLOC_DEVMEM_DEVICE": f.name, "TCMALLOC_DEVMEM_START": "1", "TCMALLOC_DEVMEM_LIMIT": "32"}
            _, v = run(env, "alloc", 48)
            self.assertEqual(v["allocated_mb"], "48")
            self.assertGreater(source_bytes(v, "devmem"), 0)
            self.assertLessEqual(source_bytes(v, "devmem"), 31 << 20)
            self.assertGreater(source_bytes(v, "mmap"), 0)

    def test_devmem_default_device_fails_cleanly(self):
        p, v = run({"TCMALLOC_DEVMEM_START": "1"}, "alloc", 4)
        self.assertEqual(v["allocated_mb"], "4")
        self.assertGreater(source_bytes(v, "mmap"), 0)

    def test_mallocstats_at_exit(self):
        p, _ = run({"MALLOCSTATS": "1"}, "alloc", 1)
        self.assertIn("Bytes in use by application", p.stderr)
        self.assertNotIn("Size classes", p.stderr)
        p, _ = run({"MALLOCSTATS": "2"}, "alloc", 1)
        self.assertIn("Size classes", p.stderr)
        self.assertIn("Page heap free runs", p.stderr)
        p, _ = run({}, "alloc", 1)
        self.assertNotIn("MALLOC:", p.stderr)


if __name__ == "__main__":
    PROBE = sys.argv.pop(1)
    unittest.main(verbosity=2)
