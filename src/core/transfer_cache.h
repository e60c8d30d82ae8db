// TransferCache: the design's "lists of a well-known length". A front end that flushes or
// refills exactly num_objects_to_move objects hands over or takes a whole batch without
// walking the central list's spans; only when the cache is full or empty does the central
// list do the per-object work.
//
// The cache is an array of object pointers (a stack of batches), not a set of chains
// linked through the objects: moving a batch copies pointers and never reads or writes an
// object, where walking a chain is a series of dependent loads, one cache miss after
// another for objects that went cold. `touched` records use since the last maintenance
// tick, so idle objects can be drained back to the spans (memory parked here would
// otherwise keep spans alive forever: gperftools #1132).
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

  constexpr TransferCache() = default;

  // The array lives outside this object, in `storage` (room for capacity_for() pointers),
  // so that setting up every class at start-up touches only these few words.
  // storage == nullptr: no room (every batch goes to the spans).
  void Init(size_t object_size, int batch, void* storage);
  // Whole batches: at least one, at most the byte and object bounds allow.
  static int capacity_for(size_t object_size, int batch);

  // Stores exactly batch() objects; false when full (the caller keeps them).
  bool TryInsert(void* const* objs);
  // Takes the batch stored last into out[0, batch()), in the order it was stored; false
  // when empty. An empty cache is seen without taking the lock (and not marked as used:
  // there is nothing for the idle drain to keep).
  bool TryRemove(void** out);
  // Removes everything, handing it to f(objs, count) in pieces, called without the lock.
  template <typename F>
  void Drain(F f);
  // Drains only if the cache was not used since the previous call (maintenance tick).
  template <typename F>
  void DrainIfIdle(F f);

  int batch() const { return batch_; }
  // Racy (no lock): a hint that TryInsert would fail. Counts as use (the cache is wanted).
  bool LooksFull() {
    if (__atomic_load_n(&used_, __ATOMIC_RELAXED) + batch_ <= capacity_) return false;
    if (!__atomic_load_n(&touched_, __ATOMIC_RELAXED)) __atomic_store_n(&touched_, true, __ATOMIC_RELAXED);
    return true;
  }
  int capacity() const { return capacity_; }
  size_t free_objects() const { return static_cast<size_t>(__atomic_load_n(&used_, __ATOMIC_RELAXED)); }
  SpinLock* lock() { return &lock_; }
  void ResetLockAfterFork() { lock_.ResetAfterFork(); }

 private:
  SpinLock lock_;
  int batch_ = 0;
  int capacity_ = 0;  // objects, a multiple of batch_
  int used_ = 0;
  bool touched_ = false;
  void** objs_ = nullptr;
};

template <typename F>
void TransferCache::Drain(F f) {
  // A piece at a time: the lock is not held while f runs.
  constexpr int kStep = 256;
  void* taken[kStep];
  // At most as many objects as were there at the start: threads that keep inserting must
  // not keep the drainer here.
  int left = -1;
  for (;;) {
    int n = 0;
    {
      SpinLockHolder h(&lock_);
      if (left < 0) left = used_;
      n = left < kStep ? left : kStep;
      if (n > used_) n = used_;
      __builtin_memcpy(taken, objs_ + (used_ - n), static_cast<size_t>(n) * sizeof(void*));
      __atomic_store_n(&used_, used_ - n, __ATOMIC_RELAXED);
    }
    if (n == 0) return;
    left -= n;
    f(taken, n);
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
