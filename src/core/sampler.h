// Heap sampling: about one allocation per TCMALLOC_SAMPLE_PARAMETER bytes is sampled, with
// its stack, so GetHeapSample can tell who holds the memory.
//
// Each thread cache counts down the bytes until its next sample (ThreadCache::sample_left_:
// one subtraction and branch on malloc's fast path; the same countdown also paces the
// scavenger's housekeeping tick, see SampleDue in api/allocation.cc). Gaps are exponentially distributed with
// the parameter as mean, so every byte has the same chance of being sampled and the
// estimate (each sample of size s stands for 1 / (1 - exp(-s/T)) objects) is unbiased.
// A sampled allocation gets its own page run, marked sampled, so free() finds its record
// through the span with no extra cost for unsampled objects.
//
// Locking: the registry's lock guards the list of live samples; it is a leaf lock.
#ifndef TCMALLOC_SAMPLER_H_
#define TCMALLOC_SAMPLER_H_

#include <cstddef>
#include <cstdint>

#include "core/arena.h"
#include "base/spinlock.h"
#include "platform/stack_trace.h"

namespace tcm {

// Next gap (bytes, >= 1) for mean `mean`, from the per-thread generator state *rng.
int64_t NextSampleGap(uint64_t* rng, int64_t mean);

struct SampleRecord {
  size_t requested;  // bytes asked for
  size_t allocated;  // bytes handed out
  size_t alignment;  // requested alignment (0 = malloc's)
  int64_t period;    // sampling parameter when taken
  int depth;
  void* pcs[os::kMaxStackDepth];
  SampleRecord* next;
  SampleRecord* prev;
};

class SampleRegistry {
 public:
  constexpr SampleRegistry() = default;

  // A new record (linked into the live list), or nullptr if metadata memory ran out.
  SampleRecord* Add(Arena* arena, size_t requested, size_t allocated, size_t alignment, int64_t period,
                    void* const* pcs, int depth);
  void Remove(SampleRecord* r);

  // Copies up to cap live records into out (newest first); returns how many are live.
  size_t Snapshot(SampleRecord* out, size_t cap);
  size_t live() const { return __atomic_load_n(&live_, __ATOMIC_RELAXED); }

  SpinLock* lock() { return &lock_; }
  void ResetLockAfterFork() { lock_.ResetAfterFork(); }

 private:
  SpinLock lock_;
  SampleRecord* head_ = nullptr;
  MetadataFreeList<SampleRecord> alloc_;
  size_t live_ = 0;
};

// Estimated number of objects one sample of `size` bytes stands for at parameter `period`.
double SampleWeight(size_t size, int64_t period);

}  // namespace tcm

#endif  // TCMALLOC_SAMPLER_H_
