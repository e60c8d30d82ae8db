// Thread storm: 10^5 short-lived threads, started in batches. Each thread allocates a few
// dozen blocks of mixed sizes up to 256 KiB (so it builds a thread cache), frees half of them, and leaves the
// other half in a shared pool; the next batch's threads verify and free those blocks, whose
// allocating threads are dead by then. Every thread cache must go back when its thread exits:
// the allocator's heap and the process's RSS may grow only by a fixed allowance between the end
// of the warm-up and the end of the storm, and once every thread is gone only a few caches
// remain. No timing assertions.
//
// Usage: thread_storm [--threads N] [--batch N]
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gperftools/malloc_extension.h>

namespace {

constexpr size_t kHeapGrowthLimit = size_t{32} << 20;
constexpr size_t kRssGrowthLimit = size_t{48} << 20;
// Caches alive once every storm thread has been joined: the main thread's, and slack for
// threads the C library or the allocator may keep.
constexpr size_t kCachesLeftLimit = 4;

struct Block {
  uint8_t* p;
  size_t n;
  uint8_t seed;
};

std::mutex g_pool_mu;
std::vector<Block> g_pool;
std::atomic<uint64_t> g_failures{0};

// Whole 8-byte words (malloc's blocks are 8-aligned), the tail byte by byte.
uint64_t WordAt(size_t i, uint8_t seed) { return (i + 1) * 0x9e3779b97f4a7c15ULL ^ seed; }
void Fill(const Block& b) {
  auto* w = reinterpret_cast<uint64_t*>(b.p);
  for (size_t i = 0; i < b.n / 8; ++i) w[i] = WordAt(i, b.seed);
  for (size_t i = b.n / 8 * 8; i < b.n; ++i) b.p[i] = static_cast<uint8_t>(b.seed ^ i);
}
bool Intact(const Block& b) {
  const auto* w = reinterpret_cast<const uint64_t*>(b.p);
  for (size_t i = 0; i < b.n / 8; ++i)
    if (w[i] != WordAt(i, b.seed)) return false;
  for (size_t i = b.n / 8 * 8; i < b.n; ++i)
    if (b.p[i] != static_cast<uint8_t>(b.seed ^ i)) return false;
  return true;
}

uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

void Body(uint64_t id) {
  // Blocks left by the previous batch: allocated by threads that have exited since.
  std::vector<Block> adopted;
  {
    std::lock_guard<std::mutex> l(g_pool_mu);
    for (int i = 0; i < 16 && !g_pool.empty(); ++i) {
      adopted.push_back(g_pool.back());
      g_pool.pop_back();
    }
  }
  for (const Block& b : adopted) {
    if (!Intact(b)) g_failures.fetch_add(1);
    free(b.p);
  }
  std::vector<Block> mine;
  uint64_t x = Mix(id + 1);
  for (int i = 0; i < 32; ++i) {
    x = Mix(x + static_cast<uint64_t>(i));
    const uint64_t k = x % 1000;
    const size_t n = k < 850 ? 1 + x % 512 : k < 995 ? 513 + x % 32768 : 1 + x % (256 << 10);
    Block b{static_cast<uint8_t*>(malloc(n)), n, static_cast<uint8_t>(x >> 8)};
    if (b.p == nullptr) {
      g_failures.fetch_add(1);
      continue;
    }
    Fill(b);
    mine.push_back(b);
  }
  std::vector<Block> keep;
  for (size_t i = 0; i < mine.size(); ++i) {
    if (!Intact(mine[i])) g_failures.fetch_add(1);
    if (i % 2 == 0) {
      free(mine[i].p);
    } else {
      keep.push_back(mine[i]);
    }
  }
  std::lock_guard<std::mutex> l(g_pool_mu);
  g_pool.insert(g_pool.end(), keep.begin(), keep.end());
}

size_t Property(const char* name) {
  size_t v = 0;
  MallocExtension::instance()->GetNumericProperty(name, &v);
  return v;
}

size_t RssBytes() {
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long total = 0, rss = 0;
  const int got = fscanf(f, "%lu %lu", &total, &rss);
  fclose(f);
  return got == 2 ? rss * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  long total = 100000, batch = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--threads") {
      total = atol(argv[i + 1]);
    } else if (a == "--batch") {
      batch = atol(argv[i + 1]);
    }
  }
  if (total < 1 || batch < 1) {
    fprintf(stderr, "usage: %s [--threads N] [--batch N]\n", argv[0]);
    return 2;
  }
  {
    void* probe = malloc(64);
    if (MallocExtension::instance()->GetOwnership(probe) != MallocExtension::kOwned) {
      fprintf(stderr, "thread_storm: malloc is not tcmalloc's\n");
      return 2;
    }
    free(probe);
  }
  const long warmup = total / 20 > batch ? total / 20 : batch;
  size_t heap0 = 0, rss0 = 0, peak_caches = 0;
  long started = 0;
  std::vector<std::thread> threads;
  while (started < total) {
    if (heap0 == 0 && started >= warmup) {
      heap0 = Property("generic.heap_size");
      rss0 = RssBytes();
    }
    const long n = total - started < batch ? total - started : batch;
    threads.clear();
    for (long i = 0; i < n; ++i) threads.emplace_back(Body, static_cast<uint64_t>(started + i));
    const size_t caches = Property("tcmalloc.impl.thread_cache_count");
    if (caches > peak_caches) peak_caches = caches;
    for (std::thread& t : threads) t.join();
    started += n;
  }
  threads.clear();
  // The last batch's leftovers.
  for (const Block& b : g_pool) {
    if (!Intact(b)) g_failures.fetch_add(1);
    free(b.p);
  }
  g_pool.clear();
  g_pool.shrink_to_fit();
  const size_t heap1 = Property("generic.heap_size");
  const size_t rss1 = RssBytes();
  const size_t caches_left = Property("tcmalloc.impl.thread_cache_count");
  const double mib = 1 << 20;
  printf("thread_storm: %ld threads in batches of %ld, %llu verification failures\n", total, batch,
         static_cast<unsigned long long>(g_failures.load()));
  printf("thread_storm: heap %.1f -> %.1f MiB, rss %.1f -> %.1f MiB (after warm-up -> end)\n", heap0 / mib,
         heap1 / mib, rss0 / mib, rss1 / mib);
  printf("thread_storm: thread caches: peak %zu while a batch ran, %zu after all exited\n", peak_caches, caches_left);
  bool ok = g_failures.load() == 0;
  if (heap0 != 0 && heap1 > heap0 + kHeapGrowthLimit) {
    fprintf(stderr, "thread_storm: heap grew by more than %zu MiB\n", kHeapGrowthLimit >> 20);
    ok = false;
  }
  if (rss0 != 0 && rss1 > rss0 + kRssGrowthLimit) {
    fprintf(stderr, "thread_storm: rss grew by more than %zu MiB\n", kRssGrowthLimit >> 20);
    ok = false;
  }
  if (caches_left > kCachesLeftLimit) {
    fprintf(stderr, "thread_storm: %zu thread caches left after every thread exited\n", caches_left);
    ok = false;
  }
  printf("thread_storm: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
