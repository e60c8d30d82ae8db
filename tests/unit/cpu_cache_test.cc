// CpuCache: per-CPU slabs driven through their rseq fast paths and slow paths, over a private
// heap, while threads migrate between CPUs, are preempted inside critical sections, and
// other threads drain the caches they use. Every object carries its owner's fill pattern, so
// an object handed out twice, or lost, shows up.
//
// CPU_CACHE_TEST_FORCE_OWN=1 (set by CTest together with GLIBC_TUNABLES=glibc.pthread.rseq=0)
// makes the test register rseq areas of its own instead of using glibc's.
#define TCM_RSEQ_COUNT_ABORTS 1
extern "C" {
unsigned long tcm_rseq_aborts = 0;
}

#include "core/cpu_cache.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "core/central_freelist.h"
#include "core/size_classes.h"
#include "platform/os.h"
#include "platform/rseq.h"
#include "test_heap.h"

namespace tcm {
namespace {

bool ForceOwn() {
  const char* v = getenv("CPU_CACHE_TEST_FORCE_OWN");
  return v != nullptr && v[0] == '1';
}

class CpuCacheTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    source_ = os::InitRseq(/*allow_own=*/true, ForceOwn());
    built_in_ = os::RseqOffsetIsBuiltIn();
  }

  void SetUp() override {
    if (source_ == os::RseqSource::kNone) {
      GTEST_SKIP() << "no rseq on this machine";
    }
    if (ForceOwn()) {
      ASSERT_EQ(source_, os::RseqSource::kOwn);
    }
    t_ = testing::TestHeap::Make();
    central_ = std::make_unique<CentralFreeList[]>(kNumClasses);
    for (size_t cl = 1; cl < kNumClasses; ++cl) central_[cl].Init(static_cast<uint8_t>(cl), &t_->heap, &t_->pagemap);
    cache_ = std::make_unique<CpuCache>();
    ASSERT_TRUE(cache_->Init(&t_->arena, central_.get(), kDefaultMaxPerCpuCacheBytes));
  }

  // The fast paths the allocator inlines: the sequences that address glibc's area at the
  // offset built in when it is there (every test below then runs them, migrations and
  // aborts included), else those that load the offset (our own areas: the _own_rseq run).
  void* Alloc(size_t cl) {
    void* p = built_in_ ? cache_->Pop<true>(cl) : cache_->Pop<false>(cl);
    return p != nullptr ? p : cache_->AllocateMiss(cl);
  }
  void Free(size_t cl, void* p) {
    if (!(built_in_ ? cache_->Push<true>(cl, p) : cache_->Push<false>(cl, p))) cache_->DeallocateMiss(cl, p);
  }
  void AllocEach(size_t cl, std::vector<void*>& v) {
    for (void*& p : v) p = Alloc(cl);
  }
  void FreeEach(size_t cl, const std::vector<void*>& v) {
    for (void* p : v) Free(cl, p);
  }
  // The end of a test pinned to a CPU: unpinned, every cache drained, cl's spans consistent.
  void UnpinDrainAndVerify(size_t cl) {
    os::UnpinFromCpus();
    cache_->DrainAll();
    central_[cl].Verify();
  }

  // Allocates and frees objects of classes 2..20 (>= 16 bytes: room for a two-word
  // pattern), verifying each object's pattern before it is freed.
  void Churn(uint64_t tag, int iterations, bool yield) {
    std::mt19937_64 rng(tag);
    std::vector<std::pair<size_t, uint64_t*>> live;
    for (int i = 0; i < iterations; ++i) {
      if (live.size() < 64 && (live.empty() || rng() % 3 != 0)) {
        size_t cl = 2 + rng() % 19;
        auto* p = static_cast<uint64_t*>(Alloc(cl));
        ASSERT_NE(p, nullptr);
        p[0] = tag;
        p[1] = reinterpret_cast<uintptr_t>(p) ^ tag;
        live.emplace_back(cl, p);
      } else {
        size_t k = rng() % live.size();
        auto [cl, p] = live[k];
        live[k] = live.back();
        live.pop_back();
        ASSERT_EQ(p[0], tag) << "object handed to two owners";
        ASSERT_EQ(p[1], reinterpret_cast<uintptr_t>(p) ^ tag);
        Free(cl, p);
      }
      if (yield && rng() % 16 == 0) sched_yield();
    }
    for (auto [cl, p] : live) {
      ASSERT_EQ(p[0], tag);
      Free(cl, p);
    }
  }

