// TransferCache: the design's "lists of a well-known length". A thread cache that flushes
// or refills exactly num_objects_to_move objects hands over or takes a whole chain in O(1),
// without walking the central list's spans; only when the slots are full or empty does the
// central list do the per-object work.
//
// Each slot holds one chain (head..tail) of exactly `batch` objects. `touched` records use
// since the last maintenance tick, so idle slots can be drained back to the spans (memory
// parked here would otherwise keep spans alive forever: gperftools #1132).
//
// Locking: lock_ guards the slots; it is a leaf lock (nothing else is taken under it).
#ifndef TCMALLOC_TRANSFER_CACHE_H_
#define TCMALLOC_TRANSFER_CACHE_H_

#include <cstddef>
#include <cstdint>

#include "base/spinlock.h"

namespace tcm {

class TransferCache {
 public:
  // Bytes a class may park here; bounds the memory held by big classes. Small classes get
  // up to kMaxSlots chains: a program that frees and re-allocates a few hundred KiB of
  // small objects at a time (a tree, a request's objects) then moves them through here in
  // O(1) per batch instead of one object at a time through the spans (64 slots held only
  // 2048 objects of 16 B; 1024 slots make the 16-byte class's bound the byte bound, 32768
  // objects, and took binary trees from 1.38 to 1.30 s: bench/README.md). The slot array
  // (16 KiB for 1024 slots) is touched only as far as it is used.
  static constexpr int kMaxSlots = 1024;
  static constexpr size_t kMaxBytesPerClass = 512 * 1024;

  constexpr TransferCache() = default;

  // The slots live outside this object, in `storage` (room for slots_for() chains), so
  // that setting up every class at start-up touches only these few words: the slot arrays
  // (4 KiB a class) become resident only as they are used. storage == nullptr: no slots.
  void Init(size_t object_size, int batch, void* storage);
  static int slots_for(size_t object_size, int batch);
  static constexpr size_t kSlotBytes = 2 * sizeof(void*);

  // Stores a chain of exactly batch() objects; false when full (the caller keeps it).
  bool TryInsert(void* head, void* tail);
  // Takes one whole chain; false when empty.
  bool TryRemove(void** head, void** tail);
  // Removes every chain, handing each to f(head, tail, count), called without the lock.
  template <typename F>
  void Drain(F f);
  // Drains only if the cache was not used since the previous call (maintenance tick).
  template <typename F>
  void DrainIfIdle(F f);

  int batch() const { return batch_; }
  // Racy (no lock): a hint that TryInsert would fail. Counts as use (the cache is wanted).
  bool LooksFull() {
    if (__atomic_load_n(&used_, __ATOMIC_RELAXED) < max_slots_) return false;
    if (!__atomic_load_n(&touched_, __ATOMIC_RELAXED)) __atomic_store_n(&touched_, true, __ATOMIC_RELAXED);
    return true;
  }
  int max_slots() const { return max_slots_; }
  size_t free_objects() const {
    return static_cast<size_t>(__atomic_load_n(&used_, __ATOMIC_RELAXED)) * static_cast<size_t>(batch_);
  }
  SpinLock* lock() { return &lock_; }
  void ResetLockAfterFork() { lock_.ResetAfterFork(); }

 private:
  struct Slot {
    void* head;
    void* tail;
  };
  SpinLock lock_;
  int batch_ = 0;
  int max_slots_ = 0;
  int used_ = 0;
  bool touched_ = false;
  Slot* slots_ = nullptr;
};

template <typename F>
void TransferCache::Drain(F f) {
  // A few chains at a time: the slots would be 16 KiB of stack, and the lock is not held
  // while f runs.
  constexpr int kStep = 32;
  // At most as many chains as were there at the start: threads that keep inserting must
  // not keep the drainer here.
  Slot taken[kStep];
  int left = kMaxSlots;
  while (left > 0) {
    int n = 0;
    {
      SpinLockHolder h(&lock_);
      if (left == kMaxSlots) left = used_;
      while (n < kStep && n < left && used_ > 0) {
        taken[n++] = slots_[used_ - 1];
        __atomic_store_n(&used_, used_ - 1, __ATOMIC_RELAXED);
      }
    }
    if (n == 0) return;
    left -= n;
    for (int i = 0; i < n; ++i) f(taken[i].head, taken[i].tail, batch_);
  }
}

template <typename F>
void TransferCache::DrainIfIdle(F f) {
  {
    SpinLockHolder h(&lock_);
    bool idle = !__atomic_load_n(&touched_, __ATOMIC_RELAXED);
    __atomic_store_n(&touched_, false, __ATOMIC_RELAXED);
    if (!idle || used_ == 0) return;
  }
  Drain(f);
}

}  // namespace tcm

#endif  // TCMALLOC_TRANSFER_CACHE_H_
