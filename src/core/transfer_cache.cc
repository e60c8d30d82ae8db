#include "core/transfer_cache.h"

namespace tcm {

int TransferCache::capacity_for(size_t object_size, int batch) {
  if (batch <= 0 || object_size == 0) return 0;
  size_t n = kMaxBytesPerClass / object_size;
  if (n > kMaxObjects) n = kMaxObjects;
  size_t batches = n / static_cast<size_t>(batch);
  if (batches < 1) batches = 1;
  return static_cast<int>(batches * static_cast<size_t>(batch));
}

void TransferCache::Init(size_t object_size, int batch, void* storage) {
  batch_ = batch;
  objs_ = static_cast<void**>(storage);
  capacity_ = storage == nullptr ? 0 : capacity_for(object_size, batch);
  local_capacity_ = object_size >= kLocalOneBatchBytes && capacity_ > batch ? batch : capacity_;
}

bool TransferCache::TryInsert(void* const* objs, bool local) {
  SpinLockHolder h(&lock_);
  if (used_ + batch_ > (local ? local_capacity_ : capacity_)) return false;
  if (bottom_ + used_ + batch_ > capacity_) {
    // Room below, left by a maintenance drain: the stack moves down once.
    __builtin_memmove(objs_, objs_ + bottom_, static_cast<size_t>(used_) * sizeof(void*));
    bottom_ = 0;
  }
  __builtin_memcpy(objs_ + bottom_ + used_, objs, static_cast<size_t>(batch_) * sizeof(void*));
  __atomic_store_n(&used_, used_ + batch_, __ATOMIC_RELAXED);
  return true;
}

bool TransferCache::TryRemove(void** out) {
  // Looked at without the lock first: while a program's working set is bigger than the
  // cache (trees of 2^16 nodes and more), nearly every refill finds it empty, and taking the
  // lock only to see that cost ~1% of such a program. An insert racing with this look is
  // missed as if it had come just after, which the lock would not have prevented either.
  if (__atomic_load_n(&used_, __ATOMIC_RELAXED) < batch_) return false;
  SpinLockHolder h(&lock_);
  if (used_ < batch_) return false;
  __atomic_store_n(&used_, used_ - batch_, __ATOMIC_RELAXED);
  if (used_ < low_water_) low_water_ = used_;
  __builtin_memcpy(out, objs_ + bottom_ + used_, static_cast<size_t>(batch_) * sizeof(void*));
  if (used_ == 0) bottom_ = 0;
  return true;
}

}  // namespace tcm
