// MallocExtension as a gperftools user sees it: every numeric property, GetStats, the
// walks (Ranges, free lists, growth stacks), ownership, thread-cache controls, release,
// a pluggable SysAllocator, and the malloc hooks.
#include <gperftools/malloc_extension.h>
#include <gperftools/malloc_hook.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

MallocExtension* Ext() { return MallocExtension::instance(); }

size_t Prop(const char* name) {
  size_t v = 0;
  EXPECT_TRUE(Ext()->GetNumericProperty(name, &v)) << name;
  return v;
}

// Keeps the compiler from eliding allocations.
void* volatile g_sink;

// Which front end runs (CTest runs this program in both modes, see CMakeLists.txt).
bool PerCpu() { return Prop("tcmalloc.per_cpu_caches_active") == 1; }
bool ModeWanted(bool per_cpu) {
  const char* v = getenv("TCMALLOC_PER_CPU_CACHES");
  const char* tunables = getenv("GLIBC_TUNABLES");
  const bool off = (v != nullptr && strcmp(v, "0") == 0) ||
                   (tunables != nullptr && strstr(tunables, "glibc.pthread.rseq=0") != nullptr);
  return off ? !per_cpu : per_cpu;
}

// Keeps the calling thread on the CPU it runs on (what "this CPU's cache" needs in a test).
void PinHere() {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(sched_getcpu(), &set);
  sched_setaffinity(0, sizeof(set), &set);
}
void Unpin() {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int i = 0; i < CPU_SETSIZE; ++i) CPU_SET(i, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

TEST(Properties, EveryDocumentedNameIsKnownAndUnknownNamesAreNot) {
  const char* names[] = {"generic.current_allocated_bytes", "generic.heap_size", "generic.total_physical_bytes",
                         "tcmalloc.pageheap_free_bytes", "tcmalloc.pageheap_unmapped_bytes", "tcmalloc.slack_bytes",
                         "tcmalloc.central_cache_free_bytes", "tcmalloc.transfer_cache_free_bytes",
                         "tcmalloc.thread_cache_free_bytes", "tcmalloc.max_total_thread_cache_bytes",
                         "tcmalloc.current_total_thread_cache_bytes", "tcmalloc.metadata_bytes",
                         "tcmalloc.min_per_thread_cache_bytes", "tcmalloc.impl.thread_cache_count",
                         "tcmalloc.sample_parameter", "tcmalloc.heap_limit_mb", "tcmalloc.aggressive_memory_decommit",
                         "tcmalloc.background_release", "tcmalloc.scavenger_passes",
                         "tcmalloc.scavenger_released_bytes", "tcmalloc.per_cpu_caches_active",
                         "tcmalloc.max_per_cpu_cache_size", "tcmalloc.cpu_free", "tcmalloc.central_shards",
                         "tcmalloc.sharded_classes",
                         "tcmalloc.batch_check_batches", "tcmalloc.batch_check_filtered_batches"};
  for (const char* n : names) Prop(n);
  size_t v = 12345;
  EXPECT_FALSE(Ext()->GetNumericProperty("tcmalloc.no_such_property", &v));
  EXPECT_FALSE(Ext()->SetNumericProperty("tcmalloc.no_such_property", 1));
  EXPECT_FALSE(Ext()->SetNumericProperty("generic.heap_size", 1)) << "read-only";
}

TEST(Properties, AllocatedBytesFollowTheApplication) {
  delete[] (new char[200]);  // warm the class up: its span exists afterwards
  const size_t before = Prop("generic.current_allocated_bytes");
  delete[] (new char[200]);
  EXPECT_EQ(Prop("generic.current_allocated_bytes"), before) << "freed memory in caches is not 'allocated'";

  void* big = malloc(10 << 20);
  g_sink = big;
  const size_t during = Prop("generic.current_allocated_bytes");
  EXPECT_GE(during, before + (10 << 20));
  EXPECT_GE(Prop("generic.heap_size"), during);
  free(big);
  EXPECT_LT(Prop("generic.current_allocated_bytes"), during - (9 << 20));
}

TEST(Properties, SlackIsFreePlusUnmappedAndPhysicalExcludesUnmapped) {
  free(malloc(20 << 20));
  Ext()->ReleaseFreeMemory();
  const size_t unmapped = Prop("tcmalloc.pageheap_unmapped_bytes");
  EXPECT_GE(unmapped, size_t{20} << 20);
  EXPECT_EQ(Prop("tcmalloc.slack_bytes"), Prop("tcmalloc.pageheap_free_bytes") + Prop("tcmalloc.pageheap_unmapped_bytes"));
  EXPECT_EQ(Prop("generic.total_physical_bytes"),
            Prop("generic.heap_size") + Prop("tcmalloc.metadata_bytes") - Prop("tcmalloc.pageheap_unmapped_bytes"));
}

TEST(Properties, SettableOnesRoundTrip) {
  const char* names[] = {"tcmalloc.max_total_thread_cache_bytes", "tcmalloc.min_per_thread_cache_bytes",
                         "tcmalloc.sample_parameter", "tcmalloc.heap_limit_mb",
                         "tcmalloc.aggressive_memory_decommit", "tcmalloc.max_per_cpu_cache_size",
                         "tcmalloc.background_release"};
  const size_t values[] = {8 << 20, 128 << 10, 0, 0, 1, 512 << 10, 1};
  for (size_t i = 0; i < 7; ++i) {
    const size_t old = Prop(names[i]);
    ASSERT_TRUE(Ext()->SetNumericProperty(names[i], values[i])) << names[i];
    EXPECT_EQ(Prop(names[i]), values[i]) << names[i];
    ASSERT_TRUE(Ext()->SetNumericProperty(names[i], old));
  }
  ASSERT_TRUE(Ext()->SetNumericProperty("tcmalloc.max_total_thread_cache_bytes", size_t{1} << 40));
  EXPECT_EQ(Prop("tcmalloc.max_total_thread_cache_bytes"), size_t{1} << 30) << "clamped to 1 GiB";
  Ext()->SetNumericProperty("tcmalloc.max_total_thread_cache_bytes", 16 << 20);
}

TEST(Properties, HeapLimitMakesGrowthFail) {
  const size_t heap = Prop("generic.heap_size") - Prop("tcmalloc.pageheap_unmapped_bytes");
  ASSERT_TRUE(Ext()->SetNumericProperty("tcmalloc.heap_limit_mb", (heap >> 20) + 64));
  errno = 0;
  void* p = malloc(256 << 20);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(errno, ENOMEM);
  void* q = malloc(16 << 20);  // fits under the limit
  EXPECT_NE(q, nullptr);
  free(q);
  Ext()->SetNumericProperty("tcmalloc.heap_limit_mb", 0);
  p = malloc(256 << 20);
  EXPECT_NE(p, nullptr);
  free(p);
}

TEST(FrontEnd, TheModeIsTheOneAskedForAndGetStatsSaysIt) {
  // rseq works on every machine this suite runs on (Linux >= 4.18, glibc 2.36), outside
  // valgrind; TCMALLOC_PER_CPU_CACHES=0 selects the thread caches.
  EXPECT_EQ(PerCpu(), ModeWanted(true));
  char buf[8192];
  Ext()->GetStats(buf, sizeof(buf));
  EXPECT_NE(strstr(buf, PerCpu() ? "CPU caches (per-CPU mode" : "Per-thread cache mode"), nullptr) << buf;
  EXPECT_NE(strstr(buf, "Bytes in per-CPU cache freelists"), nullptr);
}

// Central lists come in shards: a power of two, at most 8, at most the CPUs there can be
// (this machine has two), and GetStats says how many.
TEST(FrontEnd, CentralListShardsArePerCpuAndGetStatsSaysSo) {
  const size_t shards = Prop("tcmalloc.central_shards");
  EXPECT_GE(shards, 1u);
  EXPECT_LE(shards, 8u);
  EXPECT_EQ(shards & (shards - 1), 0u) << shards;
  EXPECT_LE(shards, static_cast<size_t>(sysconf(_SC_NPROCESSORS_CONF)));
  if (sysconf(_SC_NPROCESSORS_CONF) >= 2) {
    EXPECT_GE(shards, 2u);
  }
  char buf[8192];
  Ext()->GetStats(buf, sizeof(buf));
  EXPECT_NE(strstr(buf, "Central-list shards ("), nullptr) << buf;
  // Classes are sharded one by one (integration/shared_bins_test), never more than exist.
  EXPECT_LT(Prop("tcmalloc.sharded_classes"), 100u);
  EXPECT_NE(strstr(buf, " sharded classes)"), nullptr) << buf;
}

// GetStats' count of "Empty spans kept by central lists" (the line's first number).
static unsigned long KeptSpans() {
  char buf[8192];
  Ext()->GetStats(buf, sizeof(buf));
  const char* line = strstr(buf, "Empty spans kept by central lists (");
  if (line == nullptr) ADD_FAILURE() << buf;
  if (line == nullptr) return 0;
  while (line > buf && line[-1] != ':') --line;
  return strtoul(line, nullptr, 10);
}

// Spans of 64-byte blocks, all of them freed: the lists keep some for their next
// allocations (the caches take the first blocks back; the rest empties spans).
static void EmptySomeSpans() {
  std::vector<void*> blocks;
  for (int i = 0; i < 20000; ++i) blocks.push_back(malloc(64));  // ~160 one-page spans
  for (void* p : blocks) free(p);
}

// The same when another small class grows the heap, the program's usual pattern: a phase
// of 64-byte objects freed, then a phase of 2 KiB ones that needs more pages than the heap
// has free. Kept only while the heap did not need their pages.
TEST(CentralLists, KeptSpansGoBackWhenAnotherClassGrowsTheHeap) {
  EmptySomeSpans();
  ASSERT_GT(KeptSpans(), 0u) << "no span was kept: the rest of this test would prove nothing";
  std::vector<void*> blocks;
  for (int i = 0; i < 40000; ++i) blocks.push_back(malloc(2048));  // ~80 MiB: the heap grows
  EXPECT_EQ(KeptSpans(), 0u) << "another class grew the heap while the lists kept empty spans";
  // Held, not freed: freeing 80 MiB would make the surplus rule close the lists' budget,
  // and the tests below need it open.
  static std::vector<void*> held;
  held.swap(blocks);
}

// Kept spans are pages reused before the heap grows: a request the free runs cannot serve
// (here a large block, so the heap must map memory it does not hold yet) gives them back
// to the page heap first, and the heap does not stay grown by what the lists kept. First of
// these tests: it leaves the lists' budget open.
TEST(CentralLists, KeptSpansGoBackBeforeTheHeapGrows) {
  EmptySomeSpans();
  ASSERT_GT(KeptSpans(), 0u) << "no span was kept: the rest of this test would prove nothing";
  // Never freed: freeing it would make the surplus rule fire, which closes the lists'
  // budget until the next maintenance pass, and the tests below need it open.
  static void* big = malloc(size_t{96} << 20);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(KeptSpans(), 0u) << "the heap grew while the lists kept empty spans";
}

// Empty spans a central list keeps for its next allocations show in GetStats, and
// ReleaseFreeMemory gives them back with everything else free.
TEST(CentralLists, KeptEmptySpansAreReportedAndReleased) {
  EmptySomeSpans();
  ASSERT_GT(KeptSpans(), 0u) << "no span was kept: the rest of this test would prove nothing";
  Ext()->ReleaseFreeMemory();
  EXPECT_EQ(KeptSpans(), 0u);
}

// A large block freed that makes the surplus rule release (far more free than in use) takes
// the kept spans with it: one kept span keeps its huge page from going back whole. Here the
// freed block is the surplus; a program that frees a big buffer after its small objects.
TEST(CentralLists, KeptSpansGoWhenAFreedLargeBlockIsSurplus) {
  char* big = static_cast<char*>(malloc(size_t{256} << 20));
  ASSERT_NE(big, nullptr);
  EmptySomeSpans();
  ASSERT_GT(KeptSpans(), 0u) << "no span was kept: the rest of this test would prove nothing";
  size_t releases_before = 0, releases_after = 0;
  char buf[8192];
  Ext()->GetStats(buf, sizeof(buf));
  const char* m = strstr(buf, " surplus releases");
  ASSERT_NE(m, nullptr) << buf;
  while (m > buf && m[-1] >= '0' && m[-1] <= '9') --m;
  releases_before = strtoul(m, nullptr, 10);
  free(big);
  Ext()->GetStats(buf, sizeof(buf));
  m = strstr(buf, " surplus releases");
  ASSERT_NE(m, nullptr) << buf;
  while (m > buf && m[-1] >= '0' && m[-1] <= '9') --m;
  releases_after = strtoul(m, nullptr, 10);
  ASSERT_GT(releases_after, releases_before) << "the free did not make the surplus rule release";
  EXPECT_EQ(KeptSpans(), 0u) << "the surplus release left the kept spans";
}

// The hardening's batch check proves most batches free of duplicates by their runs of
// rising or falling addresses, without the duplicate filter (central_freelist.h). Two
// shapes programs have: a producer's blocks of mixed sizes freed by another thread in the
// order they were made (xmalloc), and trees built and freed again (binary trees). Per-CPU
// mode sends 1-2% of the producer/consumer batches to the filter, per-thread mode 3-5%; a
// check whose runs went on across spans sent 29% and 40%. The shape that defeats the runs
// (objects of many spans interleaved) is central_freelist_test's.
struct Node {
  Node* left;
  Node* right;
};
Node* MakeTree(int depth) {
  Node* n = static_cast<Node*>(malloc(sizeof(Node)));
  n->left = depth > 0 ? MakeTree(depth - 1) : nullptr;
  n->right = depth > 0 ? MakeTree(depth - 1) : nullptr;
  return n;
}
void FreeTree(Node* n) {
  if (n == nullptr) return;
  FreeTree(n->right);
  FreeTree(n->left);
  free(n);
}

TEST(BatchCheck, ProducerConsumerAndTreeBatchesRarelyNeedTheFilter) {
  if (Prop("tcmalloc.hardened") == 0) GTEST_SKIP() << "checks are off";
  // As xmalloc does: the producer hands chunks of 256 blocks over a queue (at most 64
  // waiting) to a consumer that frees them while the producer goes on, so what the
  // consumer's CPU gives up parks in the transfer caches (checked on the way) and the
  // producer takes it back.
  constexpr size_t kChunk = 256, kChunks = 1600, kObjects = kChunk * kChunks;
  // Returns the filtered share of one run's batches, in percent.
  auto filtered_percent = [&]() -> double {
    size_t checked = Prop("tcmalloc.batch_check_batches");
    size_t filtered = Prop("tcmalloc.batch_check_filtered_batches");
    std::mutex mu;
    std::condition_variable changed;
    std::deque<std::vector<void*>> queue;
    std::thread producer([&] {
      uint64_t state = 1;
      for (size_t c = 0; c < kChunks; ++c) {
        std::vector<void*> chunk(kChunk);
        for (void*& p : chunk) {
          state = state * 6364136223846793005u + 1442695040888963407u;
          p = malloc(32 + (state >> 33) % 33);  // 32-64 bytes: three classes interleaved
        }
        std::unique_lock<std::mutex> l(mu);
        changed.wait(l, [&] { return queue.size() < 64; });
        queue.push_back(std::move(chunk));
        changed.notify_all();
      }
    });
    std::thread consumer([&] {
      for (size_t c = 0; c < kChunks; ++c) {
        std::vector<void*> chunk;
        {
          std::unique_lock<std::mutex> l(mu);
          changed.wait(l, [&] { return !queue.empty(); });
          chunk = std::move(queue.front());
          queue.pop_front();
          changed.notify_all();
        }
        for (void* p : chunk) free(p);
      }
    });
    producer.join();
    consumer.join();
    size_t batches = Prop("tcmalloc.batch_check_batches") - checked;
    size_t sent = Prop("tcmalloc.batch_check_filtered_batches") - filtered;
    // The remote frees crossed the check in batches (at most 128 objects each). How many
    // depends on the interleaving: per-CPU mode 2000-2250 alone or pinned to one CPU,
    // per-thread mode ~12,800, but 1371 and 1559 in one CI run's parallel ctest, where the
    // bound was 1600. A share over a few hundred batches still means something; frees
    // that never reach the check give none.
    EXPECT_GT(batches, kObjects / 128 / 8) << "the frees did not reach the batch check";
    return batches == 0 ? 100.0 : 100.0 * static_cast<double>(sent) / static_cast<double>(batches);
  };
  // The share depends on how the two threads interleave: alone on 2 CPUs it is 0.3-2.3%
  // a run, beside two or four busy loops 0.2-8.8% (150 runs in both modes), and CI's
  // parallel ctest saw 10.2% and 11% once each. The median of three runs against 15%
  // keeps a 2x margin below the broken checks' 29% and 40% and does not fail on a
  // scheduler's bad run.
  double share[3];
  for (double& s : share) s = filtered_percent();
  std::sort(share, share + 3);
  EXPECT_LE(share[1], 15.0) << "median filtered share " << share[1] << "% of producer/consumer batches ("
                            << share[0] << "%, " << share[1] << "%, " << share[2] << "%)";

  size_t checked = Prop("tcmalloc.batch_check_batches");
  size_t filtered = Prop("tcmalloc.batch_check_filtered_batches");
  for (int i = 0; i < 8; ++i) FreeTree(MakeTree(16));  // 2^17 nodes, 2 MiB a tree
  const size_t batches = Prop("tcmalloc.batch_check_batches") - checked;
  const size_t sent = Prop("tcmalloc.batch_check_filtered_batches") - filtered;
  ASSERT_GT(batches, 0u) << "the trees did not reach the batch check";
  // Per-thread mode's lists interleave the spans of a tree's nodes: most of its batches
  // need the filter there (66% in binary trees); per-CPU slabs keep their order.
  if (PerCpu()) {
    EXPECT_LE(sent * 10, batches) << sent << " of " << batches << " tree batches used the filter";
  }
}

TEST(ThreadCaches, IdleThreadGivesItsCacheBack) {
  PinHere();
  std::vector<void*> v;
  for (int i = 0; i < 2000; ++i) v.push_back(malloc(64));
  for (void* p : v) free(p);
  const size_t before = Prop("tcmalloc.current_total_thread_cache_bytes");
  EXPECT_GT(before, 0u);
  if (PerCpu()) {
    // No thread owns a cache; marking the thread idle drains the CPU it runs on.
    EXPECT_EQ(Ext()->GetThreadCacheSize(), 0u);
    EXPECT_GT(Prop("tcmalloc.cpu_free"), 0u);
    Ext()->MarkThreadIdle();
    EXPECT_LT(Prop("tcmalloc.current_total_thread_cache_bytes"), before);
    EXPECT_EQ(Prop("tcmalloc.thread_cache_free_bytes"), 0u);
    Unpin();
    return;
  }
  EXPECT_GT(Ext()->GetThreadCacheSize(), 0u);
  Ext()->MarkThreadIdle();
  EXPECT_EQ(Ext()->GetThreadCacheSize(), 0u);
  EXPECT_LT(Prop("tcmalloc.current_total_thread_cache_bytes"), before);
  Ext()->MarkThreadBusy();
  free(malloc(64));  // the cache comes back on demand

  for (int i = 0; i < 2000; ++i) v[static_cast<size_t>(i)] = malloc(64);
  for (void* p : v) free(p);
  Ext()->MarkThreadTemporarilyIdle();
  EXPECT_EQ(Ext()->GetThreadCacheSize(), 0u);
  Unpin();
}

TEST(ThreadCaches, CountReturnsToOneAfterThreadsComeAndGo) {
  for (int i = 0; i < 300; ++i) std::thread([] { g_sink = malloc(100); free(g_sink); }).join();
  // Per-CPU mode creates no thread caches at all.
  EXPECT_EQ(Prop("tcmalloc.impl.thread_cache_count"), PerCpu() ? 0u : 1u);
}

TEST(FrontEnd, ReleaseFreeMemoryEmptiesTheCpuCaches) {
  std::vector<void*> v;
  for (int i = 0; i < 5000; ++i) v.push_back(malloc(48));
  for (void* p : v) free(p);
  Ext()->ReleaseFreeMemory();
  EXPECT_EQ(Prop("tcmalloc.cpu_free"), 0u);
}

TEST(Stats, FitsAnyBufferAndHasEverySection) {
  for (int len : {1, 2, 10, 100, 1000}) {
    std::vector<char> buf(static_cast<size_t>(len) + 16, 'x');
    Ext()->GetStats(buf.data(), len);
    EXPECT_LT(strlen(buf.data()), static_cast<size_t>(len)) << len;
    EXPECT_EQ(buf[static_cast<size_t>(len)], 'x') << "wrote past the end for " << len;
  }
  std::vector<char> buf(1 << 20);
  g_sink = malloc(100);
  Ext()->GetStats(buf.data(), static_cast<int>(buf.size()));
  std::string s(buf.data());
  for (const char* section : {"Bytes in use by application", "Bytes in page heap freelist",
                              "Bytes in central cache freelist", "Bytes in transfer cache freelist",
                              "Bytes in thread cache freelists", "Bytes in malloc metadata",
                              "Bytes released to OS", "Thread heaps in use", "Size classes",
                              "Page heap free runs", "Memory sources"})
    EXPECT_NE(s.find(section), std::string::npos) << section;
  free(g_sink);
}

// "Bytes in malloc metadata" counts what metadata may touch (slabs, transfer-cache arrays
// reserved whole); GetStats also says how much of its mappings is resident, which the
// kernel must agree with: more than nothing, no more than mapped, no more than the
// process's resident memory.
TEST(Stats, MetadataLineSaysWhatIsResident) {
  std::vector<char> buf(1 << 20);
  g_sink = malloc(100);  // the heap in use: at least a span record written
  Ext()->GetStats(buf.data(), static_cast<int>(buf.size()));
  free(g_sink);
  const char* line = strstr(buf.data(), "Metadata mappings: ");
  ASSERT_NE(line, nullptr);
  long resident = -1, mapped = -1, leaves_resident = -1, leaves_mapped = -1;
  ASSERT_EQ(sscanf(line,
                   "Metadata mappings: %ld KiB resident of %ld KiB mapped (mincore); the class map's leaves %ld KiB of "
                   "%ld KiB",
                   &resident, &mapped, &leaves_resident, &leaves_mapped),
            4)
      << line;
  EXPECT_GT(resident, 0);
  EXPECT_LE(resident, mapped);
  // A leaf (16 MiB, a byte per page of 128 GiB) is mapped once a span is registered in it
  // and written only where spans are: mostly not resident. A count that took "mapped" for
  // "resident" fails here.
  EXPECT_GE(leaves_mapped, 16 << 10);
  EXPECT_GT(leaves_resident, 0);
  EXPECT_LT(leaves_resident, leaves_mapped / 2);
  EXPECT_LE(leaves_resident, resident);
  long pages = 0, rss_pages = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(fscanf(f, "%ld %ld", &pages, &rss_pages), 2);
  fclose(f);
  EXPECT_LE(resident, rss_pages * 4);
}

// The per-class table says where the overhead is: objects in use of span capacity and the
// fragmentation of one class, found by its row.
TEST(Stats, ClassTableShowsObjectsInUseOfCapacityAndFragmentation) {
  constexpr size_t kCount = 2000;
  std::vector<void*> blocks;
  blocks.reserve(kCount);
  // A sampled or guarded block lives outside the class's spans, and one of the kept half
  // would make the row count 999 (one guarded block per 64 MiB by default: about one run
  // in seventy failed in CI). Both samplers are off while the blocks are made; a countdown
  // that runs out meanwhile samples nothing.
  size_t sample_parameter = 0, guarded_rate = 0;
  ASSERT_TRUE(Ext()->GetNumericProperty("tcmalloc.sample_parameter", &sample_parameter));
  ASSERT_TRUE(Ext()->GetNumericProperty("tcmalloc.guarded_sample_rate", &guarded_rate));
  Ext()->SetNumericProperty("tcmalloc.sample_parameter", 0);
  Ext()->SetNumericProperty("tcmalloc.guarded_sample_rate", 0);
  for (size_t i = 0; i < kCount; ++i) blocks.push_back(malloc(1000));  // class 1024
  Ext()->SetNumericProperty("tcmalloc.sample_parameter", sample_parameter);
  Ext()->SetNumericProperty("tcmalloc.guarded_sample_rate", guarded_rate);
  for (size_t i = 0; i < kCount; i += 2) free(blocks[i]);
  std::vector<char> buf(1 << 20);
  std::string s;
  size_t cl = 0, size = 0, pages = 0, in_use = 0, capacity = 0;
  double span_mib = 0, used_mib = 0, thread_mib = 0, xfer_mib = 0, central_mib = 0, tail_mib = 0, frag = -1;
  bool found = false;
  // One snapshot: no maintenance pass runs while the table is collected (the background
  // thread an earlier test switched on and off may still be running passes), so no object
  // is counted in two tiers. It took up to five reads before that.
  Ext()->GetStats(buf.data(), static_cast<int>(buf.size()));
  s = buf.data();
  for (size_t at = s.find('\n'); at != std::string::npos && !found; at = s.find('\n', at + 1)) {
    found = sscanf(s.c_str() + at + 1, "%zu %zu %zu %zu %zu %lf %lf %lf %lf %lf %lf %lf", &cl, &size, &pages,
                   &in_use, &capacity, &span_mib, &used_mib, &thread_mib, &xfer_mib, &central_mib, &tail_mib,
                   &frag) == 12 &&
            size == 1024;
  }
  EXPECT_NE(s.find("Maintenance: "), std::string::npos);
  EXPECT_NE(s.find("\ntotal "), std::string::npos);
  ASSERT_TRUE(found) << s;
  EXPECT_GE(in_use, kCount / 2);
  EXPECT_LE(in_use, kCount / 2 + 64) << "freed blocks counted as in use";
  EXPECT_GE(capacity, kCount);
  EXPECT_NEAR(used_mib, static_cast<double>(in_use) * 1024 / 1048576.0, 0.01);
  EXPECT_NEAR(span_mib, used_mib + thread_mib + xfer_mib + central_mib + tail_mib, 0.05);
  EXPECT_GT(frag, 0.0);
  EXPECT_LT(frag, 100.0);
  for (size_t i = 1; i < kCount; i += 2) free(blocks[i]);
}

TEST(Sizes, EstimatesOwnershipAndAllocatedSize) {
  EXPECT_EQ(Ext()->GetEstimatedAllocatedSize(100), 112u);
  void* p = malloc(100);
  EXPECT_EQ(Ext()->GetAllocatedSize(p), 112u);
  EXPECT_EQ(Ext()->GetOwnership(p), MallocExtension::kOwned);
  int on_stack;
  EXPECT_EQ(Ext()->GetOwnership(&on_stack), MallocExtension::kNotOwned);
  EXPECT_EQ(Ext()->GetOwnership(nullptr), MallocExtension::kNotOwned);
  EXPECT_EQ(Ext()->GetAllocatedSize(nullptr), 0u);
  EXPECT_TRUE(Ext()->VerifyMallocMemory(p));
  EXPECT_FALSE(Ext()->VerifyMallocMemory(&on_stack));
  free(p);
  EXPECT_TRUE(Ext()->VerifyAllMemory());
}

TEST(Walks, RangesCoverLiveBlocks) {
  char* big = static_cast<char*>(malloc(3 << 20));
  struct Seen {
    uintptr_t target;
    bool found = false;
    size_t inuse = 0, free = 0;
  } seen{reinterpret_cast<uintptr_t>(big)};
  Ext()->Ranges(&seen, [](void* arg, const base::MallocRange* r) {
    auto* s = static_cast<Seen*>(arg);
    if (r->type == base::MallocRange::INUSE) {
      s->inuse += r->length;
      if (r->address <= s->target && s->target < r->address + r->length) s->found = true;
    } else {
      s->free += r->length;
    }
  });
  EXPECT_TRUE(seen.found);
  EXPECT_GE(seen.inuse, size_t{3} << 20);
  free(big);
}

TEST(Walks, FreeListSizesNameEveryTier) {
  std::vector<MallocExtension::FreeListInfo> v;
  Ext()->GetFreeListSizes(&v);
  ASSERT_FALSE(v.empty());
  bool seen_central = false, seen_page = false, seen_thread = false;
  for (const auto& f : v) {
    std::string t = f.type;
    seen_central |= t == "tcmalloc.central";
    seen_page |= t == "tcmalloc.page";
    seen_thread |= t == "tcmalloc.thread";
    EXPECT_LE(f.min_object_size, f.max_object_size);
  }
  EXPECT_TRUE(seen_central && seen_page && seen_thread);
}

TEST(Walks, GrowthStacksAreAHeapProfile) {
  std::string out;
  g_sink = malloc(64 << 20);  // forces growth
  Ext()->GetHeapGrowthStacks(&out);
  free(g_sink);
  EXPECT_EQ(out.rfind("heap profile: ", 0), 0u) << out.substr(0, 80);
  EXPECT_NE(out.find("@ growth"), std::string::npos);
  EXPECT_NE(out.find("\nMAPPED_LIBRARIES:\n"), std::string::npos);
  void** traces = Ext()->ReadHeapGrowthStackTraces();
  ASSERT_NE(traces, nullptr);
  size_t entries = 0;
  for (void** e = traces; e[0] != nullptr; e += 3 + reinterpret_cast<uintptr_t>(e[2])) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(e[0]), 1u);
    EXPECT_GT(reinterpret_cast<uintptr_t>(e[1]), 0u);
    ++entries;
  }
  EXPECT_GT(entries, 0u);
  delete[] traces;
  std::string sample;
  Ext()->GetHeapSample(&sample);
  EXPECT_EQ(sample.rfind("heap profile: ", 0), 0u);
}

