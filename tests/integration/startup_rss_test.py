#!/usr/bin/env python3
"""Start-up cost: what a trivial C program (tests/integration/startup_rss.c: eight small
blocks and stdio) keeps resident with our library preloaded, against the same program on
glibc's malloc. Memory figures from /proc/self/smaps and VmHWM, no timings. Runs in the
mode the environment selects (scripts/test.sh runs it per-CPU and TCMALLOC_PER_CPU_CACHES=0).

Bounds (KiB), and why (measured at commit time: delta 1008 per-CPU / 968 per-thread, library
mappings 476 resident of which 176 dirty; before issue 12's start-up work 1540 / 1408, 888,
280; with central-list shards, whose lists beyond shard 0 are set up on first use: 992 /
892, 512 resident, 88 dirty, and +28 dirty when the program also runs on a CPU of shard 1;
with the central lists' array and the page heap in .bss instead of .data: 836-972 /
836-960, 376 resident, 44 dirty, anonymous 200-272 where it was 164; with the arena's
blocks of 16 KiB and more in mappings of their own, no record at their start: anonymous
172-212 where it was 208-276, 15 and 10 runs; with the pagemap all zero until
initialisation fills its class root, in .bss instead of .data with 2048 relocations:
772-864 / 784, 284 resident where it was 380, 16 dirty where it was 44, anonymous 228-236;
with each central list set up on its first use (shard 0's too, where all 88 of its lists
were set up at start: 11 pages written) and libgcc's unwinder linked in (-static-libgcc)
instead of libgcc_s mapped: 668-692 / 668, 324 resident, 16 dirty, anonymous 184-200 where
it was 268-280, libgcc_s 0 where it was 120; with libtcmalloc_minimal's heap growths
recording no stack unless sampling is on, so nothing unwinds at start-up: ours 2060-2084
where it was 2132-2176 (glibc's own figure varies 1388-1500 from run to run), 292
resident where it was 320):
  VmHWM(ours) - VmHWM(glibc) <= 900: our image (text ~175 with libgcc's unwinder, read-only
      data and unwind tables ~85, dynamic symbols and relocations ~28, data ~20), allocator
      metadata and the first spans (~190 anonymous), and the pages of libc our start-up
      touches that a plain C program does not (~150); the margin is for fault-around of file
      pages and for a second CPU's first use. The pagemap's load-time relocations (+440) or
      eager per-CPU batches (+60 each) break it.
  Anonymous memory <= 240: the metadata above. Setting up every central list of a shard at
      start (+44 to +80, the second with a CPU of shard 1) breaks it.
  libgcc_s resident: 0. A C program on glibc does not map it; the stack unwinder our samples
      use is linked into the library (-static-libgcc, 24 KiB of text), so preloading us does
      not add libgcc_s's ~120 KiB.
  No call to _Unwind_Resume in the library's code (objdump): with the unwinder linked in,
      a landing pad would resume an exception raised by the program's unwinder with ours.
  Rss of our library's mappings <= 240 (208 with the data ordered, 236 since the hot text went first; 324 before), of which private copies <= 40 (smaps "Anonymous",
      not "Private_Dirty", which also counts file pages still dirty in the page cache: a
      library built seconds before read 512): relocated or written static data. The big
      zero-initialised globals must stay in .bss: in .data (a non-zero member default or a
      constructor argument is enough) the kernel's fault-around maps them from the file
      (g_central and g_pageheap there: 524 resident, 88 private).
  File size of the library's writable load segment (.data, .data.rel.ro, .got) <= 32 KiB:
      the same regression read statically, whatever the host's read-ahead. A member default
      of kSurplusCycle put g_pageheap (59 KiB) back in .data: segment 73 KiB, resident 344
      on an AMD host where the bound of 340 had held with 284 on an Intel one (the whole
      file was resident: its size had grown to the bound). Now 14 KiB.
  The start-up and hot text (src/startup_text.txt, src/hot_text.txt, scripts/hot_text.py):
      with the library in the page cache, as a program meets it on a running system, the
      resident pages of its executable mapping lie in the one 64 KiB fault-around window
      the kernel maps from the mapping's start at its first fault, which holds .init, .plt
      and .text.tcm_startup, the section the linker puts first: 64 KiB, where the two
      windows of .text.tcm_hot were 100 and the 200 KiB of text were all resident before
      that. A function the start-up runs that is missing from the list (or a list that no
      longer matches the code) puts a second window in (removing CpuCache::Init from it, a
      mutation tried: 100 KiB). .text.tcm_startup must start the text and end within its
      first 64 KiB, .text.tcm_hot follow it within 96 KiB and end within the window after
      the text's first 64 KiB boundary, which lies at most 32 KiB past the text's start
      (two windows, 96 KiB, for a program that runs the hot code), and every name listed
      must still be defined. (Assumes the kernel's default fault-around of 64 KiB.)
  The data's order (the same linker script): .rodata.tcm_hot (every string, the size-class
      tables, the options' defaults, then kIndex) lies in the read-only segment before the
      text, after the dynamic symbols and relocations the loader reads, and what comes
      before kIndex's second page ends within that segment's first 64 KiB: the loader's
      first fault maps that window, so with the library cached the mapping before the text
      has <= 64 KiB resident and the one after it (the other read-only data and the unwind
      tables) none. Before, the tables started the segment after the text, whose first
      window was resident as well as the headers' 28 KiB (92 KiB; 64 with kIndex first in
      its section; a string the start-up passes to the kernel, in .rodata.NAME.str, that the
      script did not place, a mutation tried: 52 KiB after the text). The small .bss
      (everything not in .bss.tcm_large) <= 16 KiB (5 now): a big global among the small
      ones spreads them over more pages.
  libc's text: with our library cached, no more of libc's executable mapping resident
      than with a stand-in library of the same size (tests/integration/
      startup_layout_standin.c) and glibc's malloc, compared between runs where libc lies at
      the same place in its 2 MiB. Our library's 64 MiB mapping is 2 MiB-aligned, which puts
      libc just below it at a phase set by libc's size; at Debian 12's, libc's
      clock_gettime lies in a window nothing else touches (944 -> 1008 KiB; our coarse
      clock now calls the vDSO's function, platform/vdso.h). A libc function our start-up
      calls in a window of its own breaks it. Where the kernel places libraries at random
      (no run pairs match), it is not compared.
Usage: startup_rss_test.py STARTUP_RSS_BINARY LIBTCMALLOC_MINIMAL_SO STANDIN_SO"""
import os
import re
import struct
import subprocess
import sys

