// Central-list shards only for classes whose list goes back and forth between CPUs of
// different shards at a high rate (central_freelist.h, "Shards").
//
// t-test2's shape: two threads share 1000 bins of random sizes up to 4 KiB, each freeing
// blocks the other allocated. Each of its ~40 classes reaches the central list from the
// two CPUs in turn at most ~280 times over a 140 ms run, so none should be sharded, and the
// free memory the central lists and transfer caches hold should be one shard's. With every
// class sharded from its first use (XSHARDING=all of bench/results/knobs-2026-11-28b.patch),
// each shard kept its own partly used spans and transfer cache: at the end of this run the
// two held 7.5-8.5 MiB per-CPU and 8.0-9.3 per-thread, against 1.9-2.9 and
// 3.7-7.2 with shard 0 alone (t-test2 itself: process peak 14.3-14.7 MB against 8.8-9.1).
//
// Then the opposite pattern: two threads that allocate and free one class as fast as they
// can take turns on its list all the time, and that class must be sharded.
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

#include "gperftools/malloc_extension.h"
#include "memory_util.h"

namespace {

// glibc's rseq registration (2.35+): its size is 0 when no area was registered (kernel
// without rseq, GLIBC_TUNABLES=glibc.pthread.rseq=0), and then the allocator cannot tell
// which CPU a caller runs on: every class stays on shard 0.
extern "C" const unsigned int __rseq_size __attribute__((weak));
bool CpuNumbersKnown() { return &__rseq_size != nullptr && __rseq_size != 0; }

size_t Prop(const char* name) {
  size_t v = 0;
  EXPECT_TRUE(MallocExtension::instance()->GetNumericProperty(name, &v)) << name;
  return v;
}

struct Bin {
  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  unsigned char* p = nullptr;
  size_t size = 0;
};

void SharedBins(std::vector<Bin>* bins, uint64_t seed, int ops) {
  uint64_t x = seed;
  for (int i = 0; i < ops; ++i) {
    NextRandom(&x);
    Bin& b = (*bins)[x % bins->size()];
    pthread_mutex_lock(&b.lock);
    if (b.p == nullptr) {
      b.size = 1 + (x >> 20) % 4096;
      b.p = static_cast<unsigned char*>(malloc(b.size));
      b.p[0] = b.p[b.size - 1] = 1;
    } else if ((x >> 40) % 4 == 0) {
      b.size = 1 + (x >> 20) % 4096;
      b.p = static_cast<unsigned char*>(realloc(b.p, b.size));
      b.p[b.size - 1] = 1;
    } else {
      free(b.p);
      b.p = nullptr;
    }
    pthread_mutex_unlock(&b.lock);
  }
}

TEST(Shards, CrossThreadFreesOfManyClassesStayOnOneShard) {
  if (Prop("tcmalloc.central_shards") < 2) GTEST_SKIP() << "one shard on this machine";
  std::vector<Bin> bins(1000);
  const size_t sharded_before = Prop("tcmalloc.sharded_classes");
  std::thread a(SharedBins, &bins, 1, 1000000);
  std::thread b(SharedBins, &bins, 2, 1000000);
  a.join();
  b.join();
  const size_t central = Prop("tcmalloc.central_cache_free_bytes");
  const size_t transfer = Prop("tcmalloc.transfer_cache_free_bytes");
  const size_t sharded = Prop("tcmalloc.sharded_classes") - sharded_before;
  for (Bin& bin : bins) free(bin.p);
  printf("free bytes in central lists %.2f MiB, transfer caches %.2f MiB; classes sharded by the run: %zu\n",
         central / 1048576.0, transfer / 1048576.0, sharded);
  // A class or two may see a burst of hand-offs; the rest stay on shard 0.
  EXPECT_LE(sharded, 4u);
  // Per-CPU mode only: per-thread, the thread caches hand the lists chains in whatever
  // order the threads freed them, and the spans' free objects alone vary from 3 to 6 MiB a
  // run with one shard (the range of all-sharded runs starts at 8).
  if (Prop("tcmalloc.per_cpu_caches_active") != 0) {
    EXPECT_LE(central + transfer, size_t{4} << 20);
  }
}

// Two threads, one class (3000-byte blocks: a class nothing else in this test uses), each
// allocating 2000 blocks (6 MB, more than a CPU's or a thread's cache holds) and freeing
// them, over and over: batches cross the central list all the time, from both CPUs.
TEST(Shards, TwoThreadsTakingTurnsOnOneClassShardIt) {
  if (Prop("tcmalloc.central_shards") < 2) GTEST_SKIP() << "one shard on this machine";
  if (!CpuNumbersKnown()) GTEST_SKIP() << "no rseq area: callers' CPUs are not known, nothing is sharded";
  const size_t before = Prop("tcmalloc.sharded_classes");
  std::atomic<bool> done{false};
  auto churn = [&done] {
    std::vector<void*> blocks(2000);
    while (!done.load(std::memory_order_relaxed)) {
      for (void*& p : blocks) p = malloc(3000);
      for (void* p : blocks) free(p);
    }
  };
  std::thread a(churn);
  std::thread b(churn);
  // A bound on how long to look, not a timing claim: on two idle CPUs it takes milliseconds.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (Prop("tcmalloc.sharded_classes") == before && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  done = true;
  a.join();
  b.join();
  EXPECT_GT(Prop("tcmalloc.sharded_classes"), before);
}

}  // namespace