// The depth of the stack recorded for the heap growth that a fresh block of `bytes` forces
// (larger than anything free, so the page heap must grow); -1 if no growth was recorded.
int NewestGrowthDepth(size_t bytes) {
  auto count = [] {
    size_t n = 0;
    void** traces = Ext()->ReadHeapGrowthStackTraces();
    for (void** e = traces; e[0] != nullptr; e += 3 + reinterpret_cast<uintptr_t>(e[2])) ++n;
    delete[] traces;
    return n;
  };
  const size_t before = count();
  void* block = malloc(bytes);
  void** traces = Ext()->ReadHeapGrowthStackTraces();
  const int depth = static_cast<int>(reinterpret_cast<uintptr_t>(traces[2]));
  delete[] traces;
  free(block);
  return count() > before ? depth : -1;
}

// libtcmalloc_minimal takes a growth's stack only while heap sampling is on (the unwinder
// is at work then anyway); otherwise it records the size alone, as gperftools' minimal
// library does, so a small program keeps no unwind tables resident. libtcmalloc always
// records the stack (profiler.api's HeapGrowthsRecordTheirStacks).
TEST(Walks, MinimalGrowthsHaveStacksOnlyWhileSampling) {
  size_t old = 0;
  ASSERT_TRUE(Ext()->GetNumericProperty("tcmalloc.sample_parameter", &old));
  const size_t heap = Prop("generic.heap_size");
  ASSERT_TRUE(Ext()->SetNumericProperty("tcmalloc.sample_parameter", 0));
  EXPECT_EQ(NewestGrowthDepth(heap + (256u << 20)), 0);
  ASSERT_TRUE(Ext()->SetNumericProperty("tcmalloc.sample_parameter", 1 << 19));
  EXPECT_GT(NewestGrowthDepth(Prop("generic.heap_size") + (256u << 20)), 0);
  ASSERT_TRUE(Ext()->SetNumericProperty("tcmalloc.sample_parameter", old));
}

