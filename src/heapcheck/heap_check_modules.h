// The loaded objects as the heap checker sees them: where their code and writable data
// are, where their static TLS sits relative to the thread pointer, and which of them are
// "system" (the C and C++ runtimes, the dynamic loader, this library: their data is
// bookkeeping, a root at every level) or ignored (HEAP_CHECK_IGNORE_LIBS).
//
// CollectModules walks os::ForEachLoadedModule (dl_iterate_phdr), which takes the dynamic loader's lock: call it
// before taking the checker's lock (heap_checker.h, SYNCHRONIZATION), never while other
// threads are stopped.
#ifndef TCMALLOC_HEAP_CHECK_MODULES_H_
#define TCMALLOC_HEAP_CHECK_MODULES_H_

#include <cstddef>
#include <cstdint>

#include "heapcheck/heap_check_memory.h"

namespace tcm::heapcheck {

struct ModuleInfo {
  char path[256];     // "" for the main program
  uintptr_t lo, hi;   // extent of its PT_LOAD segments
  Range writable[4];  // its writable PT_LOAD segments (hidden)
  int num_writable;
  intptr_t tls_offset;  // static TLS block relative to the thread pointer
  size_t tls_size;      // 0 if none (or dynamic TLS)
  bool system;          // C/C++ runtime, dynamic loader, this library
  bool loader;          // the dynamic loader
  bool ignored;         // named in the ignore list
};

// Every loaded object, sorted by address. ignore_libs: library path substrings separated
// by ':' or ',' (HEAP_CHECK_IGNORE_LIBS).
void CollectModules(const char* ignore_libs, MappedArray<ModuleInfo>* out);

// The module whose segments contain the call before return address pc, or nullptr.
const ModuleInfo* ModuleOf(const MappedArray<ModuleInfo>& modules, uintptr_t pc);

}  // namespace tcm::heapcheck

#endif  // TCMALLOC_HEAP_CHECK_MODULES_H_
