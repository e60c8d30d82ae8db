#!/usr/bin/env python3
"""Runs real programs twice, on the system allocator and under LD_PRELOAD, and compares.

    run_real_program.py --preload /path/to/libtcmalloc_minimal.so [--keep] PROGRAM...
    PROGRAM: preload-check python-script python-regrtest perl git sqlite3 gxx all

Each program's case is a fixed sequence of commands. The sequence runs once without LD_PRELOAD
("plain") and once with LD_PRELOAD=<lib> ("preload"), each in its own fresh temporary tree. Every
command's stdout and exit status is appended to a transcript (for a few commands stderr too, or a
digest instead of a long stdout); the two transcripts must be identical after normalisation.
Normalisations (README.md lists and justifies each):
  * the run's temporary directory is replaced by <ROOT> (each run has its own mkdtemp path);
  * python-regrtest compares the per-test outcomes regrtest writes as JUnit XML, not its stdout,
    which is full of timings and load averages;
  * after a multi-threaded git repack only thread-independent results are compared.
Settings that would otherwise make output vary from process to process (hash seeds, locale,
time zone, git dates) are fixed identically in both runs rather than normalised away.

The preload must really be active: both runs set LD_DEBUG=files,bindings with LD_DEBUG_OUTPUT,
so the dynamic loader of every process writes a log. The preload run fails unless every program
started loaded the library and every malloc/free/calloc/realloc binding went to it; the plain
run fails if the library shows up at all. A preload that the loader ignored (bad path, missing
symbols) therefore fails the test instead of passing it silently.

Exit status: 0 all compared programs matched, 1 a mismatch or an error, 2 bad usage.
Only the standard library is used.
"""

import argparse
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

WORKLOADS = Path(__file__).resolve().parent / "workloads"

# Upper bound for one command, so a hang fails with a message instead of waiting for CTest.
COMMAND_TIMEOUT_S = 900

# Allocation entry points whose dynamic bindings must all resolve to the preloaded library.
ALLOCATION_SYMBOLS = ("malloc", "free", "calloc", "realloc")

# CPython regression tests to run: fast (together ~35 s), allocation-heavy (containers,
# strings, parsers, libmpdec, zlib, ctypes) and passing in a sandbox without network. The last
# four create and destroy hundreds of threads and fork while threads run: thread caches and
# fork handling are where allocators break.
REGRTESTS = (
    "test_dict", "test_list", "test_set", "test_tuple", "test_unicode", "test_bytes",
    "test_json", "test_re", "test_collections", "test_itertools", "test_sort", "test_deque",
    "test_ordered_dict", "test_array", "test_functools", "test_heapq", "test_marshal",
    "test_codecs", "test_pickle", "test_weakref", "test_gc", "test_long", "test_decimal",
    "test_ast", "test_exceptions", "test_descr", "test_ctypes", "test_zlib", "test_mmap",
    "test_tracemalloc",
    "test_thread", "test_threading_local", "test_fork1", "test_threading",
)


class CaseError(Exception):
    """The case could not be run at all (missing program, unusable python)."""