// Blocks of 64 KiB and more reach the housekeeping tick on every malloc; in per-CPU mode
// that is TickOnly's short path, which must neither skip the passes nor keep a sampler
// that was turned on meanwhile from starting.
size_t MaintenancePasses() {
  char buf[1 << 16];
  Ext()->GetStats(buf, sizeof buf);
  const char* at = strstr(buf, "Maintenance: ");
  return at == nullptr ? 0 : strtoul(at + strlen("Maintenance: "), nullptr, 10);
}

TEST(Maintenance, PassesRunWhileOnlyLargeBlocksHitTheCache) {
  // Both samplers off: a sample's slow path would tick as well, and hide a tick that the
  // short path skipped.
  const size_t sample_parameter = Prop("tcmalloc.sample_parameter");
  const size_t guarded_rate = Prop("tcmalloc.guarded_sample_rate");
  Ext()->SetNumericProperty("tcmalloc.sample_parameter", 0);
  Ext()->SetNumericProperty("tcmalloc.guarded_sample_rate", 0);
  for (int i = 0; i < 1000; ++i) {  // let the countdowns armed before run out
    g_sink = malloc(128 << 10);
    free(g_sink);
  }
  const size_t before = MaintenancePasses();
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(450);
  while (std::chrono::steady_clock::now() < end) {
    for (int i = 0; i < 100; ++i) {
      g_sink = malloc(128 << 10);
      free(g_sink);
    }
  }
  // A pass at most every 100 ms; other threads' or slow paths' passes count too, but this
  // loop reaches no slow path once its blocks are cached.
  EXPECT_GE(MaintenancePasses(), before + 2);
  Ext()->SetNumericProperty("tcmalloc.sample_parameter", sample_parameter);
  Ext()->SetNumericProperty("tcmalloc.guarded_sample_rate", guarded_rate);
}