  // Six threads churn (Churn) while another moves them between CPUs as fast as it can;
  // then every CPU is within the budget, its byte count matches its capacities, and the
  // spans are consistent.
  void ChurnWhileMigrating(uint64_t tag_base) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> workers;
    std::vector<pthread_t> handles(6);
    std::atomic<int> started{0}, finished{0};
    for (int t = 0; t < 6; ++t) {
      workers.emplace_back([&, t] {
        handles[t] = pthread_self();
        started.fetch_add(1);
        Churn(tag_base + t, 300000, false);
        finished.fetch_add(1);
        while (!stop.load()) sched_yield();  // stay joinable-alive until the migrator stopped
      });
    }
    while (started.load() < 6) sched_yield();
    std::thread migrator([&] {
      const int n = sysconf(_SC_NPROCESSORS_ONLN);
      for (int round = 0; !stop.load(); ++round) {
        for (int t = 0; t < 6; ++t) {
          cpu_set_t set;
          CPU_ZERO(&set);
          CPU_SET((round + t) % n, &set);
          pthread_setaffinity_np(handles[t], sizeof(set), &set);
        }
        sched_yield();
      }
    });
    while (finished.load() < 6) sched_yield();
    stop = true;
    migrator.join();
    for (auto& w : workers) w.join();
    for (int cpu = 0; cpu < cache_->num_cpus(); ++cpu) {
      EXPECT_LE(cache_->CpuCapacityBytes(cpu), cache_->max_bytes_per_cpu()) << "cpu " << cpu;
      EXPECT_EQ(cache_->CpuCapacityBytes(cpu), CapacityBytesOfClasses(cpu)) << "cpu " << cpu;
    }
    cache_->DrainAll();
    for (size_t cl = 1; cl < kNumClasses; ++cl) central_[cl].Verify();
  }

  // What the capacities of cpu's classes add up to (the budget's count must match it).
  size_t CapacityBytesOfClasses(int cpu) const {
    size_t bytes = 0;
    for (size_t cl = 1; cl < kNumClasses; ++cl) bytes += cache_->ClassCapacity(cpu, cl) * SizeMap::ClassSize(cl);
    return bytes;
  }

  static os::RseqSource source_;
  static bool built_in_;
  std::unique_ptr<testing::TestHeap> t_;
  std::unique_ptr<CentralFreeList[]> central_;
  std::unique_ptr<CpuCache> cache_;
};
os::RseqSource CpuCacheTest::source_ = os::RseqSource::kNone;
bool CpuCacheTest::built_in_ = false;

// The build probed this machine's glibc (CMakeLists.txt): with glibc's area in use, the
// fast paths must find it at the offset built in, or every test here would quietly run the
// loaded-offset sequences only; with our own areas (the _own_rseq run) they must not.
TEST_F(CpuCacheTest, GlibcAreaIsAtTheOffsetBuiltIn) {
  if (source_ == os::RseqSource::kOwn) {
    EXPECT_FALSE(built_in_);
    return;
  }
  if (!os::kHasBuiltInRseqOffset) GTEST_SKIP() << "the build found no rseq area to probe";
  EXPECT_EQ(os::RseqOffset(), os::kBuiltInRseqOffset);
  EXPECT_TRUE(built_in_);
}

TEST_F(CpuCacheTest, EmptyCacheMissesThenHits) {
  const size_t cl = SizeMap::ClassIndex(64);
  EXPECT_EQ(cache_->Pop(cl), nullptr);  // capacity 0 on a CPU no one used
  void* p = cache_->AllocateMiss(cl);   // grows the capacity and refills
  ASSERT_NE(p, nullptr);
  void* q = cache_->Pop(cl);            // the refill left objects on this CPU (unless migrated)
  if (q != nullptr) Free(cl, q);
  Free(cl, p);
  EXPECT_GT(cache_->TotalBytes(), 0u);
  EXPECT_LE(cache_->TotalBytes(), 2 * kDefaultMaxPerCpuCacheBytes * static_cast<size_t>(cache_->num_cpus()));
}

