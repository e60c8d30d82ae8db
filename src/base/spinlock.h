// A small lock for the allocator's short critical sections: spin briefly, then sleep on a
// futex. constexpr-constructible so every global lock is constinit (usable before main).
//
// State: 0 = free, 1 = held, 2 = held and somebody may be sleeping on it.
#ifndef TCMALLOC_BASE_SPINLOCK_H_
#define TCMALLOC_BASE_SPINLOCK_H_

#include <atomic>

#include "base/config.h"

namespace tcm {

class SpinLock {
 public:
  constexpr SpinLock() = default;
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

  void Lock() {
    int expected = 0;
    if (TCM_LIKELY(state_.compare_exchange_weak(expected, 1, std::memory_order_acquire,
                                                std::memory_order_relaxed)))
      return;
    LockSlow();
  }
  void Unlock() {
    if (TCM_UNLIKELY(state_.exchange(0, std::memory_order_release) == 2)) WakeOne();
  }
  bool TryLock() {
    int expected = 0;
    return state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }
  bool IsHeld() const { return state_.load(std::memory_order_relaxed) != 0; }

  // After fork() only the forking thread exists in the child; a lock held across fork by
  // the prepare handler is simply made free again.
  void ResetAfterFork() { state_.store(0, std::memory_order_relaxed); }

 private:
  void LockSlow();
  void WakeOne();
  std::atomic<int> state_{0};
};

class SpinLockHolder {
 public:
  explicit SpinLockHolder(SpinLock* l) : lock_(l) { lock_->Lock(); }
  ~SpinLockHolder() { lock_->Unlock(); }
  SpinLockHolder(const SpinLockHolder&) = delete;
  SpinLockHolder& operator=(const SpinLockHolder&) = delete;

 private:
  SpinLock* lock_;
};

}  // namespace tcm

#endif  // TCMALLOC_BASE_SPINLOCK_H_
