#include "core/transfer_cache.h"

namespace tcm {

int TransferCache::slots_for(size_t object_size, int batch) {
  size_t chain_bytes = object_size * static_cast<size_t>(batch);
  size_t slots = chain_bytes == 0 ? 0 : kMaxBytesPerClass / chain_bytes;
  if (slots < 1) slots = 1;
  if (slots > kMaxSlots) slots = kMaxSlots;
  return static_cast<int>(slots);
}

void TransferCache::Init(size_t object_size, int batch, void* storage) {
  static_assert(sizeof(Slot) == kSlotBytes);
  batch_ = batch;
  slots_ = static_cast<Slot*>(storage);
  max_slots_ = storage == nullptr ? 0 : slots_for(object_size, batch);
}

bool TransferCache::TryInsert(void* head, void* tail) {
  SpinLockHolder h(&lock_);
  __atomic_store_n(&touched_, true, __ATOMIC_RELAXED);
  if (used_ >= max_slots_) return false;
  slots_[used_] = Slot{head, tail};
  __atomic_store_n(&used_, used_ + 1, __ATOMIC_RELAXED);
  return true;
}

bool TransferCache::TryRemove(void** head, void** tail) {
  SpinLockHolder h(&lock_);
  __atomic_store_n(&touched_, true, __ATOMIC_RELAXED);
  if (used_ == 0) return false;
  __atomic_store_n(&used_, used_ - 1, __ATOMIC_RELAXED);
  *head = slots_[used_].head;
  *tail = slots_[used_].tail;
  return true;
}

}  // namespace tcm