// A class's first miss on a CPU hands out the caller's object and caches nothing (its slots
// are a page of their own that a block allocated once and kept would make resident); the
// capacity grows all the same, so the second miss refills as the slow start says.
TEST_F(CpuCacheTest, AClassFirstMissCachesNothing) {
  ASSERT_TRUE(os::PinToCpu(0));
  const size_t cl = SizeMap::ClassIndex(2048);
  void* first = Alloc(cl);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(cache_->ClassCapacity(0, cl), 1u);
  EXPECT_EQ(cache_->ClassObjects(cl), 0u);
  void* second = Alloc(cl);  // the slab is empty: a miss, now with room to refill
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(cache_->ClassCapacity(0, cl), 2u);
  EXPECT_EQ(cache_->ClassObjects(cl), 2u);
  Free(cl, second);
  Free(cl, first);
  UnpinDrainAndVerify(cl);
}

TEST_F(CpuCacheTest, ObjectsComeBackOnce) {
  const size_t cl = SizeMap::ClassIndex(48);
  std::vector<void*> got;
  for (int i = 0; i < 5000; ++i) got.push_back(Alloc(cl));
  std::vector<void*> sorted = got;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
  for (void* p : got) Free(cl, p);
  cache_->DrainAll();
  EXPECT_EQ(cache_->TotalBytes(), 0u);
  central_[cl].Verify();
}

TEST_F(CpuCacheTest, ByteBudgetBoundsEveryCpu) {
  cache_->set_max_bytes_per_cpu(64 * 1024);
  std::vector<std::pair<size_t, void*>> all;
  for (size_t cl = 1; cl < kNumClasses; cl += 3)
    for (int i = 0; i < 200; ++i) all.emplace_back(cl, Alloc(cl));
  for (auto [cl, p] : all) Free(cl, p);
  for (int cpu = 0; cpu < cache_->num_cpus(); ++cpu) {
    EXPECT_LE(cache_->CpuCapacityBytes(cpu), 64u * 1024) << "cpu " << cpu;
    EXPECT_LE(cache_->CpuBytes(cpu), 64u * 1024) << "cpu " << cpu;
  }
}

TEST_F(CpuCacheTest, ThreadsMigratedBetweenCpus) { ChurnWhileMigrating(0x1000); }

// A budget far below what the churn's classes want: most misses find it full, and growth
// races with the migrator moving the thread to the other CPU between its look at the
// budget and its lock. The budget still bounds every CPU and its count matches the
// capacities.
TEST_F(CpuCacheTest, ASmallBudgetHoldsWhileThreadsMigrate) {
  cache_->set_max_bytes_per_cpu(16 * 1024);
  ChurnWhileMigrating(0x6000);
}

TEST_F(CpuCacheTest, PreemptedInsideCriticalSectionsRestart) {
  // Many more threads than CPUs, yielding and interrupted by a timer signal storm: sections
  // get aborted and restarted; the restarts must be counted and the objects intact.
  struct sigaction sa = {};
  sa.sa_handler = [](int) {};
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, nullptr);
  itimerval every{{0, 50}, {0, 50}};
  const unsigned long before = __atomic_load_n(&tcm_rseq_aborts, __ATOMIC_RELAXED);
  std::vector<std::thread> workers;
  for (int t = 0; t < 16; ++t) workers.emplace_back([&, t] { Churn(0x2000 + t, 100000, true); });
  // The signals go to whichever thread runs; the workers do nothing but rseq-heavy work.
  setitimer(ITIMER_REAL, &every, nullptr);
  for (auto& w : workers) w.join();
  // Keep going (bounded) until at least one abort was seen: preemption is random.
  for (int extra = 0; extra < 50 && __atomic_load_n(&tcm_rseq_aborts, __ATOMIC_RELAXED) == before; ++extra) {
    std::vector<std::thread> more;
    for (int t = 0; t < 8; ++t) more.emplace_back([&, t] { Churn(0x3000 + t, 50000, true); });
    for (auto& w : more) w.join();
  }
  itimerval off{};
  setitimer(ITIMER_REAL, &off, nullptr);
  EXPECT_GT(__atomic_load_n(&tcm_rseq_aborts, __ATOMIC_RELAXED), before) << "no critical section was ever restarted";
  cache_->DrainAll();
  for (size_t cl = 1; cl < kNumClasses; ++cl) central_[cl].Verify();
}

