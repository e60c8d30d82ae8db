#!/usr/bin/env bash
# Keeps the layers of src/ (src/README.md) honest:
#   1. a file includes only from its own folder and the folders below it
#      (platform <- base <- core <- api <- profiler, heapcheck), and profiler/ and heapcheck/
#      see the allocator only through api/introspection.h;
#   2. system calls (syscall, mmap, madvise, open, read, write, ptrace, clone, sigaction, ...)
#      appear only in src/platform/.
# Prints one line per violation (file:line: what) and exits 1 if there is any.
#
#   scripts/check-layers.sh [SRC_DIR]      default: src/ of this checkout
#
# scripts/check-layers-debt.txt lists files (relative to SRC_DIR) whose known violations are
# reported but do not fail yet; each line says why and what removes it. It should shrink.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=${1:-src}
[ -d "$SRC" ] || { echo "check-layers: no such directory: $SRC" >&2; exit 2; }
DEBT=${CHECK_LAYERS_DEBT:-scripts/check-layers-debt.txt}
exec python3 - "$SRC" "$DEBT" <<'PY'
import os, re, sys

src, debt_file = sys.argv[1], sys.argv[2]
debt = set()
if os.path.exists(debt_file):
    for line in open(debt_file):
        line = line.split("#")[0].strip()
        if line:
            debt.add(os.path.normpath(os.path.join(src, line)))
# Which project folders each folder may include from ("gperftools" is include/gperftools/,
# the public headers). Order of layers: platform <- base <- core <- api <- profiler, heapcheck.
ALLOWED = {
    "platform":  {"platform"},
    "base":      {"base", "platform"},
    "core":      {"core", "base", "platform"},
    "api":       {"api", "core", "base", "platform", "gperftools"},
    "profiler":  {"profiler", "base", "platform", "gperftools"},
    "heapcheck": {"heapcheck", "base", "platform", "gperftools"},
}
# The one window the profiler and the checker have onto the allocator's internals.
NARROW = {"profiler": {"api/introspection.h"}, "heapcheck": {"api/introspection.h"}}

# Calls that enter the kernel (or wrap one closely): only src/platform/ makes them.
SYSCALLS = ("syscall mmap mmap64 munmap mremap madvise mprotect mlock munlock mincore brk sbrk "
            "open open64 openat creat close read pread write pwrite readv writev lseek fstat stat "
            "lstat readlink unlink getdents getdents64 ioctl fcntl dup dup2 pipe "
            "ptrace clone fork vfork execve waitpid wait4 kill tgkill tkill "
            "sigaction signal sigprocmask pthread_sigmask sigaltstack "
            "futex membarrier rseq sched_setaffinity sched_getaffinity sched_yield sched_getcpu "
            "process_vm_readv prctl getrlimit setrlimit nanosleep clock_nanosleep "
            "dl_iterate_phdr dlsym dlopen getenv secure_getenv").split()
# A bare call or a global-namespace one (::write), not a member (x.read, p->read) or a
# qualified name of ours (os::write).
call_rx = re.compile(r"(?:(?<![\w.>:$])|(?<![\w:])::)\b(" + "|".join(SYSCALLS) + r")\s*\(")
inc_rx = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
SYS_HEADERS = {"sys/syscall.h", "linux/futex.h", "linux/rseq.h", "sys/ptrace.h", "link.h",
               "dlfcn.h", "sys/mman.h"}

def strip(text):
    """Removes comments and string/char literals, keeping line numbers."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)

problems = []
for root, _, files in os.walk(src):
    for name in sorted(files):
        if not name.endswith((".h", ".cc", ".c")):
            continue
        path = os.path.join(root, name)
        rel = os.path.relpath(path, src)
        folder = rel.split(os.sep)[0] if os.sep in rel else ""
        if folder not in ALLOWED:
            problems.append(f"{path}:1: file outside the layer folders ({', '.join(ALLOWED)})")
            continue
        text = open(path, encoding="utf-8", errors="replace").read()
        for lineno, line in enumerate(text.splitlines(), 1):
            m = inc_rx.match(line)
            if not m:
                continue
            kind, target = m.groups()
            if kind == "<":
                if folder != "platform" and target in SYS_HEADERS:
                    problems.append(f"{path}:{lineno}: system header <{target}> outside src/platform/")
                continue
            top = target.split("/")[0] if "/" in target else folder
            if "/" not in target:
                problems.append(f'{path}:{lineno}: include "{target}" without its folder (write "{folder}/{target}")')
            elif target in NARROW.get(folder, ()):
                pass
            elif top not in ALLOWED[folder]:
                problems.append(f'{path}:{lineno}: {folder}/ may not include "{target}" '
                                f'(allowed: {", ".join(sorted(ALLOWED[folder] | NARROW.get(folder, set())))})')
        if folder == "platform":
            continue
        for lineno, line in enumerate(strip(text).splitlines(), 1):
            for m in call_rx.finditer(line):
                problems.append(f"{path}:{lineno}: system call {m.group(1)}() outside src/platform/")

owed = [p for p in problems if os.path.normpath(p.split(":")[0]) in debt]
problems = [p for p in problems if p not in owed]
for p in owed:
    print("debt: " + p)
for p in problems:
    print(p)
if owed:
    print(f"check-layers: {len(owed)} known violation(s) in {debt_file}, not failing")
if problems:
    print(f"check-layers: {len(problems)} violation(s) (see src/README.md for the rules)", file=sys.stderr)
    sys.exit(1)
print(f"check-layers: {src} keeps its layers")
PY
