// The heap profiler of libtcmalloc (public API: gperftools/heap-profiler.h).
//
// How it records: HeapProfilerStart installs one new hook and one delete hook
// (malloc_hook.h). Installed hooks send every malloc and free through the slow path, which
// calls them with no allocator lock held; so the profiler sees every allocation (not a
// sample) and costs nothing at all while it is not running: the fast paths are the same
// instructions as in libtcmalloc_minimal. The new hook captures the caller's stack
// (CaptureUserStack: the allocator's frames removed, no malloc) and records
// address -> {bytes, bucket} and bucket (stack) -> {alloc, free counts and bytes} in a
// HeapProfileTable, whose memory comes from mmap. The delete hook moves the object's bytes
// to its bucket's free counts.
//
// Dumps: gperftools' text format (heap_profile_table.h) plus MAPPED_LIBRARIES and the
// contents of /proc/self/maps, formatted in an mmap'ed buffer and written with write(2),
// into <prefix>.NNNN.heap, or <prefix>_<pid>.NNNN.heap in a forked child (it inherits the
// parent's records, which are its memory too, and numbers its own files from 0001).
// Triggers, checked after each recorded allocation: HEAP_PROFILE_ALLOCATION_INTERVAL bytes
// allocated since the last dump, in-use bytes above the previous high-water mark by
// HEAP_PROFILE_INUSE_INTERVAL, HEAP_PROFILE_TIME_INTERVAL seconds since the last dump (so a
// program that stops allocating stops dumping, as in gperftools); plus a final dump at exit.
//
// Locks: the control lock serialises Start/Stop/exit; the table lock guards the table and
// the dump state and is taken by the hooks (order: control, then table). Neither is held
// while calling anything that may malloc, and the allocator never calls into the profiler
// under its own locks, so they order freely against the allocator's. Around fork() both are
// held (registered after the allocator's handlers, so ours run first in the prepare phase).
#ifndef TCMALLOC_HEAP_PROFILER_H_INTERNAL_
#define TCMALLOC_HEAP_PROFILER_H_INTERNAL_

#endif  // TCMALLOC_HEAP_PROFILER_H_INTERNAL_