MAX_DELTA_KIB = 900
MAX_ANON_KIB = 240
MAX_LIB_RSS_KIB = 240
MAX_LIB_DIRTY_KIB = 40
MAX_RW_FILESZ_KIB = 32
MAX_HOT_TEXT_KIB = 96
MAX_SMALL_BSS_KIB = 16
KINDEX = "_ZN3tcm7SizeMap6kIndexE"
FAULT_AROUND = 64 * 1024
HUGE_PAGE = 2 * 1024 * 1024
SRC_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src")
HOT_TEXT_LIST = os.path.join(SRC_DIR, "hot_text.txt")
STARTUP_TEXT_LIST = os.path.join(SRC_DIR, "startup_text.txt")


def read_elf64(path):
    with open(path, "rb") as f:
        elf = f.read()
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        raise SystemExit(f"{path}: not an ELF64 file")
    return elf


def load_segments(elf):
    """(p_flags, p_vaddr, p_filesz, p_memsz) of each PT_LOAD segment."""
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    segments = []
    for i in range(phnum):
        p_type, p_flags, _off, vaddr, _pa, filesz, memsz, _align = struct.unpack_from(
            "<IIQQQQQQ", elf, phoff + i * phentsize)
        if p_type == 1:
            segments.append((p_flags, vaddr, filesz, memsz))
    return segments


def writable_segment_filesz(path):
    """p_filesz of the ELF64 file's writable PT_LOAD segment: the bytes of initialised data
    the kernel maps from the file (zero-initialised data is p_memsz beyond it, .bss)."""
    return sum(filesz for flags, _vaddr, filesz, _memsz in load_segments(read_elf64(path)) if flags & 2)


def elf_layout(path):
    """(sections by name: (address, size), the executable PT_LOAD's (vaddr, memsz)) of an
    ELF64 file."""
    elf = read_elf64(path)
    text_segment = next((vaddr, memsz) for flags, vaddr, _filesz, memsz in load_segments(elf) if flags & 1)
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx][4]
    sections = {}
    for name_off, _type, _flags, addr, _off, size, *_ in headers:
        name = elf[strtab + name_off:elf.index(b"\0", strtab + name_off)].decode()
        sections[name] = (addr, size)
    return sections, text_segment


