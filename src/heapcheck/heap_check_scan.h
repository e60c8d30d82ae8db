// The heap checker's liveness flood: which tracked objects can still be reached from the
// program's roots.
//
// Roots (see docs/heap-checker.md, "What counts as reachable"):
//   global data   every readable, writable private mapping of the process — data and bss of
//                 every loaded object, anonymous mappings (other allocators' arenas, such as
//                 CPython's), the main thread's static TLS and thread descriptor — minus the
//                 tcmalloc heap itself, the allocator's own globals, and the unused parts of
//                 thread stacks;
//   thread data   each thread's stack from its stack pointer (less the 128-byte red zone) to
//                 the end of its stack mapping (which holds glibc's thread descriptor and
//                 static TLS), and its registers;
//   system data   always, in every mode: the writable data of the C and C++ runtimes and the
//                 dynamic loader, every thread's descriptor and those libraries' static TLS;
//   objects       tracked objects flagged ignored/disabled, or that the checker's policy
//                 treats as roots (allocated by the dynamic loader, by an ignored library,
//                 before main() in minimal mode).
// From the roots, every aligned word that points into a tracked object — at its start, or at
// most max_pointer_offset bytes inside — makes that object reachable, and its contents are
// scanned in turn.
//
// Stacks of threads that have exited but whose memory glibc keeps for reuse are recognised
// by the thread descriptor still at their top, and skipped: their stale frames would hide
// leaks made in those threads.
//
// Everything here runs with all other threads stopped and all allocator locks held by the
// caller: no malloc, no libc locks.
#ifndef TCMALLOC_HEAP_CHECK_SCAN_H_
#define TCMALLOC_HEAP_CHECK_SCAN_H_

#include <cstddef>
#include <cstdint>

#include "heapcheck/heap_check_modules.h"
#include "heapcheck/heap_check_memory.h"
#include "heapcheck/heap_check_table.h"
#include "heapcheck/thread_list.h"

namespace tcm::heapcheck {

// One line of /proc/self/maps.
struct MapEntry {
  uintptr_t lo, hi;  // hidden
  bool readable, writable, shared, anonymous, device;
  bool guard;        // no access at all: a stack guard page, or reserved address space
};

struct ScanConfig {
  bool global_live = true;         // global data are roots
  bool thread_live = true;         // thread stacks and registers are roots
  size_t source_alignment = 8;     // where pointers may sit in memory
  int64_t max_pointer_offset = 1024;  // -1: any interior pointer counts
  uintptr_t self_sp = 0;           // the checking thread's stack is scanned from here up
  uintptr_t self_tp = 0;           // its thread pointer
  uintptr_t self_altstack = 0;     // its alternate signal stack, 0 if none
  size_t tcb_size = 2368;          // sizeof(struct pthread) of this glibc
};

// What the flood found, for diagnostics (PERFTOOLS_VERBOSE).
struct ScanStats {
  size_t root_ranges = 0;
  size_t root_bytes = 0;
  size_t dead_stacks = 0;
  size_t live_objects = 0;
  size_t live_bytes = 0;
  bool copied_safely = true;  // process_vm_readv was available
};

struct ScanObject {
  uintptr_t start;  // hidden
  uintptr_t end;    // hidden: start + usable size
  AllocRecord* record;
  bool live;
  bool root;
};

class LivenessScan {
 public:
  LivenessScan() = default;
  LivenessScan(const LivenessScan&) = delete;
  LivenessScan& operator=(const LivenessScan&) = delete;

  // Copies every tracked object (with its usable size from the allocator) into a sorted
  // array. False if memory ran out.
  bool Build(AllocTable* table);
  size_t size() const { return objects_.size(); }
  ScanObject& object(size_t i) { return objects_[i]; }

  // Reads /proc/self/maps and walks the page heap's spans. REQUIRES the allocator's locks.
  bool GatherMemoryMap();

  // Floods from the roots. Objects whose `root` is set are roots themselves. May be run
  // again (e.g. with another alignment): it starts by clearing every `live`.
  void Flood(const ScanConfig& config, const ModuleInfo* modules, size_t num_modules,
             const ThreadList& threads, ScanStats* stats);
  // Memory of the checker's own that holds nothing but hidden addresses (the allocation
  // table): not a root, and too big to scan for nothing.
  void ExcludeFromRoots(Range r) { own_.Push(r); }

  // Index of the object containing the address (any offset), or -1.
  long FindContaining(uintptr_t addr) const;

 private:
  long FindForPointer(uintptr_t value) const;
  void MarkAndPush(long i);
  void ScanMemory(uintptr_t from, uintptr_t hi, bool copy);
  void ScanWords(const uintptr_t* words, size_t n);
  void Drain();
  void ComputeRoots(const ScanConfig& config, const ModuleInfo* modules, size_t num_modules,
                    const ThreadList& threads, ScanStats* stats);
  const MapEntry* EntryContaining(uintptr_t addr) const;
  // A dead thread's descriptor at the top of a cached stack, or 0.
  uintptr_t FindDeadDescriptor(const MapEntry& e) const;

  MappedArray<ScanObject> objects_;  // sorted by start
  MappedArray<uint32_t> worklist_;
  MappedArray<MapEntry> maps_;
  MappedArray<Range> heap_;          // the page heap's memory, merged
  MappedArray<Range> roots_;
  MappedArray<Range> cuts_;
  MappedArray<uintptr_t> buffer_;    // bounce buffer for copying root memory
  MappedArray<Range> own_;           // ExcludeFromRoots
  uintptr_t min_start_ = 0;          // revealed bounds of all objects, for a quick filter
  uintptr_t max_end_ = 0;
  size_t alignment_ = 8;
  int64_t max_offset_ = 1024;
  bool copy_ok_ = true;
};

}  // namespace tcm::heapcheck

#endif  // TCMALLOC_HEAP_CHECK_SCAN_H_