class Session:
    """One run of one case: a private temporary tree, an environment and a transcript."""

    def __init__(self, case_name, mode, preload):
        self.mode = mode
        self.preload = preload
        self.root = Path(tempfile.mkdtemp(prefix=f"real-{case_name}-{mode}-"))
        self.work = self.root / "work"
        self.home = self.root / "home"
        self.tmp = self.root / "tmp"
        self.ld_debug = self.root / "ld-debug"
        for d in (self.work, self.home, self.tmp, self.ld_debug):
            d.mkdir()
        self.env = self._environment()
        self.transcript = bytearray()
        self.stderr_log = bytearray()

    def _environment(self):
        env = dict(os.environ)
        # Start both runs from the same allocator-neutral state, whatever the caller had set.
        for key in list(env):
            if key.startswith(("LD_PRELOAD", "LD_DEBUG", "LD_AUDIT", "MALLOC_", "TCMALLOC_",
                               "PYTHONMALLOC", "PERL_HASH", "PERL_PERTURB", "GIT_")):
                del env[key]
        env.update({
            # Fixed in both runs so that messages, sorting and dates do not depend on the host.
            "LC_ALL": "C", "LANG": "C", "TZ": "UTC",
            # Programs' own temporary files land in this run's tree and are removed with it.
            "TMPDIR": str(self.tmp), "HOME": str(self.home),
            # See README.md: every log line comes from the dynamic loader, one file per process.
            "LD_DEBUG": "files,bindings",
            "LD_DEBUG_OUTPUT": str(self.ld_debug / "ld"),
        })
        if self.mode == "preload":
            env["LD_PRELOAD"] = self.preload
        return env

    def record(self, text):
        """Appends a line the driver computed itself (digests, parsed results)."""
        self.transcript += self.normalise(text.encode()) + b"\n"

    def run(self, argv, *, stdin=None, cwd=None, env=None, stdout="full",
            with_stderr=False, check=True):
        """Runs argv and appends '$ command', its output and '[exit N]' to the transcript.

        stdout="full" records stdout verbatim, "digest" only its size and SHA-256 (for outputs of
        megabytes), "none" nothing. with_stderr also records stderr (for compilers, whose
        diagnostics are output too). A non-zero exit is recorded like any other; check=True
        additionally makes it an error, so a broken command is not compared against itself.
        Returns the CompletedProcess.
        """
        run_env = dict(self.env)
        run_env.update(env or {})
        started = time.monotonic()
        try:
            proc = subprocess.run(
                [str(a) for a in argv], input=stdin, cwd=cwd or self.work, env=run_env,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=COMMAND_TIMEOUT_S)
        except subprocess.TimeoutExpired as e:
            raise CaseError(f"{self.mode} run: timed out after {COMMAND_TIMEOUT_S}s: "
                            f"{shlex.join(map(str, argv))}") from e
        elapsed = time.monotonic() - started
        shown = shlex.join(str(a) for a in argv)
        self.transcript += self.normalise(f"$ {shown}\n".encode())
        out = self.normalise(proc.stdout)
        if stdout == "full":
            self.transcript += out
            if out and not out.endswith(b"\n"):
                self.transcript += b"\n"
        elif stdout == "digest":
            self.record(f"[stdout {len(out)} bytes, sha256 {hashlib.sha256(out).hexdigest()}]")
        if with_stderr:
            self.transcript += b"[stderr]\n" + self.normalise(proc.stderr)
        self.transcript += f"[exit {proc.returncode}]\n".encode()
        self.stderr_log += f"$ {shown}  ({elapsed:.1f}s, exit {proc.returncode})\n".encode()
        self.stderr_log += proc.stderr
        if check and proc.returncode != 0:
            tail = proc.stderr.decode(errors="replace")[-3000:]
            raise CaseError(f"{self.mode} run: exit {proc.returncode}: {shown}\n{tail}")
        return proc

    def normalise(self, output):
        # The only difference the two runs are allowed: where their temporary tree lives.
        # Applied to each output before it is recorded (or digested).
        return output.replace(str(self.root).encode(), b"<ROOT>")

    def cleanup(self):
        shutil.rmtree(self.root, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Checking, from the dynamic loader's logs, that the preload was (or was not) in effect.

BINDING_RE = re.compile(
    r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: normal symbol `(" +
    "|".join(ALLOCATION_SYMBOLS) + r")'")


def check_loader_logs(session):
    """Returns (problems, summary) for the run's LD_DEBUG logs.

    Each log file belongs to one pid; a pid that exec()s again appends a second program to the
    same file, so programs are counted by the loader's 'transferring control' lines.
    """
    preload = session.preload
    lib_mapped = f"file={preload} [0];  generating link map"
    problems = []
    programs = {}
    started = 0
    allocation_bindings = 0
    for log in sorted(session.ld_debug.iterdir()):
        text = log.read_text(errors="replace")
        names = re.findall(r"transferring control: (.*)", text)
        started += len(names)
        for name in names:
            base = os.path.basename(name.strip())
            programs[base] = programs.get(base, 0) + 1
        mapped = text.count(lib_mapped)
        if session.mode == "preload" and mapped < len(names):
            problems.append(f"{log.name}: {len(names) - mapped} of {len(names)} programs "
                            f"({', '.join(names)}) started without {preload}")
        if session.mode == "plain" and mapped:
            problems.append(f"{log.name}: plain run loaded {preload}")
        bindings = BINDING_RE.findall(text)
        # A non-PIE executable that takes malloc's address carries a "canonical PLT" stub,
        # and other objects' references bind to that stub in the executable. The stub jumps
        # through the executable's own slot, so such a binding is fine exactly when that slot
        # went to the preload: (object, symbol) pairs whose own binding went to the preload.
        forwards = {(user, symbol) for user, provider, symbol in bindings if provider == preload}
        for user, provider, symbol in bindings:
            allocation_bindings += 1
            if (session.mode == "preload" and provider != preload
                    and (provider, symbol) not in forwards):
                problems.append(f"{log.name}: {user} bound `{symbol}' to {provider}, "
                                f"not to the preloaded library")
            if session.mode == "plain" and provider == preload:
                problems.append(f"{log.name}: plain run bound `{symbol}' to {preload}")
    if started == 0:
        problems.append("the dynamic loader logged no program start at all "
                        "(LD_DEBUG_OUTPUT not honoured?)")
    if allocation_bindings == 0:
        problems.append("no malloc/free binding was logged: cannot tell which allocator ran")
    summary = (f"{started} processes ("
               + ", ".join(f"{n} x{c}" for n, c in sorted(programs.items()))
               + f"), {allocation_bindings} allocation bindings")
    return problems[:20], summary


# ---------------------------------------------------------------------------------------------
# Finding programs.

def require_program(name):
    path = shutil.which(name)
    if not path:
        raise CaseError(f"'{name}' not found on PATH; run scripts/install-deps.sh")
    return path


def python_for(requirement):
    """Returns the real executable of the first python3 that can `import requirement`.

    Candidates: $REAL_PROGRAMS_PYTHON, Debian's /usr/bin/python3, then python3 on PATH. The
    interpreter path is resolved (pyenv puts a shell-script shim on PATH, and the shim would be
    the process we preload and check instead of python itself).
    """
    candidates = [os.environ.get("REAL_PROGRAMS_PYTHON"), "/usr/bin/python3",
                  shutil.which("python3")]
    tried = []
    for candidate in filter(None, candidates):
        if candidate in tried or not os.access(candidate, os.X_OK):
            continue
        tried.append(candidate)
        probe = subprocess.run(
            [candidate, "-c", f"import sys, {requirement}; print(sys.executable)"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=False)
        if probe.returncode == 0 and probe.stdout.strip():
            return probe.stdout.strip()
    raise CaseError(f"no python3 can import {requirement} (tried {', '.join(tried)}); on "
                    f"Debian install libpython3.11-testsuite, or set REAL_PROGRAMS_PYTHON")


# ---------------------------------------------------------------------------------------------
# The cases. Each is a function of a Session that runs the same commands in both runs.

def case_python_script(s):
    python = python_for("json")
    # PYTHONMALLOC=malloc routes every object through malloc instead of CPython's small-object
    # arena; PYTHONHASHSEED fixes str hashing (and so set order) in both runs.
    s.run([python, WORKLOADS / "python_workload.py"],
          env={"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"})


def case_python_regrtest(s):
    python = python_for("test.libregrtest, test.test_dict")
    # Test modules move between versions (test_unicode became test_str in 3.12): run those
    # this python has, and say which, so the two runs are known to run the same set.
    probe = subprocess.run(
        [python, "-c", "import importlib.util, sys\n"
                       "for n in sys.argv[1:]:\n"
                       "    if importlib.util.find_spec('test.' + n): print(n)", *REGRTESTS],
        stdout=subprocess.PIPE, text=True, check=True)
    tests = probe.stdout.split()
    s.record(f"python {python}; running {len(tests)} of {len(REGRTESTS)} listed tests")
    if missing := sorted(set(REGRTESTS) - set(tests)):
        s.record("not in this python: " + " ".join(missing))
    junit = s.root / "junit.xml"
    # regrtest's stdout has timings and load averages: its results are compared through the
    # JUnit XML it writes instead. Its own exit status is compared as well. --timeout makes a
    # hanging test dump tracebacks and fail rather than stall until CTest kills everything.
    s.run([python, "-m", "test", "--junit-xml", junit, "--timeout", "300", *tests],
          env={"PYTHONMALLOC": "malloc", "PYTHONDONTWRITEBYTECODE": "1"},
          stdout="none", check=False)
    if not junit.exists():
        raise CaseError(f"{s.mode} run: regrtest wrote no {junit.name}:\n"
                        + s.stderr_log.decode(errors="replace")[-3000:])
    outcomes = {}
    for case in ElementTree.parse(junit).iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("error", "failure", "skipped"):
                outcome = child.tag
                break
        outcomes[case.get("name")] = outcome
    counts = {}
    for name in sorted(outcomes):
        s.record(f"{name} {outcomes[name]}")
        counts[outcomes[name]] = counts.get(outcomes[name], 0) + 1
    s.record("totals " + " ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    # A run where nothing passes would compare equal to another such run and prove nothing.
    if counts.get("passed", 0) < 1000:
        raise CaseError(f"{s.mode} run: only {counts.get('passed', 0)} tests passed "
                        f"({counts}); is the CPython test suite complete?")


def case_perl(s):
    perl = require_program("perl")
    # PERL_HASH_SEED/PERL_PERTURB_KEYS fix hash order; the script sorts before printing anyway.
    s.run([perl, WORKLOADS / "perl_workload.pl"],
          env={"PERL_HASH_SEED": "0", "PERL_PERTURB_KEYS": "0"})


class Lcg:
    """Deterministic generator for the files the git case commits."""

    def __init__(self, seed):
        self.state = seed

    def below(self, n):
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return (self.state >> 33) % n

    def line(self):
        return " ".join(f"w{self.below(5000)}" for _ in range(1 + self.below(12)))


def case_git(s):
    git = require_program("git")
    repo = s.work / "repo"
    # No system or user config may leak in; fixed identities and dates make the hashes equal.
    base_env = {
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": str(s.home / "gitconfig"),
        "GIT_AUTHOR_NAME": "Real Programs", "GIT_AUTHOR_EMAIL": "real@example.com",
        "GIT_COMMITTER_NAME": "Real Programs", "GIT_COMMITTER_EMAIL": "real@example.com",
        "GIT_PAGER": "cat", "PAGER": "cat", "GIT_TERMINAL_PROMPT": "0",
    }
    commit_time = [1_700_000_000]

    def g(*args, **kw):
        env = dict(base_env)
        stamp = f"@{commit_time[0]} +0000"
        env.update({"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp})
        return s.run([git, "-C", repo, *args], env=env, **kw)

    def commit(message):
        commit_time[0] += 3600
        g("add", "-A")
        g("commit", "-q", "-m", message)

    s.run([git, "init", "-q", "-b", "main", repo], env=base_env)
    # Single-threaded packing keeps delta selection (and so pack bytes) deterministic; no
    # automatic gc in the background while we run.
    for key, value in (("pack.threads", "1"), ("gc.auto", "0"), ("gc.autoDetach", "false"),
                       ("maintenance.auto", "false"), ("core.fsync", "none")):
        g("config", key, value)

    rng = Lcg(2024)
    files = {}
    for i in range(320):
        name = f"dir{i % 16:02d}/sub{i % 3}/file{i:03d}.txt"
        # Mostly small files, a few large ones (up to ~400 KB) for big blobs and deltas.
        nlines = 5 + rng.below(60) if i % 40 else 2000 + rng.below(8000)
        files[name] = [rng.line() for _ in range(nlines)]

    def write_all():
        for name, lines in files.items():
            path = repo / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + "\n")

    write_all()
    commit("initial import of 320 files")
    for rev in range(1, 13):
        names = sorted(files)
        for name in [names[rng.below(len(names))] for _ in range(40)]:
            lines = files[name]
            for _ in range(1 + rng.below(5)):
                lines.insert(rng.below(len(lines) + 1), rng.line())
            if len(lines) > 3:
                del lines[rng.below(len(lines))]
        for k in range(6):
            files[f"dir{rev:02d}/added/rev{rev}_{k}.txt"] = [rng.line() for _ in range(30)]
        for name in [names[rng.below(len(names))] for _ in range(3)]:
            if name in files:
                del files[name]
                (repo / name).unlink()
        write_all()
        commit(f"revision {rev}: edit 40 files, add 6, remove 3")
        if rev == 6:
            g("branch", "side")
    # A side branch merged back exercises the merge machinery (rename detection included).
    g("checkout", "-q", "side")
    g("mv", "dir00/sub0/file000.txt", "dir00/renamed.txt")
    (repo / "side.txt").write_text("".join(f"side {n}\n" for n in range(5000)))
    commit("side branch: rename and add")
    g("checkout", "-q", "main")
    g("merge", "-q", "--no-ff", "-m", "merge side", "side")

    g("log", "--stat", "--format=fuller")
    g("log", "-p", "-M", "HEAD~6..HEAD", stdout="digest")
    g("diff", "--stat", "HEAD~10", "HEAD")
    g("diff", "HEAD~3", "HEAD")
    g("diff", "HEAD~12", "HEAD", stdout="digest")
    g("blame", "-s", "dir01/sub1/file001.txt")
    g("grep", "-n", "-c", "w4999")
    g("gc", "--quiet")
    g("repack", "-a", "-d", "-f", "--depth=50", "--window=50", "--quiet")
    g("count-objects", "-v")
    packs = sorted((repo / ".git" / "objects" / "pack").glob("*.pack"))
    g("verify-pack", "-v", *packs, stdout="digest")
    g("fsck", "--full", "--strict", "--no-progress")
    g("rev-list", "--all", "--objects", stdout="digest")
    archive = g("archive", "--format=tar", "HEAD", stdout="digest")
    s.record(f"archive size {len(archive.stdout)}")
    # Multi-threaded delta search and grep: the pack's bytes now depend on thread timing, so
    # only what is independent of it is compared (the object set, fsck, the grep results).
    g("-c", "pack.threads=4", "repack", "-a", "-d", "-f", "--window=100", "--quiet")
    g("cat-file", "--batch-all-objects", "--batch-check", stdout="digest")
    g("fsck", "--full", "--strict", "--no-progress")
    g("-c", "grep.threads=4", "grep", "-c", "-e", "w12", "-e", "w777", stdout="digest")
    # A clone through the transport (upload-pack and index-pack talk over pipes).
    clone = s.work / "clone"
    s.run([git, "clone", "-q", "--no-local", repo, clone], env=base_env)
    s.run([git, "-C", clone, "log", "--format=%H %s", "--all"], env=base_env)
    s.run([git, "-C", clone, "fsck", "--full", "--no-progress"], env=base_env)


def case_sqlite3(s):
    sqlite = require_program("sqlite3")
    db = s.work / "items.db"
    s.run([sqlite, "-bail", db], stdin=(WORKLOADS / "sqlite_build.sql").read_bytes())
    s.run([sqlite, "-bail", db], stdin=(WORKLOADS / "sqlite_query.sql").read_bytes())
    # The dump text of the whole database (tens of MB) is compared by digest.
    s.run([sqlite, db, ".dump"], stdout="digest")


def case_gxx(s):
    gxx = require_program("g++")
    # Compile by a relative name from inside the work tree: the file name ends up in
    # diagnostics and in the object's symbol table, and must be the same in both runs.
    shutil.copy(WORKLOADS / "gxx_workload.cc", s.work / "prog.cc")
    # -frandom-seed pins the one input GCC would otherwise derive per process.
    common = ["-std=c++20", "-Wall", "-frandom-seed=real-programs"]
    s.run([gxx, *common, "-O2", "-c", "prog.cc", "-o", "prog.o"], with_stderr=True)
    # Debug info records the build directory; map it to a fixed name.
    s.run([gxx, *common, "-O0", "-g", f"-fdebug-prefix-map={s.work}=/src", "-c", "prog.cc",
           "-o", "prog_debug.o"], with_stderr=True)
    s.run([gxx, "-pthread", "prog.o", "-o", "prog"], with_stderr=True)
    for name in ("prog.o", "prog_debug.o", "prog"):
        data = (s.work / name).read_bytes()
        s.record(f"{name}: {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}")
    s.run(["./prog"])


def check_the_checker(preload):
    """Shows that check_loader_logs() tells a preload that took effect from two that did not.

    Decoys: a file the loader refuses to preload (it says so on stderr and carries on, which
    is exactly the silent failure to catch), and a real shared library that loads but defines
    no malloc. Returns True if the checker rejected both decoys and accepted `preload`.
    """
    print("=== preload-check", flush=True)
    cc = require_program("cc")
    scratch = Path(tempfile.mkdtemp(prefix="real-preload-check-"))
    try:
        not_elf = scratch / "not-a-library.so"
        not_elf.write_text("this is not an ELF file\n")
        source = scratch / "decoy.c"
        source.write_text("int real_programs_decoy(void) { return 42; }\n")
        decoy = scratch / "libdecoy.so"
        subprocess.run([cc, "-shared", "-fPIC", "-o", decoy, source], check=True)
        ok = True
        for library, should_pass in ((str(not_elf), False), (str(decoy), False),
                                     (preload, True)):
            s = Session("preload-check", "preload", library)
            try:
                s.run([require_program("perl"), "-e",
                       'my @a = map { "x" x $_ } 1 .. 5000; print scalar(@a), "\\n";'])
                problems, summary = check_loader_logs(s)
            finally:
                s.cleanup()
            verdict = "accepted" if not problems else "rejected"
            print(f"{verdict} {library}: {summary}"
                  + (f"; first problem: {problems[0]}" if problems else ""))
            if (not problems) != should_pass:
                ok = False
                print(f"FAIL preload-check: the checker {verdict} {library}")
    except (CaseError, subprocess.CalledProcessError) as e:
        ok = False
        print(f"FAIL preload-check: {e}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if ok:
        print("PASS preload-check")
    return ok


CASES = {
    "python-script": case_python_script,
    "python-regrtest": case_python_regrtest,
    "perl": case_perl,
    "git": case_git,
    "sqlite3": case_sqlite3,
    "gxx": case_gxx,
}


# ---------------------------------------------------------------------------------------------
# Comparing and reporting.

def first_difference(a, b, context=8):
    """Shows both transcripts around their first differing line (linear, unlike difflib)."""
    la, lb = a.split(b"\n"), b.split(b"\n")
    i = 0
    while i < min(len(la), len(lb)) and la[i] == lb[i]:
        i += 1
    lo = max(0, i - context)
    out = [f"first difference at transcript line {i + 1} "
           f"(plain has {len(la)} lines, preload has {len(lb)})"]
    for label, lines in (("plain", la), ("preload", lb)):
        out.append(f"--- {label}:")
        for n in range(lo, min(len(lines), i + context + 1)):
            mark = ">" if n == i else " "
            out.append(f"{mark}{n + 1:6d}| {lines[n].decode(errors='replace')[:300]}")
    return "\n".join(out)


def run_case(name, preload, keep):
    """Runs one case in both modes. Returns True if it passed; prints why not otherwise."""
    print(f"=== {name}", flush=True)
    sessions = []
    ok = True
    try:
        for mode in ("plain", "preload"):
            s = Session(name, mode, preload)
            sessions.append(s)
            started = time.monotonic()
            CASES[name](s)
            problems, summary = check_loader_logs(s)
            print(f"{mode:8s} {time.monotonic() - started:6.1f}s  "
                  f"{len(s.transcript)} transcript bytes; loader saw {summary}", flush=True)
            if problems:
                ok = False
                what = "preload not in effect" if mode == "preload" else "plain run not plain"
                print(f"FAIL {name}: {what}:\n  " + "\n  ".join(problems))
        plain, preloaded = (bytes(s.transcript) for s in sessions)
        if plain != preloaded:
            ok = False
            print(f"FAIL {name}: output differs under LD_PRELOAD={preload}")
            print(first_difference(plain, preloaded))
            for s in sessions:
                print(f"--- stderr of the {s.mode} run (tail):")
                print(s.stderr_log.decode(errors="replace")[-4000:])
    except CaseError as e:
        ok = False
        print(f"FAIL {name}: {e}")
    finally:
        for s in sessions:
            if keep:
                (s.root / "transcript.txt").write_bytes(s.transcript)
                (s.root / "stderr.txt").write_bytes(s.stderr_log)
                print(f"kept {s.root} (transcript.txt, stderr.txt, ld-debug/)")
            else:
                s.cleanup()
    if ok:
        print(f"PASS {name}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preload", required=True,
                        help="allocator shared library to put in LD_PRELOAD")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary trees (and print their paths)")
    parser.add_argument("programs", nargs="+", choices=["preload-check", *CASES, "all"],
                        metavar="PROGRAM",
                        help=f"one or more of: preload-check, {', '.join(CASES)}, all "
                             "(preload-check tests the check that the preload took effect)")
    args = parser.parse_args()
    # The loader logs the library under the exact string given in LD_PRELOAD, so give it one
    # unambiguous absolute spelling.
    preload = os.path.abspath(args.preload)
    if not os.path.isfile(preload):
        parser.error(f"--preload {args.preload}: no such file")
    names = ["preload-check", *CASES] if "all" in args.programs else args.programs
    failed = [n for n in names
              if not (check_the_checker(preload) if n == "preload-check"
                      else run_case(n, preload, args.keep))]
    print(f"{len(names) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