TEST_F(CpuCacheTest, DrainWhileAnotherThreadUsesTheCpu) {
  if (os::AllowedCpuCount() < 2) {
    GTEST_SKIP() << "needs two CPUs";
  }
  std::atomic<bool> done{false}, started{false};
  ASSERT_TRUE(os::PinToCpu(1));
  std::thread user([&] {
    ASSERT_TRUE(os::PinToCpu(0));
    started = true;
    Churn(0x4000, 3000000, false);
    done = true;
  });
  while (!started.load()) sched_yield();
  size_t drained = 0, passes = 0;
  while (!done.load()) {
    drained += cache_->Drain(0);
    ++passes;
    // Each drain interrupts CPU 0 (the membarrier fence aborts its critical section): back
    // to back, on a VM where an interrupt costs tens of microseconds, they starved the
    // user thread (the test once ran for minutes). Maintenance drains a CPU at most once a
    // second; a few thousand a second still race with the user's sections.
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  user.join();
  os::UnpinFromCpus();
  EXPECT_GT(passes, 0u);
  EXPECT_GT(cache_->drains(), 0u);
  EXPECT_GT(drained, 0u) << "no drain found objects to take while the CPU was in use";
  cache_->DrainAll();
  for (size_t cl = 1; cl < kNumClasses; ++cl) central_[cl].Verify();
}

// A drain locks the class, hands its objects to the central list and only then lowers
// `current`. Meanwhile the slot under `current` holds an object someone may already have
// taken from the central list and be freeing now: not a double free. The drain is held
// inside the central list (its lock taken here) with the class locked.
TEST_F(CpuCacheTest, ATopObjectOfAClassBeingDrainedIsNotADoubleFree) {
  if (os::AllowedCpuCount() < 2) {
    GTEST_SKIP() << "needs two CPUs";
  }
  constexpr size_t cl = 5;
  ASSERT_TRUE(os::PinToCpu(0));
  bool seen_locked_with_stale_top = false;
  // The drain may lock the class between our probe's pop and push (CI hit it once): then
  // the probe holds `a` and the cache's top is not `a`; start over.
  for (int attempt = 0; attempt < 100 && !seen_locked_with_stale_top; ++attempt) {
    void* a = Alloc(cl);
    void* b = Alloc(cl);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    Free(cl, a);
    EXPECT_TRUE(cache_->IsTopObject(cl, a)) << "a freed twice in a row is caught";
    central_[cl].lock()->Lock();
    std::thread drainer([&] {
      ASSERT_TRUE(os::PinToCpu(1));
      cache_->Drain(0);  // blocks in the central list, CPU 0's classes locked
    });
    // Locked once a pop misses: until then it takes a, which goes straight back.
    void* held = nullptr;
    for (;;) {
      void* x = cache_->Pop(cl);
      if (x == nullptr) break;
      ASSERT_EQ(x, a);
      if (!cache_->Push(cl, x)) {
        held = x;  // locked between the pop and the push
        break;
      }
      sched_yield();
    }
    if (held == nullptr) {
      EXPECT_FALSE(cache_->IsTopObject(cl, a)) << "a class being drained reported its stale top";
      seen_locked_with_stale_top = true;
    }
    central_[cl].lock()->Unlock();
    drainer.join();
    EXPECT_FALSE(cache_->IsTopObject(cl, a));
    if (held != nullptr) Free(cl, held);
    void* again = Alloc(cl);  // a, from the central list
    ASSERT_NE(again, nullptr);
    Free(cl, again);
    Free(cl, b);
  }
  os::UnpinFromCpus();
  EXPECT_TRUE(seen_locked_with_stale_top);
  cache_->DrainAll();
  for (size_t c = 1; c < kNumClasses; ++c) central_[c].Verify();
}

TEST_F(CpuCacheTest, MaintenanceDrainsIdleCpusAndShrinksUnusedClasses) {
  const size_t cl = SizeMap::ClassIndex(128);
  std::vector<void*> v;
  for (int i = 0; i < 300; ++i) v.push_back(Alloc(cl));
  FreeEach(cl, v);
  ASSERT_GT(cache_->TotalBytes(), 0u);
  // Not idle yet: the CPU stays (the class missed in this period, so it keeps its capacity).
  const uint64_t now = os::MonotonicCoarseNs();
  cache_->MarkActive(now);
  const size_t before = cache_->TotalBytes();
  cache_->Maintain(now);
  EXPECT_EQ(cache_->TotalBytes(), before);
  // Long after the last sign of activity: everything goes back to the central lists, to
  // the spans (parked in the transfer cache, it would pin its pages another idle period).
  const size_t parked = central_[cl].transfer_objects();
  cache_->Maintain(now + 10 * kCpuIdleNs);
  EXPECT_EQ(cache_->TotalBytes(), 0u);
  EXPECT_EQ(central_[cl].transfer_objects(), parked);
  for (int cpu = 0; cpu < cache_->num_cpus(); ++cpu) EXPECT_EQ(cache_->CpuCapacityBytes(cpu), 0u);
  central_[cl].Verify();
}

// Small classes cache up to 8192 objects on a CPU (a tree of depth 12 of 8-byte nodes), the
// 16-byte class (two pointers) 24576: a tree of depth 14 fits with the transfer cache.
TEST_F(CpuCacheTest, SmallClassesCacheUpTo8192ObjectsAndTwoPointerNodes24576) {
  ASSERT_TRUE(os::PinToCpu(0));
  const size_t cl = SizeMap::ClassIndex(16);
  EXPECT_EQ(cache_->max_capacity(cl), 24576);
  EXPECT_EQ(cache_->max_capacity(SizeMap::ClassIndex(8)), 8192);
  EXPECT_EQ(cache_->max_capacity(SizeMap::ClassIndex(32)), 4096);
  // About 128 KiB a class above that, 256 KiB from 256 bytes up (the slots the slab's
  // 16-bit indices leave).
  EXPECT_EQ(cache_->max_capacity(SizeMap::ClassIndex(128)), 1024);
  EXPECT_EQ(cache_->max_capacity(SizeMap::ClassIndex(256)), 1024);
  EXPECT_EQ(cache_->max_capacity(SizeMap::ClassIndex(4096)), 64);
  std::vector<void*> v;
  for (int i = 0; i < 30000; ++i) v.push_back(Alloc(cl));
  FreeEach(cl, v);
  EXPECT_GT(cache_->ClassObjects(cl), 8192u);
  EXPECT_LE(cache_->ClassObjects(cl), 24576u);
  UnpinDrainAndVerify(cl);
}

// A working set of 1000 blocks of 256 B (the suite's batch loop) stays on the CPU once the
// class has grown: a round of 1000 mallocs takes at most one batch from the transfer cache
// (the miss that finds the slab empty refills it). At 128 KiB a class (512 objects) every
// round took ~500 objects, four batches, through the batch check and the transfer cache.
// And the 16-byte class's transfer cache holds what its 512 KiB allow (32768 objects),
// not 8192: with the CPU's 24576, a tree of depth 14 stays off the spans.
TEST_F(CpuCacheTest, AThousandBlocksOf256BytesStayOnTheCpu) {
  ASSERT_TRUE(os::PinToCpu(0));
  const size_t cl = SizeMap::ClassIndex(256);
  const size_t batch = SizeMap::NumToMove(cl);
  std::vector<void*> v(1000);
  for (int round = 0; round < 20; ++round) {  // growth, a batch a miss
    AllocEach(cl, v);
    FreeEach(cl, v);
  }
  const size_t parked = central_[cl].transfer_objects();
  AllocEach(cl, v);
  const size_t taken = parked - central_[cl].transfer_objects();
  FreeEach(cl, v);
  printf("a round of 1000 mallocs took %zu objects from the transfer cache\n", taken);
  EXPECT_LE(taken, batch);
  UnpinDrainAndVerify(cl);
  const size_t cl16 = SizeMap::ClassIndex(16);
  EXPECT_GE(central_[cl16].transfer_cache()->capacity(), 32768 - static_cast<int>(SizeMap::NumToMove(cl16)));
}

// Objects leave a CPU's cache in the order a thread cache's list would give them: from
// fresh spans in address order (binary trees' own code ran 2.5x slower over the descending
// addresses the slab's stack order gave), and a batch freed past the capacity goes to the
// central list newest first and comes back in that order.
TEST_F(CpuCacheTest, ObjectsLeaveInTheOrderAThreadCacheWould) {
  ASSERT_TRUE(os::PinToCpu(0));
  const size_t cl = SizeMap::ClassIndex(16);
  const size_t batch = SizeMap::NumToMove(cl);
  std::vector<void*> v;
  for (int i = 0; i < 30000; ++i) v.push_back(Alloc(cl));  // more than the class's 24576
  size_t ascending = 0;
  for (size_t i = 1; i < v.size(); ++i)
    ascending += reinterpret_cast<uintptr_t>(v[i]) == reinterpret_cast<uintptr_t>(v[i - 1]) + 16;
  EXPECT_GT(ascending, v.size() * 9 / 10);

  std::map<void*, size_t> freed_at;
  for (size_t i = 0; i < v.size(); ++i) freed_at[v[i]] = i;
  FreeEach(cl, v);  // past the capacity: batches into the transfer cache
  std::vector<void*> chain(batch);
  ASSERT_TRUE(central_[cl].transfer_cache()->TryRemove(chain.data()));
  for (size_t i = 1; i < chain.size(); ++i) EXPECT_EQ(freed_at[chain[i]] + 1, freed_at[chain[i - 1]]) << i;
  ASSERT_TRUE(central_[cl].transfer_cache()->TryInsert(chain.data()));

  // Empty the CPU's array (keeping its capacity): the next miss takes that chain back.
  std::vector<void*> held;
  while (void* p = cache_->Pop(cl)) held.push_back(p);
  for (size_t i = 0; i < batch; ++i) EXPECT_EQ(Alloc(cl), chain[i]) << i;
  for (void* p : chain) Free(cl, p);
  for (void* p : held) Free(cl, p);
  UnpinDrainAndVerify(cl);
}

TEST_F(CpuCacheTest, UnusedCapacityShrinksOnActiveCpus) {
  ASSERT_TRUE(os::PinToCpu(0));
  const size_t cl = SizeMap::ClassIndex(256);
  std::vector<void*> v;
  for (int i = 0; i < 400; ++i) v.push_back(Alloc(cl));
  for (int i = 0; i < 100; ++i) Free(cl, v[i]);  // leaves spare capacity above `current`
  const uint64_t now = os::MonotonicCoarseNs();
  cache_->MarkActive(now);
  cache_->Maintain(now);  // resets the miss counts (the class missed in this period)
  const size_t cap = cache_->CpuCapacityBytes(0);
  const uint64_t later = now + kCpuResizeIntervalNs;
  cache_->MarkActive(later);
  cache_->Maintain(later);  // no miss since: half of the spare capacity goes back
  EXPECT_LT(cache_->CpuCapacityBytes(0), cap);
  for (int i = 100; i < 400; ++i) Free(cl, v[i]);
  UnpinDrainAndVerify(cl);
}

TEST_F(CpuCacheTest, QuietClassesGiveBackHalfTheirObjects) {
  ASSERT_TRUE(os::PinToCpu(0));
  const size_t cl = SizeMap::ClassIndex(128);
  std::vector<void*> v;
  for (int i = 0; i < 400; ++i) v.push_back(Alloc(cl));
  FreeEach(cl, v);  // a burst of frees: the CPU caches what fits
  const uint64_t now = os::MonotonicCoarseNs();
  cache_->MarkActive(now);
  cache_->Maintain(now);  // the class missed in this period: it keeps everything
  const size_t cached = cache_->ClassObjects(cl);
  ASSERT_GT(cached, 8u);
  // Light traffic keeps the CPU active but never misses: half the cached objects go back
  // at each interval, so the burst drains while the program runs.
  uint64_t t = now;
  const size_t parked = central_[cl].transfer_objects();
  for (int pass = 0; pass < 3; ++pass) {
    t += kCpuResizeIntervalNs;
    cache_->MarkActive(t);
    Free(cl, Alloc(cl));
    cache_->Maintain(t);
  }
  EXPECT_LE(cache_->ClassObjects(cl), cached / 4);
  EXPECT_LE(central_[cl].transfer_objects(), parked);  // they went to their spans
  UnpinDrainAndVerify(cl);
}

// The end of a burst of frees: the class overflowed (free missed), but no malloc missed.
// Half its objects go back at the next interval, and it keeps its capacity (the room was
// what the frees wanted). Counted as a need, the overflow kept every object cached for
// one more interval, each pinning a span whose other objects were all free.
TEST_F(CpuCacheTest, ClassesThatOnlyOverflowedGiveBackHalfTheirObjectsAndKeepTheirRoom) {
  ASSERT_TRUE(os::PinToCpu(0));
  const size_t cl = SizeMap::ClassIndex(128);
  std::vector<void*> v;
  for (int i = 0; i < 3000; ++i) v.push_back(Alloc(cl));  // past the class's 1024
  const uint64_t now = os::MonotonicCoarseNs();
  cache_->MarkActive(now);
  cache_->Maintain(now);  // malloc missed in this period: nothing goes back
  FreeEach(cl, v);  // overflows: misses of free only
  const size_t cached = cache_->ClassObjects(cl);
  const size_t capacity = cache_->CpuCapacityBytes(0);
  ASSERT_GT(cached, 512u);
  const uint64_t later = now + kCpuResizeIntervalNs;
  cache_->MarkActive(later);
  cache_->Maintain(later);
  EXPECT_LE(cache_->ClassObjects(cl), (cached + 1) / 2);
  EXPECT_EQ(cache_->CpuCapacityBytes(0), capacity);
  UnpinDrainAndVerify(cl);
}

// A CPU that frees objects of a class it does not allocate (a consumer thread) keeps room
// for one batch of it: the rest goes on to the central list a batch at a time, not into
// a cache that grows to the class's largest capacity for mallocs that never come there.
// Once malloc misses the class on that CPU, it grows as before.
TEST_F(CpuCacheTest, AClassACpuOnlyFreesKeepsRoomForOneBatch) {
  ASSERT_TRUE(os::PinToCpu(0));
  const size_t cl = SizeMap::ClassIndex(64);
  const size_t batch = SizeMap::NumToMove(cl);
  ASSERT_GT(cache_->max_capacity(cl), 4 * batch);
  // Allocated elsewhere: straight from the central list, as another CPU's misses would.
  std::vector<void*> v(2000);
  for (void*& p : v) ASSERT_EQ(central_[cl].RemoveBatch(&p, 1), 1);
  FreeEach(cl, v);
  EXPECT_LE(cache_->ClassObjects(cl), batch);
  EXPECT_LE(cache_->CpuCapacityBytes(0), batch * SizeMap::ClassSize(cl));
  // This CPU now allocates the class: its misses let it grow past a batch again.
  AllocEach(cl, v);
  FreeEach(cl, v);
  EXPECT_GT(cache_->ClassObjects(cl), 4 * batch);
  UnpinDrainAndVerify(cl);
}

// A big class that overflows on the CPU that allocates it parks at most one batch in the
// transfer cache (the rest goes to its spans, where the page heap can reuse the memory for
// any class); the same class freed by a consumer CPU parks batches for the producer's.
TEST_F(CpuCacheTest, BigObjectsParkOneBatchUnlessTheyCrossCpus) {
  ASSERT_TRUE(os::PinToCpu(0));
  const size_t cl = SizeMap::ClassIndex(32768);
  const size_t batch = SizeMap::NumToMove(cl);
  ASSERT_GT(static_cast<size_t>(central_[cl].transfer_cache()->capacity()), 4 * batch);
  std::vector<void*> v(100);
  for (int round = 0; round < 5; ++round) {
    AllocEach(cl, v);
    FreeEach(cl, v);  // overflows: this CPU allocates the class too
    EXPECT_LE(central_[cl].transfer_objects(), batch) << "round " << round;
  }
  cache_->DrainAll();
  central_[cl].Verify();
  // Allocated elsewhere: straight from the central list, as another CPU's misses would.
  for (void*& p : v) ASSERT_EQ(central_[cl].RemoveBatch(&p, 1), 1);
  FreeEach(cl, v);
  EXPECT_GT(central_[cl].transfer_objects(), 4 * batch);
  UnpinDrainAndVerify(cl);
}

TEST_F(CpuCacheTest, OneCpuByAffinity) {
  // A process restricted to one CPU: every thread shares that CPU's cache.
  ASSERT_TRUE(os::PinToCpu(0));
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) workers.emplace_back([&, t] { Churn(0x5000 + t, 100000, true); });
  for (auto& w : workers) w.join();
  os::UnpinFromCpus();
  for (int cpu = 1; cpu < cache_->num_cpus(); ++cpu) EXPECT_EQ(cache_->CpuBytes(cpu), 0u);
  cache_->DrainAll();
  for (size_t cl = 1; cl < kNumClasses; ++cl) central_[cl].Verify();
}

TEST(RseqPlatform, PossibleCpusCoverOnlineOnes) {
  EXPECT_GE(os::NumPossibleCpus(), static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
}

}  // namespace
}  // namespace tcm