TEST(Sampling, ASamplerTurnedOnWhileOnlyLargeBlocksAreAllocatedStartsSampling) {
  size_t saved = 0;
  ASSERT_TRUE(Ext()->GetNumericProperty("tcmalloc.sample_parameter", &saved));
  ASSERT_TRUE(Ext()->SetNumericProperty("tcmalloc.sample_parameter", 0));
  for (int i = 0; i < 2000; ++i) {  // the countdown re-armed with the sampler off
    g_sink = malloc(64 << 10);
    free(g_sink);
  }
  ASSERT_TRUE(Ext()->SetNumericProperty("tcmalloc.sample_parameter", 256 << 10));
  std::vector<void*> kept;
  for (int i = 0; i < 400; ++i) kept.push_back(malloc(64 << 10));  // 25 MiB: ~100 samples
  std::string sample;
  Ext()->GetHeapSample(&sample);
  for (void* p : kept) free(p);
  Ext()->SetNumericProperty("tcmalloc.sample_parameter", saved);
  // "heap profile: <objects>: <bytes> [...": the sampled blocks in use.
  ASSERT_EQ(sample.rfind("heap profile: ", 0), 0u);
  const unsigned long objects = strtoul(sample.c_str() + strlen("heap profile: "), nullptr, 10);
  EXPECT_GE(objects, 20u) << sample.substr(0, 120);
}

