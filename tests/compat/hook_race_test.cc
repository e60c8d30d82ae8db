// Issue 16, defect (2): adding and removing hooks concurrently must never leave the fast-path
// limits saying "no hooks" while a hook is installed. Churn threads add and remove hooks of
// their own in a loop (so the hook count keeps touching zero); the checker installs its hook
// and checks that each of its following allocations reaches it. A stale "no hooks" limit
// shows up as an allocation served by the fast path that the hook never saw.
#include <gperftools/malloc_hook.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

thread_local bool t_is_checker = false;
std::atomic<const void*> g_last_seen{nullptr};
std::atomic<bool> g_stop{false};

void CheckerHook(const void* p, size_t) {
  if (t_is_checker) g_last_seen.store(p, std::memory_order_relaxed);
}

template <int kId>
void ChurnHook(const void*, size_t) {}

template <int kId>
void ChurnDeleteHook(const void*) {}

template <int kId>
void Churn() {
  while (!g_stop.load(std::memory_order_relaxed)) {
    ASSERT_TRUE(MallocHook::AddNewHook(&ChurnHook<kId>));
    ASSERT_TRUE(MallocHook::AddDeleteHook(&ChurnDeleteHook<kId>));
    ASSERT_TRUE(MallocHook::RemoveNewHook(&ChurnHook<kId>));
    ASSERT_TRUE(MallocHook::RemoveDeleteHook(&ChurnDeleteHook<kId>));
  }
}

TEST(HookRace, InstalledHookAlwaysFiresWhileOthersChurn) {
  // Fill this thread's cache for the size we use, so the fast path can serve it.
  std::vector<void*> warm;
  for (int i = 0; i < 256; ++i) warm.push_back(malloc(48));
  for (void* p : warm) free(p);

  std::vector<std::thread> churners;
  churners.emplace_back(Churn<0>);
  churners.emplace_back(Churn<1>);
  churners.emplace_back(Churn<2>);
  churners.emplace_back(Churn<3>);
  churners.emplace_back(Churn<4>);

  constexpr int kRounds = 1500000;
  constexpr int kAllocsPerRound = 8;
  long missed = 0;
  for (int round = 0; round < kRounds; ++round) {
    ASSERT_TRUE(MallocHook::AddNewHook(&CheckerHook));
    for (int i = 0; i < kAllocsPerRound; ++i) {
      g_last_seen.store(nullptr, std::memory_order_relaxed);
      t_is_checker = true;
      void* p = malloc(48);
      t_is_checker = false;
      if (g_last_seen.load(std::memory_order_relaxed) != p) ++missed;
      free(p);
    }
    ASSERT_TRUE(MallocHook::RemoveNewHook(&CheckerHook));
  }
  g_stop = true;
  for (auto& t : churners) t.join();
  EXPECT_EQ(missed, 0) << "allocations made while a new-hook was installed that it never saw";
}

}  // namespace
