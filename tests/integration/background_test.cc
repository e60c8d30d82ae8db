// Programs that go quiet: after the two-phase program (300 MB of small objects per thread,
// freed) RSS stays at the page heap's reserve while nothing calls the allocator, unless
//   - the program runs its own maintenance thread calling
//     MallocExtension_ProcessBackgroundActions(), or
//   - the background thread is on (MallocExtension::SetNumericProperty
//     "tcmalloc.background_release", the run-time twin of TCMALLOC_BACKGROUND_RELEASE=1);
// either way RSS is under 20 MiB within 5 s of sleeping. The tests run in this order (the
// first must not see the background thread the second starts).
#include <gperftools/malloc_extension.h>
#include <gperftools/malloc_extension_c.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "memory_util.h"

namespace {

void Phase() {
  constexpr size_t kPhaseBytes = 300u << 20;
  std::vector<void*> objects;
  objects.reserve(kPhaseBytes / 200);
  size_t total = 0;
  unsigned seed = 99;
  while (total < kPhaseBytes) {
    seed = seed * 1103515245u + 12345u;
    size_t size = 16 + (seed >> 16) % 497;
    void* p = malloc(size);
    memset(p, 0x5a, size);
    objects.push_back(p);
    total += size;
  }
  for (void* p : objects) free(p);
}

// Sleeps up to 5 s in 100 ms steps (no allocation on this thread); the RSS at the end or
// as soon as it is under 20 MiB.
size_t SleepUntilUnder20MiB() {
  size_t rss = ResidentBytes();
  for (int i = 0; i < 50 && rss >= (20u << 20); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    rss = ResidentBytes();
  }
  return rss;
}

TEST(Quiet, AProgramsOwnMaintenanceThreadReturnsIdleMemory) {
  std::thread(Phase).join();
  std::thread(Phase).join();
  const size_t before = ResidentBytes();
  std::atomic<bool> stop{false};
  std::atomic<size_t> released{0};
  std::thread maintenance([&] {
    while (!stop.load()) {
      released += MallocExtension_ProcessBackgroundActions();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  const size_t after = SleepUntilUnder20MiB();
  stop = true;
  maintenance.join();
  printf("RSS after the phases: %.1f MiB, after sleeping with our own maintenance thread: %.1f MiB (%.1f MiB released)\n",
         MiB(before), MiB(after), MiB(released.load()));
  EXPECT_GT(before, 20u << 20) << "nothing left for maintenance to do: the test proves nothing";
  EXPECT_LT(after, 20u << 20);
  EXPECT_GT(released.load(), 0u);
}

TEST(Quiet, TheBackgroundThreadReturnsIdleMemory) {
  size_t on = 0;
  ASSERT_TRUE(MallocExtension::instance()->GetNumericProperty("tcmalloc.background_release", &on));
  ASSERT_EQ(on, 0u) << "run with TCMALLOC_BACKGROUND_RELEASE unset";
  ASSERT_TRUE(MallocExtension::instance()->SetNumericProperty("tcmalloc.background_release", 1));
  std::thread(Phase).join();
  std::thread(Phase).join();
  const size_t before = ResidentBytes();
  const size_t after = SleepUntilUnder20MiB();
  printf("RSS after the phases: %.1f MiB, after sleeping with the background thread: %.1f MiB\n", MiB(before),
         MiB(after));
  EXPECT_GT(before, 20u << 20) << "nothing left for the background thread to do: the test proves nothing";
  EXPECT_LT(after, 20u << 20);
}

}  // namespace