TEST(Properties, BytesInUseHoldStillWhileAnotherThreadRunsPasses) {
  // A maintenance pass moves free objects between tiers (caches, transfer caches, spans, the
  // page heap); the totals sum the tiers one after another. Read while a pass moves objects
  // from a tier not yet summed to one already summed, freed bytes counted as in use (CI:
  // mallinfo 254 KiB off). With nothing allocated or freed meanwhile, every read must agree.
  std::atomic<bool> stop{false};
  std::thread passes([&] {
    while (!stop.load(std::memory_order_relaxed)) MallocExtension::ProcessBackgroundActions();
  });
  std::vector<void*> blocks(20000);
  int mismatches = 0;
  for (int round = 0; round < 100 && mismatches == 0; ++round) {
    for (void*& p : blocks) p = malloc(64 + static_cast<size_t>(round % 8) * 64);
    for (void* p : blocks) free(p);  // into the front end, its overflow parked in transfer caches
    const size_t first = Prop("generic.current_allocated_bytes");
    for (int i = 0; i < 20; ++i)
      if (Prop("generic.current_allocated_bytes") != first) ++mismatches;
  }
  stop = true;
  passes.join();
  EXPECT_EQ(mismatches, 0);
}

TEST(Release, ReleaseToSystemReleasesAtLeastWhatWasAsked) {
  // 20 MiB: below the page heap's surplus trigger (PageHeap::kSurplusReserve), so the block
  // stays free and backed until asked for: usually. The free also ticks the maintenance
  // pass, and merged with a long-idle free neighbour the run can look idle and go at once
  // (seen in about one full run of this program in ten, after the earlier tests). So the
  // promise checked is the API's: at least what was asked, or all there was.
  char* block = static_cast<char*>(malloc(20 << 20));
  ASSERT_NE(block, nullptr);
  memset(block, 1, 20 << 20);
  free(block);
  const size_t before = Prop("tcmalloc.pageheap_unmapped_bytes");
  const size_t backed = Prop("tcmalloc.pageheap_free_bytes");
  ASSERT_GE(backed, size_t{1} << 20) << "nothing free and backed to release: the test would prove nothing";
  const size_t asked = 8 << 20;
  Ext()->ReleaseToSystem(asked);
  EXPECT_GE(Prop("tcmalloc.pageheap_unmapped_bytes"), before + std::min(asked, backed & ~size_t{8191}));
  Ext()->SetMemoryReleaseRate(3.5);
  EXPECT_DOUBLE_EQ(Ext()->GetMemoryReleaseRate(), 3.5);
  Ext()->SetMemoryReleaseRate(1.0);
}

