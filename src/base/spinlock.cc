#include "base/spinlock.h"

#include "platform/os.h"

namespace tcm {

void SpinLock::LockSlow() {
  // Critical sections are a few hundred instructions: spinning a little usually wins.
  for (int i = 0; i < 100; ++i) {
    int expected = 0;
    if (state_.load(std::memory_order_relaxed) == 0 &&
        state_.compare_exchange_weak(expected, 1, std::memory_order_acquire,
                                     std::memory_order_relaxed))
      return;
    __builtin_ia32_pause();
  }
  // Announce a sleeper (state 2) and wait; whoever unlocks a 2 wakes one waiter. We keep
  // the lock as 2 when we take it, because other sleepers may still be waiting.
  while (state_.exchange(2, std::memory_order_acquire) != 0) os::FutexWait(&state_, 2);
}

void SpinLock::WakeOne() { os::FutexWake(&state_, 1); }

}  // namespace tcm
