// Soak stress: threads × random sizes from 1 B to 64 MiB (heavily skewed to small) × cross-
// thread frees × realloc × memalign × calloc × new/delete, every object filled with a pattern
// from its own seed and verified before it is reallocated or freed.
//
// The run is split into epochs. Each epoch starts fresh threads (so thread caches are built and
// torn down again and again); blocks a thread still holds when its epoch ends are left to the
// next epoch's threads, which verify and free them (frees across thread lifetimes). Within an
// epoch, about one block in twelve is handed to another thread through its mailbox and freed
// there. Now and then a thread gives its cache back (MarkThreadIdle) or releases free memory
// to the OS (ReleaseFreeMemory), so those paths run concurrently with everything else.
//
// Built twice from this file:
//   soak_stress       linked with tcmalloc_minimal: malloc & co. are ours (tests/soak, scripts/soak.sh)
//   soak_stress_core  -DSOAK_CORE, linked with tcmalloc_core and calling the allocator's internal
//                     entry points, so it runs under ASan and TSan beside the sanitizer's malloc
//                     (scripts/sanitize.sh)
//
// Usage: soak_stress [--ops N | --seconds S] [--threads N] [--epochs N] [--max-size BYTES]
//                    [--live-cap BYTES] [--seed N] [--loaded-rseq-offset 1]
// --loaded-rseq-offset 1 (soak_stress_core only): per-CPU calls take the variant that loads
// the rseq offset instead of the one built in (tcm::UseLoadedRseqOffset), as they do on a
// machine whose glibc keeps its rseq area elsewhere; the run fails unless that variant is
// what the fast paths then open.
// Prints ops, bytes and RSS per epoch; exits 1 on any verification or allocation failure.
// No timing assertions.
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#ifdef SOAK_CORE
#include "api/allocation.h"
#else
#include <gperftools/malloc_extension.h>
#endif

namespace {

// ---- the allocator under test ------------------------------------------------------------

#ifdef SOAK_CORE
void* Malloc(size_t n) { return tcm::Allocate(n); }
void Free(void* p) { tcm::Deallocate(p); }
void* Realloc(void* p, size_t n) { return tcm::Reallocate(p, n); }
void* Calloc(size_t n, size_t m) { return tcm::AllocateZeroed(n, m); }
void* Memalign(size_t align, size_t n, uint64_t) { return tcm::AllocateAligned(align, n); }
void* New(size_t n) { return tcm::Allocate(n); }
void Delete(void* p) { tcm::Deallocate(p); }
size_t Usable(void* p) { return tcm::UsableSize(p, "soak"); }
bool Owned(void* p) { return tcm::OwnedSize(p) != 0; }
void ReleaseFree() { tcm::ReleaseFreeMemory(); }
void MarkIdle() { tcm::ReleaseCallingThreadCache(false); }
constexpr const char* kBackend = "tcmalloc_core (internal entry points)";
// --loaded-rseq-offset: false (the run fails) unless the per-CPU paths that load the offset
// are now the open ones. In per-thread mode there is nothing to switch.
bool UseLoadedRseqOffset() {
  tcm::UseLoadedRseqOffset(true);
  if (tcm::g_cpu_alloc_limit.load() == 0) {
    printf("soak: per-CPU caches are off: --loaded-rseq-offset changes nothing\n");
    return true;
  }
  if (tcm::g_cpu_built_in_alloc_limit.load() != 0 || tcm::g_cpu_built_in_free_limit.load() != 0 ||
      tcm::g_cpu_free_limit.load() == 0) {
    fprintf(stderr, "soak: --loaded-rseq-offset did not close the built-in per-CPU paths\n");
    return false;
  }
  printf("soak: per-CPU calls load the rseq offset\n");
  return true;
}
#else
void* Malloc(size_t n) { return malloc(n); }
void Free(void* p) { free(p); }
void* Realloc(void* p, size_t n) { return realloc(p, n); }
void* Calloc(size_t n, size_t m) { return calloc(n, m); }
void* Memalign(size_t align, size_t n, uint64_t which) {
  void* p = nullptr;
  switch (which % 3) {
    case 0: return memalign(align, n);
    case 1: return posix_memalign(&p, align, n) == 0 ? p : nullptr;
    default: return aligned_alloc(align, n);
  }
}
void* New(size_t n) { return ::operator new(n, std::nothrow); }
void Delete(void* p) { ::operator delete(p); }
size_t Usable(void* p) { return malloc_usable_size(p); }
bool Owned(void* p) { return MallocExtension::instance()->GetOwnership(p) == MallocExtension::kOwned; }
void ReleaseFree() { MallocExtension::instance()->ReleaseFreeMemory(); }
void MarkIdle() { MallocExtension::instance()->MarkThreadIdle(); }
constexpr const char* kBackend = "malloc (tcmalloc_minimal)";
bool UseLoadedRseqOffset() {
  fprintf(stderr, "soak: --loaded-rseq-offset needs soak_stress_core\n");
  return false;
}
#endif

// ---- options -----------------------------------------------------------------------------

struct Options {
  uint64_t ops = 1000000;   // total, over all threads and epochs (ignored with --seconds)
  double seconds = 0;        // run for this long instead
  int threads = 4;
  int epochs = 4;
  size_t max_size = size_t{64} << 20;
  size_t live_cap = size_t{128} << 20;  // per thread: above it, the next operation frees
  uint64_t seed = 1;
  bool loaded_rseq_offset = false;
};

// ---- random numbers and sizes ------------------------------------------------------------

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9e3779b97f4a7c15ULL + 1) {}
  uint64_t Next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545f4914f6cdd1dULL;
  }
  uint64_t Below(uint64_t n) { return Next() % n; }
  // Log-uniform in [lo, hi]: within a band, small sizes are as likely as each doubling.
  size_t LogUniform(size_t lo, size_t hi) {
    const int lo_bits = 63 - __builtin_clzll(lo);
    const int hi_bits = 63 - __builtin_clzll(hi);
    const int bits = lo_bits + static_cast<int>(Below(static_cast<uint64_t>(hi_bits - lo_bits + 1)));
    size_t v = (size_t{1} << bits) + Below(size_t{1} << bits);
    if (v < lo) v = lo;
    if (v > hi) v = hi;
    return v;
  }
};

