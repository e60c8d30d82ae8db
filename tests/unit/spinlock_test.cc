// SpinLock: every allocator lock. Checks mutual exclusion under real contention (which
// exercises the futex sleep/wake path, not just the uncontended CAS) and TryLock.
// No timing assertions: sleeps only make the interesting interleavings likely.
#include "base/spinlock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace tcm {
namespace {

// Every allocator lock is a constinit global: the constructor must be constexpr.
constinit SpinLock g_global_lock;

TEST(SpinLock, MutualExclusionUnderContention) {
  SpinLock lock;
  long counter = 0;  // plain, unsynchronised: only the lock protects it
  constexpr int kThreads = 4;
  constexpr long kIncrements = 1000000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (long i = 0; i < kIncrements; ++i) {
        SpinLockHolder h(&lock);
        ++counter;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(counter, kThreads * kIncrements);
  EXPECT_FALSE(lock.IsHeld());
}

TEST(SpinLock, TryLockSemantics) {
  SpinLock lock;
  EXPECT_FALSE(lock.IsHeld());
  EXPECT_TRUE(lock.TryLock());
  EXPECT_TRUE(lock.IsHeld());
  EXPECT_FALSE(lock.TryLock());  // not recursive
  // Another thread cannot take it either.
  bool other = true;
  std::thread([&] { other = lock.TryLock(); }).join();
  EXPECT_FALSE(other);
  lock.Unlock();
  EXPECT_FALSE(lock.IsHeld());
  EXPECT_TRUE(lock.TryLock());
  lock.Unlock();
  // TryLock while another thread holds it via Lock().
  lock.Lock();
  std::thread([&] { other = lock.TryLock(); }).join();
  EXPECT_FALSE(other);
  lock.Unlock();
}

TEST(SpinLock, BlockedWaiterGetsTheLockAfterUnlock) {
  SpinLock lock;
  std::atomic<bool> acquired{false};
  lock.Lock();
  std::thread waiter([&] {
    lock.Lock();  // spins, then sleeps on the futex
    acquired.store(true);
    lock.Unlock();
  });
  // Give the waiter time to go to sleep; whatever it did, it cannot have the lock.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(acquired.load());
  lock.Unlock();  // must wake it
  waiter.join();
  EXPECT_TRUE(acquired.load());
  EXPECT_FALSE(lock.IsHeld());
}

TEST(SpinLock, ResetAfterForkFreesAHeldLock) {
  g_global_lock.Lock();
  g_global_lock.ResetAfterFork();
  EXPECT_FALSE(g_global_lock.IsHeld());
  EXPECT_TRUE(g_global_lock.TryLock());
  g_global_lock.Unlock();
}

}  // namespace
}  // namespace tcm