def check_hot_text(binary, ours, standin):
    """The checks of the start-up and hot text (docstring above); returns whether they passed."""
    sections, (seg_vaddr, seg_size) = elf_layout(ours)
    startup = sections.get(".text.tcm_startup")
    hot = sections.get(".text.tcm_hot")
    if startup is None or hot is None:
        print("FAIL: no .text.tcm_startup or .text.tcm_hot section (src/CMakeLists.txt's linker script not applied)")
        return False
    ok = True
    startup_addr, startup_size = startup
    hot_addr, hot_size = hot
    print(f"start-up text: {startup_size / 1024:.1f} KiB at +{startup_addr - seg_vaddr:#x} of the executable "
          f"segment ({seg_size / 1024:.0f} KiB); hot text: {hot_size / 1024:.1f} KiB after it")
    if startup_addr - seg_vaddr > 512 or startup_addr + startup_size - seg_vaddr > FAULT_AROUND:
        print(f"FAIL: .text.tcm_startup must start the text (only .init and .plt before it) and end within its "
              f"first {FAULT_AROUND // 1024} KiB: shorten src/startup_text.txt's functions")
        ok = False
    if hot_addr < startup_addr + startup_size or hot_addr - (startup_addr + startup_size) > 64 or \
            hot_size > MAX_HOT_TEXT_KIB * 1024:
        print(f"FAIL: .text.tcm_hot must follow .text.tcm_startup and stay within {MAX_HOT_TEXT_KIB} KiB")
        ok = False
    # A program that runs the hot code has the first window and the one after the text's
    # first 64 KiB boundary: the section must end there (src/CMakeLists.txt starts the text
    # 32 KiB below a boundary; at 80 KiB into the file, as the headers left it, the two
    # windows held 112 KiB and the section's last 8 KiB would have needed a third).
    two_windows_end = (seg_vaddr // FAULT_AROUND + 2) * FAULT_AROUND
    print(f"the two windows of a program that runs the hot code: {(two_windows_end - seg_vaddr) // 1024} KiB")
    if hot_addr + hot_size > two_windows_end or two_windows_end - seg_vaddr > 96 * 1024:
        print("FAIL: .text.tcm_hot must end within the window after the text's first 64 KiB boundary, and the "
              "text start at most 32 KiB below that boundary (src/CMakeLists.txt's linker script)")
        ok = False
    defined = set(subprocess.run(["nm", ours], capture_output=True, text=True, check=True).stdout.split())
    for path in (STARTUP_TEXT_LIST, HOT_TEXT_LIST):
        names = [line.strip() for line in open(path) if line.strip() and not line.startswith("#")]
        gone = [n for n in names if n not in defined]
        if gone:
            print(f"FAIL: {len(gone)} function(s) of src/{os.path.basename(path)} no longer in the library "
                  f"({gone[0]} ...): run scripts/hot_text.py")
            ok = False
    # All of it in the page cache, as on a running system, read in afresh: how the pages got
    # there matters (a copy written by cp kept 92 KiB of read-only data resident where the
    # same file read in kept 64: the copy's large folios are mapped whole).
    evict_from_page_cache(ours)
    with open(ours, "rb") as f:
        while f.read(1 << 20):
            pass
    env = dict(os.environ, LD_PRELOAD=ours)
    runs = []
    for _ in range(3):
        out = subprocess.run([binary, "libtcmalloc"], env=env, capture_output=True, text=True, check=True).stdout
        runs.append({k: int(v) for k, v in (kv.split("=", 1) for kv in out.split())})
    if not check_data_layout(ours, runs):
        ok = False
    if not check_libc_text(binary, standin, runs):
        ok = False
    run = min(runs, key=lambda m: m["lib_text_rss_kib"])
    # The first fault maps the window from the mapping's start (the kernel clips the aligned
    # window to the mapping and keeps its length).
    bound_kib = min(FAULT_AROUND, seg_size) // 1024
    print(f"text resident with the library cached: {run['lib_text_rss_kib']} KiB (the first window: "
          f"{bound_kib} KiB, all of the text {seg_size // 1024} KiB)")
    if run["lib_text_rss_kib"] > bound_kib:
        print("FAIL: code outside .text.tcm_startup ran at start-up: `scripts/hot_text.py --check` names it, "
              "scripts/hot_text.py adds it")
        ok = False
    return ok


def check_libc_text(binary, standin, runs):
    """libc's text resident with ours against glibc's malloc with the same layout
    (docstring above); returns whether the check passed."""
    env = dict(os.environ, LD_PRELOAD=standin)
    theirs = []
    for _ in range(3):
        out = subprocess.run([binary, "startup_layout_standin"], env=env, capture_output=True, text=True,
                             check=True).stdout
        theirs.append({k: int(v) for k, v in (kv.split("=", 1) for kv in out.split())})
    # Runs whose libc text starts at the same place in its 2 MiB (which decides the windows).
    pairs = [(m, t) for m in runs for t in theirs
             if m["libc_text_addr"] % HUGE_PAGE == t["libc_text_addr"] % HUGE_PAGE]
    if not pairs:
        print("libc's text: no run of ours and the stand-in with libc in the same windows "
              "(random layout on this kernel), not compared")
        return True
    mine, base = min(pairs, key=lambda p: p[0]["libc_text_rss_kib"] - p[1]["libc_text_rss_kib"])
    print(f"libc's text resident: {mine['libc_text_rss_kib']} KiB with ours, {base['libc_text_rss_kib']} KiB "
          f"with glibc's malloc and the same layout ({len(pairs)} matching runs)")
    if mine["libc_text_rss_kib"] > base["libc_text_rss_kib"]:
        print("FAIL: the library's start-up runs libc code a glibc-malloc program does not (a libc call to "
              "replace with a system call of platform/ or the vDSO's function)")
        return False
    return True


def check_data_layout(ours, runs):
    """The checks of the read-only data's and the .bss's order (docstring above); returns
    whether they passed. runs: the start-up program's figures with the library cached."""
    sections, _text = elf_layout(ours)
    segments = load_segments(read_elf64(ours))
    text_vaddr = next(vaddr for flags, vaddr, _f, _m in segments if flags & 1)
    head_vaddr, head_size = next((vaddr, memsz) for flags, vaddr, _f, memsz in segments if flags == 4)
    hot = sections.get(".rodata.tcm_hot")
    large = sections.get(".bss.tcm_large")
    if hot is None or large is None:
        print("FAIL: no .rodata.tcm_hot or .bss.tcm_large section (src/CMakeLists.txt's linker script not applied)")
        return False
    ok = True
    symbols = {}
    for line in subprocess.run(["nm", "-S", ours], capture_output=True, text=True, check=True).stdout.splitlines():
        fields = line.split()
        if len(fields) == 4:
            symbols[fields[3]] = (int(fields[0], 16), int(fields[1], 16))
    index_addr, index_size = symbols[KINDEX]
    read_end = index_addr + 4096 - head_vaddr  # what a small program reads: up to kIndex's first page
    print(f"hot read-only data: {hot[1] / 1024:.1f} KiB at +{hot[0] - head_vaddr:#x} of the segment before the "
          f"text, kIndex last ({index_size // 1024} KiB), its first page ending at +{read_end:#x}; small .bss "
          f"{sections['.bss'][1] / 1024:.1f} KiB after {large[1] // 1024} KiB of big globals")
    if not (head_vaddr < hot[0] and hot[0] + hot[1] <= head_vaddr + head_size <= text_vaddr) or \
            read_end > FAULT_AROUND or not 0 <= hot[0] + hot[1] - (index_addr + index_size) < 64:
        print(f"FAIL: .rodata.tcm_hot must lie in the read-only segment before the text, end with kIndex, and "
              f"what comes before kIndex's second page end within the segment's first {FAULT_AROUND // 1024} KiB")
        ok = False
    if sections[".bss"][1] > MAX_SMALL_BSS_KIB * 1024:
        print(f"FAIL: .bss {sections['.bss'][1] // 1024} KiB > {MAX_SMALL_BSS_KIB}: a big zero-initialised global "
              f"belongs in .bss.tcm_large (src/CMakeLists.txt), so that the small ones share a few pages")
        ok = False
    head = min(m["lib_head_rss_kib"] for m in runs)
    rodata = min(m["lib_rodata_rss_kib"] for m in runs)
    print(f"read-only data resident with the library cached: {head} KiB before the text (bound "
          f"{FAULT_AROUND // 1024}), {rodata} KiB after it (bound 0)")
    if head > FAULT_AROUND // 1024 or rodata > 0:
        print("FAIL: the start-up read data outside .rodata.tcm_hot's first pages (a table or string that "
              "src/CMakeLists.txt's script does not place there, or kIndex read beyond small sizes)")
        ok = False
    return ok


def evict_from_page_cache(path):
    """A library built seconds before is wholly in the page cache, and the kernel's
    fault-around then maps every cached page near a fault: its mappings read 652 KiB
    resident instead of 496 and VmHWM 190 KiB more, depending only on what the page cache
    holds. Measured as a program meets it after a reboot, the figure is the pages the
    start-up really touches (plus read-ahead). Pages another process maps cannot be
    dropped: CTest runs this test alone (RUN_SERIAL)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # dirty pages cannot be dropped
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def measure(binary, preload):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
        evict_from_page_cache(preload)
    out = subprocess.run([binary, "libtcmalloc"], env=env, capture_output=True, text=True, check=True)
    return {k: int(v) for k, v in (kv.split("=", 1) for kv in out.stdout.split())}


def landing_pad_calls(path):
    """Call sites of _Unwind_Resume in the library's code (objdump -d): cleanups that run
    while an exception passes through our frames."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], capture_output=True, text=True,
                         check=True).stdout
    call = re.compile(r"\b(call|jmp)\b.*<_Unwind_Resume(@[\w.]+)?>")
    return [line.strip() for line in out.splitlines() if call.search(line)]