// 1 B – max: 90% up to 256 B, 8% up to 32 KiB, ~2% up to 1 MiB, 1 in 2000 above.
size_t PickSize(Rng& r, size_t max) {
  const uint64_t k = r.Below(10000);
  size_t n;
  if (k < 9000) {
    n = 1 + r.Below(k < 5000 ? 64 : 256);
  } else if (k < 9800) {
    n = r.LogUniform(257, 32 << 10);
  } else if (k < 9995) {
    n = r.LogUniform((32 << 10) + 1, 1 << 20);
  } else {
    n = r.LogUniform((1 << 20) + 1, size_t{64} << 20);
  }
  return n < max ? n : max;
}

// ---- blocks and their patterns -----------------------------------------------------------

enum class Kind : uint8_t { kMalloc, kNew };

struct Block {
  void* p = nullptr;
  size_t size = 0;
  uint64_t seed = 0;
  Kind kind = Kind::kMalloc;
};

uint64_t WordAt(size_t i, uint64_t seed) { return (i + 1) * 0x9e3779b97f4a7c15ULL ^ seed; }

// The whole block: 8-byte words (blocks are 8-aligned), then the tail byte by byte.
void Fill(const Block& b) {
  auto* w = static_cast<uint64_t*>(b.p);
  const size_t words = b.size / 8;
  for (size_t i = 0; i < words; ++i) w[i] = WordAt(i, b.seed);
  auto* c = static_cast<uint8_t*>(b.p);
  for (size_t i = words * 8; i < b.size; ++i) c[i] = static_cast<uint8_t>(b.seed >> (8 * (i % 8)));
}

// Offset of the first byte in [0, limit) that does not match, or SIZE_MAX.
size_t FirstBad(const void* p, size_t size, uint64_t seed, size_t limit) {
  const auto* w = static_cast<const uint64_t*>(p);
  const size_t n = limit < size ? limit : size;
  const size_t words = n / 8;
  for (size_t i = 0; i < words; ++i)
    if (w[i] != WordAt(i, seed)) return i * 8;
  const auto* c = static_cast<const uint8_t*>(p);
  for (size_t i = words * 8; i < n; ++i) {
    const uint8_t want = i < (size / 8) * 8 ? static_cast<uint8_t>(WordAt(i / 8, seed) >> (8 * (i % 8)))
                                            : static_cast<uint8_t>(seed >> (8 * (i % 8)));
    if (c[i] != want) return i;
  }
  return SIZE_MAX;
}

// ---- shared state ------------------------------------------------------------------------

