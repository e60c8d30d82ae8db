// System allocator: where the page heap's memory comes from.
//
// Sources are tried in order (mmap, then sbrk, unless one is disabled), and memory is always
// requested in page-aligned chunks of at least kMinSystemAlloc, never per allocation.
// Locking: callers hold the page heap lock (the arena holds its own lock); the counters are
// only written under those locks.
#ifndef TCMALLOC_SYSTEM_ALLOC_H_
#define TCMALLOC_SYSTEM_ALLOC_H_

#include <cstddef>

#include "base/spinlock.h"

namespace tcm {

class SystemAllocator {
 public:
  enum Source { kMmap = 0, kSbrk = 1, kNumSources = 2 };

  constexpr SystemAllocator() = default;

  // Returns zero-filled memory of at least `bytes` (rounded up to a whole number of
  // `alignment`-multiples), aligned to `alignment` (a power of two >= kPageSize);
  // *actual receives the size obtained. nullptr if every enabled source failed.
  void* Alloc(size_t bytes, size_t alignment, size_t* actual);

  // Returns physical memory of a range we obtained back to the OS; false if unsupported.
  bool Release(void* p, size_t bytes);

  void set_enabled(Source s, bool on) { enabled_[s] = on; }
  bool enabled(Source s) const { return enabled_[s]; }
  size_t bytes_from(Source s) const { return bytes_[s]; }
  size_t total_bytes() const { return bytes_[kMmap] + bytes_[kSbrk]; }

 private:
  void* AllocMmap(size_t bytes, size_t alignment);
  void* AllocSbrk(size_t bytes, size_t alignment);

  SpinLock sbrk_lock_;  // sbrk is process-global state
  bool enabled_[kNumSources] = {true, true};
  size_t bytes_[kNumSources] = {0, 0};
};

}  // namespace tcm

#endif  // TCMALLOC_SYSTEM_ALLOC_H_
