// Two threads on two CPUs build and free containers of small objects side by side (the
// shape of bench/stl_mix: node containers, strings past the small-string buffer), each
// freeing only what it allocated. No cache line may hold blocks of both: a line two CPUs
// write moves between their caches on every write (false sharing), which made stl_mix on
// two threads take 1.3x the CPU time of the same work done twice on one (bench/README.md,
// "Twenty-eighth session").
//
// The pattern that defeated the allocator: the classes are not sharded (the threads
// rarely reach the central lists), and both CPUs' caches were filled from the same spans in
// small and growing pieces (1, 2, 4, ... objects, the caches' slow start), so their first
// objects alternated within lines, and those objects circulated for the whole run. Only
// the first few refills of each class interleave, so the blocks are recorded from the
// start.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "gperftools/malloc_extension.h"

namespace {

extern "C" const unsigned int __rseq_size __attribute__((weak));
bool CpuNumbersKnown() { return &__rseq_size != nullptr && __rseq_size != 0; }

bool PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

constexpr size_t kSizes[] = {24, 32, 48, 64, 96};

// Rounds of growing bursts: allocate n blocks of each size, write them, free them all.
// Returns the cache lines (address / 64) of every block this thread was handed.
std::vector<uintptr_t> Churn(int cpu, std::atomic<int>* ready) {
  std::vector<uintptr_t> lines;
  lines.reserve(1 << 20);
  std::vector<void*> live;
  live.reserve(4096);
  if (!PinTo(cpu)) return lines;
  ready->fetch_add(1);
  while (ready->load() < 2) {
  }
  for (int round = 1; round <= 60; ++round) {
    const int n = round * 8;
    for (int i = 0; i < n; ++i) {
      for (size_t size : kSizes) {
        void* p = malloc(size);
        memset(p, round, size);
        live.push_back(p);
        const uintptr_t a = reinterpret_cast<uintptr_t>(p);
        for (uintptr_t l = a >> 6; l <= (a + size - 1) >> 6; ++l) lines.push_back(l);
      }
    }
    for (void* p : live) free(p);
    live.clear();
  }
  std::sort(lines.begin(), lines.end());
  lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
  return lines;
}

TEST(ThreadLines, TwoThreadsOnTwoCpusShareNoCacheLine) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  if (!CPU_ISSET(0, &allowed) || !CPU_ISSET(1, &allowed)) GTEST_SKIP() << "needs CPUs 0 and 1";
  if (!CpuNumbersKnown()) GTEST_SKIP() << "no rseq area: the allocator cannot tell the CPUs apart";
  // Per-thread caches hand whole batches from one thread to the other through the
  // transfer cache (that is what it is for), and a batch's neighbours in its lines may
  // still be the first thread's: 0-414 of ~2100 lines shared over ten runs (364-618 while
  // the central list also handed its spans' objects out to the two CPUs in turn).
  size_t per_cpu = 0;
  ASSERT_TRUE(MallocExtension::instance()->GetNumericProperty("tcmalloc.per_cpu_caches_active", &per_cpu));
  if (per_cpu == 0) GTEST_SKIP() << "per-thread caches: batches move between threads by design";
  std::atomic<int> ready{0};
  std::vector<uintptr_t> lines[2];
  std::thread a([&] { lines[0] = Churn(0, &ready); });
  std::thread b([&] { lines[1] = Churn(1, &ready); });
  a.join();
  b.join();
  ASSERT_FALSE(lines[0].empty());
  ASSERT_FALSE(lines[1].empty());
  std::vector<uintptr_t> both;
  std::set_intersection(lines[0].begin(), lines[0].end(), lines[1].begin(), lines[1].end(), std::back_inserter(both));
  printf("cache lines of thread 0: %zu, of thread 1: %zu, of both: %zu\n", lines[0].size(), lines[1].size(),
         both.size());
  EXPECT_EQ(both.size(), 0u);
}

}  // namespace