TEST(Stats, MallocMemoryStatsCountsLiveBlocks) {
  int blocks1 = 0, hist[kMallocHistogramSize];
  size_t total1 = 0;
  ASSERT_TRUE(Ext()->MallocMemoryStats(&blocks1, &total1, hist));
  std::vector<void*> v;
  for (int i = 0; i < 100; ++i) v.push_back(malloc(1 << 20));
  int blocks2 = 0;
  size_t total2 = 0;
  ASSERT_TRUE(Ext()->MallocMemoryStats(&blocks2, &total2, hist));
  EXPECT_GE(blocks2, blocks1 + 100);
  EXPECT_GE(total2, total1 + (100u << 20));
  EXPECT_GE(hist[20], 100);
  for (void* p : v) free(p);
}

// A program's own memory source in front of ours, falling back to ours.
class CountingSysAllocator : public SysAllocator {
 public:
  explicit CountingSysAllocator(SysAllocator* fallback) : fallback_(fallback) {}
  void* Alloc(size_t size, size_t* actual, size_t alignment) override {
    calls.fetch_add(1);
    return fallback_->Alloc(size, actual, alignment);
  }
  std::atomic<int> calls{0};

 private:
  SysAllocator* fallback_;
};

TEST(SystemAllocator, ProgramCanPlugInItsOwnSource) {
  SysAllocator* builtin = Ext()->GetSystemAllocator();
  ASSERT_NE(builtin, nullptr);
  static CountingSysAllocator counting(builtin);
  Ext()->SetSystemAllocator(&counting);
  EXPECT_EQ(Ext()->GetSystemAllocator(), &counting);
  // More than the whole heap holds: it must grow, through the plugged-in source.
  void* p = malloc(Prop("generic.heap_size") + (64 << 20));
  ASSERT_NE(p, nullptr);
  memset(p, 1, 4096);
  EXPECT_GT(counting.calls.load(), 0);
  free(p);
  Ext()->SetSystemAllocator(builtin);
  EXPECT_EQ(Ext()->GetSystemAllocator(), builtin);
}

