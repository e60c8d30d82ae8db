// The design's two-phase program: one thread allocates ~300 MB of small objects and frees
// them, then a second thread does the same. Memory must move between the phases (RSS after
// phase 2 within 10% of phase 1, where ptmalloc-style arenas would double it), and once
// both threads are gone and the program goes on with light activity for a second, the
// memory must have gone back to the system (RSS under 20 MB).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "memory_util.h"

namespace {

constexpr size_t kPhaseBytes = 300u << 20;

void Phase() {
  std::vector<void*> objects;
  objects.reserve(kPhaseBytes / 64);
  size_t total = 0;
  unsigned seed = 12345;
  while (total < kPhaseBytes) {
    seed = seed * 1103515245u + 12345u;
    size_t size = 16 + (seed >> 16) % 240;  // small objects, 16..255 bytes
    void* p = malloc(size);
    memset(p, 0xab, size);
    objects.push_back(p);
    total += size;
  }
  for (void* p : objects) free(p);
}

TEST(Phase, MemoryMovesBetweenThreadsAndGoesBackWhenIdle) {
  std::thread(Phase).join();
  const size_t after1 = ResidentBytes();
  std::thread(Phase).join();
  const size_t after2 = ResidentBytes();
  printf("RSS after phase 1: %.1f MiB, after phase 2: %.1f MiB\n", MiB(after1), MiB(after2));
  EXPECT_LE(after2, after1 + after1 / 10);

  // Light activity: a few small objects and one large block per millisecond.
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  size_t idle_rss = 0;
  while (std::chrono::steady_clock::now() < until) {
    void* small = malloc(100);
    void* large = malloc(300 * 1024);
    memset(large, 1, 4096);
    free(large);
    free(small);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    idle_rss = ResidentBytes();
    if (idle_rss < (20u << 20)) break;
  }
  printf("RSS after light activity: %.1f MiB\n", MiB(idle_rss));
  EXPECT_LT(idle_rss, 20u << 20);
}

}  // namespace