def main():
    binary, ours, standin = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    # Best of three: a page the kernel maps around a fault (fault-around) varies a little.
    base = min((measure(binary, None) for _ in range(3)), key=lambda m: m["hwm_kib"])
    mine = min((measure(binary, ours) for _ in range(3)), key=lambda m: m["hwm_kib"])
    if mine["lib_rss_kib"] == 0:
        print("FAIL: our library is not among the program's mappings (not preloaded?)")
        return 1
    delta = mine["hwm_kib"] - base["hwm_kib"]
    mode = "per-thread" if os.environ.get("TCMALLOC_PER_CPU_CACHES") == "0" else "per-CPU (default)"
    print(f"mode {mode}: VmHWM glibc {base['hwm_kib']} KiB, ours {mine['hwm_kib']} KiB (+{delta}); "
          f"our library resident {mine['lib_rss_kib']} KiB, dirty {mine['lib_dirty_kib']} KiB; "
          f"anonymous {mine['anon_rss_kib']} KiB (glibc {base['anon_rss_kib']})")
    ok = True
    rw_kib = writable_segment_filesz(ours) // 1024
    print(f"writable segment in the file: {rw_kib} KiB")
    if rw_kib > MAX_RW_FILESZ_KIB:
        print(f"FAIL: writable segment {rw_kib} KiB > {MAX_RW_FILESZ_KIB} (a big global left .bss)")
        ok = False
    if delta > MAX_DELTA_KIB:
        print(f"FAIL: start-up offset {delta} KiB > {MAX_DELTA_KIB}")
        ok = False
    if mine["anon_rss_kib"] > MAX_ANON_KIB:
        print(f"FAIL: anonymous memory {mine['anon_rss_kib']} KiB > {MAX_ANON_KIB} (metadata written at start-up)")
        ok = False
    if mine["libgcc_s_kib"] != 0:
        print(f"FAIL: libgcc_s mapped ({mine['libgcc_s_kib']} KiB resident): the library depends on it again")
        ok = False
    pads = landing_pad_calls(ours)
    if pads:
        print(f"FAIL: {len(pads)} call(s) of _Unwind_Resume in the library (a lock or object with a destructor "
              f"around a call that may throw; declare the callee noexcept): {pads[0]}")
        ok = False
    if mine["lib_rss_kib"] > MAX_LIB_RSS_KIB:
        print(f"FAIL: library mappings resident {mine['lib_rss_kib']} KiB > {MAX_LIB_RSS_KIB}")
        ok = False
    if mine["lib_dirty_kib"] > MAX_LIB_DIRTY_KIB:
        print(f"FAIL: library private copies {mine['lib_dirty_kib']} KiB > {MAX_LIB_DIRTY_KIB}")
        ok = False
    if not check_hot_text(binary, ours, standin):
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
