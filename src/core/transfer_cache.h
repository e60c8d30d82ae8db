// TransferCache: the design's "lists of a well-known length". A front end that flushes or
// refills exactly num_objects_to_move objects hands over or takes a whole batch without
// walking the central list's spans; only when the cache is full or empty does the central
// list do the per-object work.
//
// The cache is an array of object pointers (a stack of batches), not a set of chains
// linked through the objects: moving a batch copies pointers and never reads or writes an
// object, where walking a chain is a series of dependent loads, one cache miss after
// another for objects that went cold. The low-water mark (the fewest objects held since
// the last maintenance tick) says how many sat unused a whole interval: those go back to
// the spans at the tick, oldest first (memory parked here would otherwise keep spans alive
// forever: gperftools #1132). An idle cache's low-water mark is all it holds; a busy one's
// bottom is as idle. A stack hands out its top, so in a program whose use of a class
// swings around some level the batches below that level stay parked, pinning their spans:
// a drain that waited for an interval with no use at all never took them.
//
// Locking: lock_ guards the array; it is a leaf lock (nothing else is taken under it).
#ifndef TCMALLOC_TRANSFER_CACHE_H_
#define TCMALLOC_TRANSFER_CACHE_H_

#include <cstddef>
#include <cstdint>

#include "base/spinlock.h"

namespace tcm {

class TransferCache {
 public:
  // Bytes of objects a class may park here, and at most kMaxObjects objects (the array is
  // 8 bytes an object: 256 KiB at most a class, touched only as far as it is used). A
  // program that frees and re-allocates a few hundred KiB of small objects at a time (a
  // tree, a request's objects) moves them through here a batch at a time. The object
  // bound binds below 16 bytes only: at 8192 it held 128 KiB of 16-byte nodes, and a tree
  // of 32767 crossed the spans (binary trees of depth 14 and 16: 8.6 and 9.5 ns a node,
  // 8.2 and 9.2 at 32768).
  static constexpr size_t kMaxBytesPerClass = 512 * 1024;
  static constexpr size_t kMaxObjects = 32768;
  // Classes of objects this big park one batch for the CPU that freed them and allocates
  // them too (`local`); the whole capacity is for batches on their way to other CPUs. A
  // CPU's own overflow comes back to it soon or sits idle, and parked it is memory no
  // other class can use: t-test1 at 64 KiB held 7 MiB here at exit, and one batch each
  // took its peak from 33.2 to 30.6 MiB. A consumer thread's frees (xmalloc's 16-32 KiB
  // blocks) are what the capacity is for: at one batch that pair ran 1.6x slower.
  static constexpr size_t kLocalOneBatchBytes = 8192;

  constexpr TransferCache() = default;

  // The array lives outside this object, in `storage` (room for capacity_for() pointers),
  // so that setting up every class at start-up touches only these few words.
  // storage == nullptr: no room (every batch goes to the spans).
  void Init(size_t object_size, int batch, void* storage);
  // Whole batches: at least one, at most the byte and object bounds allow.
  static int capacity_for(size_t object_size, int batch);

  // Stores exactly batch() objects; false when full (the caller keeps them). local: the
  // batch was freed on a CPU (per-thread mode: by a thread) that allocates the class too
  // (see kLocalOneBatchBytes).
  bool TryInsert(void* const* objs, bool local = false);
  // Takes the batch stored last into out[0, batch()), in the order it was stored; false
  // when empty. An empty cache is seen without taking the lock.
  bool TryRemove(void** out);
  // Removes everything, handing it to f(objs, count) in pieces, called without the lock.
  template <typename F>
  void Drain(F f);
  // Maintenance tick: hands the whole batches below the low-water mark since the previous
  // call (those that sat unused all along; everything, for a cache nobody took from) to
  // f, the oldest first, and starts a new interval. Returns how many objects.
  template <typename F>
  int DrainBelowLowWater(F f);

  int batch() const { return batch_; }
  // Racy (no lock): a hint that TryInsert would fail.
  bool LooksFull(bool local = false) const {
    return __atomic_load_n(&used_, __ATOMIC_RELAXED) + batch_ > (local ? local_capacity_ : capacity_);
  }
  int capacity() const { return capacity_; }
  int local_capacity() const { return local_capacity_; }
  size_t free_objects() const { return static_cast<size_t>(__atomic_load_n(&used_, __ATOMIC_RELAXED)); }
  SpinLock* lock() { return &lock_; }
  void ResetLockAfterFork() { lock_.ResetAfterFork(); }

 private:
  SpinLock lock_;
  int batch_ = 0;
  int capacity_ = 0;  // objects, a multiple of batch_
  int local_capacity_ = 0;  // what local inserts may fill: capacity_, or one batch for big objects
  int used_ = 0;  // objects held, objs_[bottom_, bottom_ + used_); whole batches but during a drain
  int bottom_ = 0;  // where the oldest object is: a drain takes from there without moving the rest
  int low_water_ = 0;  // the fewest objects held since the last DrainBelowLowWater
  void** objs_ = nullptr;

  // Both drains: everything, or the whole batches below the low-water mark; returns how
  // many objects went to f.
  template <typename F>
  int DrainFromBottom(F f, bool everything);
};

template <typename F>
void TransferCache::Drain(F f) {
  DrainFromBottom(f, true);
}

template <typename F>
int TransferCache::DrainBelowLowWater(F f) {
  return DrainFromBottom(f, false);
}

template <typename F>
int TransferCache::DrainFromBottom(F f, bool everything) {
  // From the bottom, a piece at a time without the lock while f runs: inserts and removes
  // meanwhile work on the top, whose batches stay whole, and a remove that goes below what
  // is left to drain lowers the count (those objects were wanted after all). The count is
  // fixed at the start: threads that keep inserting must not keep the drainer here.
  constexpr int kStep = 256;
  void* taken[kStep];
  int left = -1;
  int drained = 0;
  if (capacity_ == 0) return 0;  // no storage (Init with nullptr), or never set up
  for (;;) {
    int n = 0;
    {
      SpinLockHolder h(&lock_);
      if (left < 0) left = everything ? used_ : low_water_ - low_water_ % batch_;
      if (left > used_) left = used_;
      n = left < kStep ? left : kStep;
      __builtin_memcpy(taken, objs_ + bottom_, static_cast<size_t>(n) * sizeof(void*));
      bottom_ = used_ == n ? 0 : bottom_ + n;
      __atomic_store_n(&used_, used_ - n, __ATOMIC_RELAXED);
      left -= n;
      if (left == 0) low_water_ = used_;  // the next interval starts with what is left
    }
    if (n == 0) return drained;
    drained += n;
    f(taken, n);
  }
}

}  // namespace tcm

#endif  // TCMALLOC_TRANSFER_CACHE_H_