std::atomic<int> g_new_calls{0}, g_delete_calls{0};
std::atomic<const void*> g_last_new{nullptr};
std::atomic<size_t> g_last_size{0};

TEST(Hooks, NewAndDeleteHooksSeeEveryCallWhileInstalled) {
  auto on_new = [](const void* p, size_t size) {
    g_new_calls++;
    g_last_new = p;
    g_last_size = size;
    g_sink = malloc(10);  // a hook may allocate; its own calls are not hooked again
    free(g_sink);
  };
  auto on_delete = [](const void*) { g_delete_calls++; };
  ASSERT_TRUE(MallocHook::AddNewHook(on_new));
  ASSERT_TRUE(MallocHook::AddDeleteHook(on_delete));
  void* p = malloc(123);
  EXPECT_EQ(g_last_new.load(), p);
  EXPECT_EQ(g_last_size.load(), 123u);
  free(p);
  void* aligned = memalign(128, 300);  // served from a rounded class: the hook sees the request
  EXPECT_EQ(g_last_new.load(), aligned);
  EXPECT_EQ(g_last_size.load(), 300u);
  free(aligned);
  char* q = new char[5000];
  g_sink = q;  // escapes, so the new/delete pair cannot be elided
  delete[] q;
  void* big = malloc(1 << 20);
  free(big);
  const int news = g_new_calls.load(), deletes = g_delete_calls.load();
  EXPECT_GE(news, 3);
  EXPECT_GE(deletes, 3);
  ASSERT_TRUE(MallocHook::RemoveNewHook(on_new));
  ASSERT_TRUE(MallocHook::RemoveDeleteHook(on_delete));
  EXPECT_FALSE(MallocHook::RemoveNewHook(on_new)) << "already removed";
  free(malloc(123));
  EXPECT_EQ(g_new_calls.load(), news);
  EXPECT_EQ(g_delete_calls.load(), deletes);
}

}  // namespace
