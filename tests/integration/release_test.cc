// Memory goes back to the system: at once when asked (malloc_trim, and later
// MallocExtension::ReleaseFreeMemory), and by itself when it stays idle while the program
// keeps running (default release rate, no call).
#include <gtest/gtest.h>
#include <malloc.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "memory_util.h"

namespace {

constexpr size_t kBlock = 1 << 20;
constexpr size_t kTotal = 200u << 20;

std::vector<char*> AllocateTouched() {
  std::vector<char*> blocks;
  for (size_t i = 0; i < kTotal / kBlock; ++i) {
    char* p = static_cast<char*>(malloc(kBlock));
    memset(p, 7, kBlock);
    blocks.push_back(p);
  }
  return blocks;
}

TEST(Release, TrimReturnsFreedLargeBlocksAtOnce) {
  std::vector<char*> blocks = AllocateTouched();
  const size_t held = ResidentBytes();
  for (char* p : blocks) free(p);
  EXPECT_EQ(malloc_trim(0), 1);
  const size_t after = ResidentBytes();
  printf("RSS holding 200 MiB: %.1f MiB, after free + trim: %.1f MiB\n", MiB(held), MiB(after));
  EXPECT_GE(Drop(held, after), static_cast<long long>(kTotal * 9 / 10));
}

TEST(Release, IdleMemoryGoesBackDuringContinuedActivity) {
  std::vector<char*> blocks = AllocateTouched();
  const size_t held = ResidentBytes();
  for (char* p : blocks) free(p);
  // Keep allocating (something that reaches the allocator's slow paths) for up to 3 s.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  size_t now = held;
  while (std::chrono::steady_clock::now() < deadline) {
    void* p = malloc(512 * 1024);
    memset(p, 1, 4096);
    free(p);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    now = ResidentBytes();
    if (Drop(held, now) >= static_cast<long long>(kTotal * 9 / 10)) break;
  }
  printf("RSS holding 200 MiB: %.1f MiB, after idling with activity: %.1f MiB\n", MiB(held), MiB(now));
  EXPECT_GE(Drop(held, now), static_cast<long long>(kTotal * 9 / 10));
}

}  // namespace