std::atomic<uint64_t> g_failures{0};

struct Counters {
  std::atomic<uint64_t> ops{0}, allocs{0}, frees{0}, reallocs{0}, cross{0}, aligned{0}, bytes{0};
};
Counters g_count;

void Report(const char* what, const Block& b, size_t offset) {
  if (g_failures.fetch_add(1) < 10) {
    fprintf(stderr, "soak: VERIFY FAILED: %s: block %p size %zu seed %#" PRIx64 " offset %zu\n", what, b.p,
            b.size, b.seed, offset);
  }
}

struct Mailbox {
  std::mutex mu;
  std::vector<Block> blocks;
};

// Blocks left over at the end of an epoch, adopted by the next one.
std::mutex g_orphans_mu;
std::vector<Block> g_orphans;

size_t RssBytes() {
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long pages_total = 0, pages_rss = 0;
  const int got = fscanf(f, "%lu %lu", &pages_total, &pages_rss);
  fclose(f);
  return got == 2 ? pages_rss * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

// ---- one worker --------------------------------------------------------------------------

class Worker {
 public:
  Worker(int id, const Options& o, std::vector<Mailbox>* boxes, uint64_t seed)
      : id_(id), o_(o), boxes_(boxes), rng_(seed), slots_(2048) {}

  void Run(uint64_t ops, const std::atomic<bool>* stop) {
    Adopt();
    for (uint64_t i = 0; (o_.seconds > 0 ? !stop->load(std::memory_order_relaxed) : i < ops); ++i) {
      Step();
      if ((i & 63) == 0) DrainMailbox();
    }
  }

  // End of the epoch (on a fresh thread): free what the mailbox holds, and of the blocks in
  // the slots leave half to the next epoch's threads and free the other half here.
  void Finish() {
    DrainMailbox();
    std::vector<Block> leave;
    for (Block& b : slots_) {
      if (b.p == nullptr) continue;
      if (rng_.Below(2) == 0) {
        leave.push_back(b);
      } else {
        Release(b);
      }
      b = Block{};
    }
    std::lock_guard<std::mutex> l(g_orphans_mu);
    g_orphans.insert(g_orphans.end(), leave.begin(), leave.end());
  }

  void DrainMailbox() {
    std::vector<Block> got;
    {
      Mailbox& box = (*boxes_)[static_cast<size_t>(id_)];
      std::lock_guard<std::mutex> l(box.mu);
      got.swap(box.blocks);
    }
    for (Block& b : got) Release(b);
  }

 private:
  void Step() {
    Block& b = slots_[rng_.Below(slots_.size())];
    const uint64_t op = rng_.Below(100);
    g_count.ops.fetch_add(1, std::memory_order_relaxed);
    if (live_ > o_.live_cap || op < 25) {
      Release(b);
    } else if (op < 60) {
      Release(b);
      Allocate(b, rng_.Below(20));
    } else if (op < 75) {
      Resize(b);
    } else if (op < 83) {
      HandOff(b);
    } else if (op < 98) {
      Check(b);
    } else if (rng_.Below(2000) == 0) {
      // Rare and heavy: give the cache back, or everything free back to the OS.
      if (rng_.Below(4) == 0) {
        ReleaseFree();
      } else {
        MarkIdle();
      }
    }
  }

  void Allocate(Block& b, uint64_t how) {
    Block nb;
    nb.size = PickSize(rng_, o_.max_size);
    nb.seed = rng_.Next();
    size_t align = 0;
    bool zero = false;
    if (how < 12) {
      nb.p = Malloc(nb.size);
    } else if (how < 15) {
      align = size_t{1} << (4 + rng_.Below(rng_.Below(8) == 0 ? 17 : 9));  // 16 B .. 4 KiB, rarely 1 MiB
      nb.p = Memalign(align, nb.size, rng_.Next());
      g_count.aligned.fetch_add(1, std::memory_order_relaxed);
    } else if (how < 18) {
      const size_t n = 1 + rng_.Below(nb.size);
      nb.size = n * (nb.size / n);
      nb.p = Calloc(n, nb.size / n);
      zero = true;
    } else {
      nb.p = New(nb.size);
      nb.kind = Kind::kNew;
    }
    if (nb.p == nullptr) {
      Report("allocation returned NULL", nb, 0);
      return;
    }
    const auto addr = reinterpret_cast<uintptr_t>(nb.p);
    if ((align != 0 && addr % align != 0) || addr % 8 != 0 || (nb.size >= 16 && addr % 16 != 0))
      Report("misaligned", nb, align);
    if (Usable(nb.p) < nb.size) Report("usable size below request", nb, Usable(nb.p));
    if (zero) {
      const auto* c = static_cast<const uint8_t*>(nb.p);
      for (size_t i = 0; i < nb.size; ++i) {
        if (c[i] != 0) {
          Report("calloc memory not zero", nb, i);
          break;
        }
      }
    }
    Fill(nb);
    b = nb;
    live_ += b.size;
    g_count.allocs.fetch_add(1, std::memory_order_relaxed);
    g_count.bytes.fetch_add(b.size, std::memory_order_relaxed);
  }

  void Check(const Block& b) {
    if (b.p == nullptr) return;
    const size_t bad = FirstBad(b.p, b.size, b.seed, b.size);
    if (bad != SIZE_MAX) Report("pattern", b, bad);
    if (!Owned(b.p)) Report("allocator disowns a live block", b, 0);
  }

  void Release(Block& b) {
    if (b.p == nullptr) return;
    Check(b);
    if (b.kind == Kind::kNew) {
      Delete(b.p);
    } else {
      Free(b.p);
    }
    if (live_ >= b.size) live_ -= b.size;
    b = Block{};
    g_count.frees.fetch_add(1, std::memory_order_relaxed);
  }

  void Resize(Block& b) {
    if (b.p == nullptr || b.kind != Kind::kMalloc) return;
    const size_t old = b.size;
    // Mostly small steps (realloc loops), sometimes anything.
    size_t size = rng_.Below(3) == 0 ? PickSize(rng_, o_.max_size) : old + rng_.Below(old / 2 + 16);
    if (size == 0) size = 1;
    if (size > o_.max_size) size = o_.max_size;
    void* q = Realloc(b.p, size);
    if (q == nullptr) {
      Report("realloc returned NULL", b, size);
      return;
    }
    const size_t bad = FirstBad(q, old, b.seed, size < old ? size : old);
    Block nb{q, size, b.seed, Kind::kMalloc};
    if (bad != SIZE_MAX) Report("realloc lost the contents", nb, bad);
    if (reinterpret_cast<uintptr_t>(q) % 8 != 0) Report("realloc misaligned", nb, 0);
    nb.seed = rng_.Next();
    Fill(nb);
    live_ = live_ - (live_ >= old ? old : live_) + size;
    b = nb;
    g_count.reallocs.fetch_add(1, std::memory_order_relaxed);
  }

  void HandOff(Block& b) {
    if (b.p == nullptr || o_.threads < 2) return;
    size_t to = rng_.Below(static_cast<uint64_t>(o_.threads) - 1);
    if (to >= static_cast<size_t>(id_)) ++to;
    Check(b);
    {
      Mailbox& box = (*boxes_)[to];
      std::lock_guard<std::mutex> l(box.mu);
      box.blocks.push_back(b);
    }
    if (live_ >= b.size) live_ -= b.size;
    b = Block{};
    g_count.cross.fetch_add(1, std::memory_order_relaxed);
  }

  // A share of the previous epoch's leftovers becomes ours.
  void Adopt() {
    std::vector<Block> mine;
    {
      std::lock_guard<std::mutex> l(g_orphans_mu);
      const size_t take = (g_orphans.size() + static_cast<size_t>(o_.threads) - 1) / static_cast<size_t>(o_.threads);
      for (size_t i = 0; i < take && !g_orphans.empty(); ++i) {
        mine.push_back(g_orphans.back());
        g_orphans.pop_back();
      }
    }
    for (Block& b : mine) Release(b);
  }

  int id_;
  const Options& o_;
  std::vector<Mailbox>* boxes_;
  Rng rng_;
  std::vector<Block> slots_;
  size_t live_ = 0;
};

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (a == "--ops") {
      o->ops = strtoull(v, nullptr, 10);
    } else if (a == "--seconds") {
      o->seconds = strtod(v, nullptr);
    } else if (a == "--threads") {
      o->threads = atoi(v);
    } else if (a == "--epochs") {
      o->epochs = atoi(v);
    } else if (a == "--max-size") {
      o->max_size = strtoull(v, nullptr, 10);
    } else if (a == "--live-cap") {
      o->live_cap = strtoull(v, nullptr, 10);
    } else if (a == "--seed") {
      o->seed = strtoull(v, nullptr, 10);
    } else if (a == "--loaded-rseq-offset") {
      o->loaded_rseq_offset = atoi(v) != 0;
    } else {
      return false;
    }
  }
  return o->threads >= 1 && o->epochs >= 1 && o->max_size >= 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    fprintf(stderr,
            "usage: %s [--ops N | --seconds S] [--threads N] [--epochs N] [--max-size BYTES] "
            "[--live-cap BYTES] [--seed N] [--loaded-rseq-offset 1]\n",
            argv[0]);
    return 2;
  }
  // Refuse to measure the wrong allocator.
  void* probe = Malloc(100);
  if (probe == nullptr || !Owned(probe)) {
    fprintf(stderr, "soak: the allocator under test does not own its own block: not tcmalloc?\n");
    return 2;
  }
  Free(probe);
  if (o.loaded_rseq_offset && !UseLoadedRseqOffset()) return 1;

  char budget[64];
  if (o.seconds > 0) {
    snprintf(budget, sizeof(budget), "%g s", o.seconds);
  } else {
    snprintf(budget, sizeof(budget), "%" PRIu64 " ops", o.ops);
  }
  printf("soak: %s, %d threads, %d epochs, sizes 1 B .. %zu B, %s\n", kBackend, o.threads, o.epochs, o.max_size,
         budget);
  const auto start = std::chrono::steady_clock::now();
  size_t peak_rss = 0;
  for (int e = 0; e < o.epochs; ++e) {
    std::vector<Mailbox> boxes(static_cast<size_t>(o.threads));
    std::vector<Worker*> workers;
    for (int t = 0; t < o.threads; ++t)
      workers.push_back(new Worker(t, o, &boxes, o.seed * 1000003 + static_cast<uint64_t>(e) * 1009 + static_cast<uint64_t>(t)));
    std::atomic<bool> stop{false};
    const uint64_t per_thread = o.ops / static_cast<uint64_t>(o.epochs) / static_cast<uint64_t>(o.threads);
    std::vector<std::thread> threads;
    for (Worker* w : workers) threads.emplace_back([w, per_thread, &stop] { w->Run(per_thread, &stop); });
    if (o.seconds > 0) {
      const auto until = start + std::chrono::duration<double>(o.seconds * (e + 1) / o.epochs);
      while (std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const size_t rss = RssBytes();
        if (rss > peak_rss) peak_rss = rss;
      }
      stop.store(true);
    }
    for (std::thread& t : threads) t.join();
    // Finish on fresh threads: mailboxes are drained by threads other than the ones that
    // filled them, and the blocks left over outlive every thread that touched them.
    std::vector<std::thread> finishers;
    for (Worker* w : workers) finishers.emplace_back([w] { w->Finish(); });
    for (std::thread& t : finishers) t.join();
    for (Worker* w : workers) w->DrainMailbox();
    for (Worker* w : workers) delete w;
    const size_t rss = RssBytes();
    if (rss > peak_rss) peak_rss = rss;
    printf("soak: epoch %d: %" PRIu64 " ops, rss %.1f MiB, failures %" PRIu64 "\n", e + 1, g_count.ops.load(),
           static_cast<double>(rss) / (1 << 20), g_failures.load());
    fflush(stdout);
  }
  // Whatever the last epoch left behind.
  {
    std::lock_guard<std::mutex> l(g_orphans_mu);
    for (Block& b : g_orphans) {
      const size_t bad = FirstBad(b.p, b.size, b.seed, b.size);
      if (bad != SIZE_MAX) Report("pattern (leftover)", b, bad);
      if (b.kind == Kind::kNew) {
        Delete(b.p);
      } else {
        Free(b.p);
      }
    }
    g_orphans.clear();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  printf("soak: %" PRIu64 " ops in %.1f s (%" PRIu64 " allocations, %" PRIu64 " frees, %" PRIu64
         " reallocs, %" PRIu64 " aligned, %" PRIu64 " cross-thread), %.1f GiB allocated, peak rss %.1f MiB\n",
         g_count.ops.load(), secs, g_count.allocs.load(), g_count.frees.load(), g_count.reallocs.load(),
         g_count.aligned.load(), g_count.cross.load(), static_cast<double>(g_count.bytes.load()) / (1 << 30),
         static_cast<double>(peak_rss) / (1 << 20));
  printf("soak: verification failures: %" PRIu64 "\n", g_failures.load());
  return g_failures.load() == 0 ? 0 : 1;
}
