#!/usr/bin/env python3
"""Every symbol a gperftools 2.10 library exports that its public headers declare must be
exported by ours, with the same (mangled) name.

  symbol_check.py DEBIAN_LIB OUR_LIB HEADER_DIR EXEMPT_FILE

"Declared in the headers" is decided from the headers themselves: a C function whose
name appears in them followed by "(", or a member of a class they define (MallocExtension,
SysAllocator, MallocHook, HeapLeakChecker, HeapLeakChecker::Disabler, HeapCleaner) whose
name appears in them, or the vtable/typeinfo of such a class. EXEMPT_FILE lists the
declared symbols a program cannot reach (private members only gperftools' own code calls),
each with its reason; an exemption that is no longer needed is an error too, so the list
stays true.
"""
import os
import re
import subprocess
import sys

CLASSES = ["MallocExtension", "SysAllocator", "MallocHook", "HeapLeakChecker::Disabler",
           "HeapLeakChecker", "HeapCleaner"]


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True,
                         capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TtWwDdBbRrVvu" and parts[1] not in "tdbr":
            names.add(parts[2].split("@")[0])
    return names


def demangle(names):
    names = sorted(names)
    out = subprocess.run(["c++filt"], input="\n".join(names), check=True,
                         capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out))


def declared_words(header_dir):
    words = set()
    for name in os.listdir(header_dir):
        if not name.endswith(".h") or name == "profiler.h":  # the CPU profiler is out of scope
            continue
        text = open(os.path.join(header_dir, name), encoding="utf-8", errors="replace").read()
        text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
        words |= set(re.findall(r"~?\b[A-Za-z_]\w*(?=\s*\()", text))
    return words


def is_declared(demangled, words):
    for kind in ("vtable for ", "typeinfo for ", "typeinfo name for "):
        if demangled.startswith(kind):
            return demangled[len(kind):] in CLASSES
    base = demangled.split("(")[0].strip()
    if "::" not in base:
        return base in words
    for cls in CLASSES:
        if base.startswith(cls + "::"):
            member = base[len(cls) + 2:]
            if "::" in member:  # a member of a nested class not defined in the headers
                return False
            return member in words or member == "~" + cls.split("::")[-1]
    return False


def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    debian, ours, header_dir, exempt_file = sys.argv[1:]
    for path in (debian, ours, header_dir, exempt_file):
        if not os.path.exists(path):
            print(f"symbol_check: {path}: not found", file=sys.stderr)
            return 2
    exempt = {}
    for line in open(exempt_file):
        line = line.strip()
        if line and not line.startswith("#"):
            symbol, _, reason = line.partition(" ")
            exempt[symbol] = reason.strip()
    theirs, mine = exported(debian), exported(ours)
    names = demangle(theirs)
    words = declared_words(header_dir)
    required = {m for m, d in names.items() if is_declared(d, words)}
    missing = sorted(required - mine - set(exempt))
    unneeded = sorted(s for s in exempt if s in required and s in mine)
    for m in missing:
        print(f"missing: {m}  ({names[m]})")
    for s in unneeded:
        print(f"exempt but exported: {s}  (drop it from {exempt_file})")
    print(f"symbol_check: {os.path.basename(debian)}: {len(required)} symbols declared in the "
          f"headers, {len(required & mine)} exported by ours, "
          f"{len([s for s in exempt if s in required and s not in mine])} exempt, {len(missing)} missing")
    return 1 if missing or unneeded else 0


if __name__ == "__main__":
    sys.exit(main())
