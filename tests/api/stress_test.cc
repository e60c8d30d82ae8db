// Multithreaded stress test. N threads (default 4) perform allocation calls on random sizes from
// 1 B to 1 MiB, skewed towards small sizes like real programs: malloc, calloc, realloc, memalign,
// posix_memalign, aligned_alloc and operator new in its plain, array and aligned forms. Every
// block gets a fill pattern derived from a per-block seed; the pattern is verified before the
// block is freed or reallocated. A tenth of the blocks are handed to another thread through a
// lock-protected mailbox and freed there (cross-thread frees).
//
// Counts one operation per allocation, free or realloc call; runs until the requested total
// (default 10^7) is reached. Exits 0 on success, 1 on any verification failure (first mismatch
// reported) or allocation failure. No timing assertions; the rate is printed for information.
//
// Usage: api_stress_test [--ops=N] [--threads=N] [--seed=N]
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace {

enum class Kind : uint8_t {
  kMalloc,         // malloc / realloc result; freed with free or free_sized
  kCalloc,         // calloc; verified zero first
  kMemalign,       // memalign / posix_memalign / aligned_alloc; freed with free
  kAlignedAlloc,   // aligned_alloc; freed with free_aligned_sized when available
  kNew,            // operator new; freed with sized operator delete
  kNewArray,       // operator new[]; freed with operator delete[]
  kNewAligned,     // operator new(align_val_t); freed with sized aligned delete
};

struct Block {
  void* p = nullptr;
  size_t size = 0;
  size_t align = 0;  // requested alignment (0 = default)
  uint32_t seed = 0;
  Kind kind = Kind::kMalloc;
};

// Blocks up to kFullCheck bytes are patterned entirely. Bigger ones get their first and last
// kEdge bytes plus 8 bytes in every 4 KiB page: enough to catch overlap and double hand-out
// without making large blocks dominate the run time.
constexpr size_t kFullCheck = 4096;
constexpr size_t kEdge = 1024;
constexpr size_t kStride = 4096;

uint64_t PatternWord(uint32_t seed, size_t word) {
  return ((static_cast<uint64_t>(seed) << 32) | seed) ^ (word * 0x9E3779B97F4A7C15ull);
}

uint8_t PatternByteAt(uint32_t seed, size_t offset) {
  return static_cast<uint8_t>(PatternWord(seed, offset / 8) >> (8 * (offset % 8)));
}

// Calls f(begin, end) for each patterned byte range of a block of `size` bytes.
template <typename F>
void ForEachRegion(size_t size, F f) {
  if (size <= kFullCheck) {
    f(size_t{0}, size);
    return;
  }
  f(size_t{0}, kEdge);
  for (size_t off = kStride; off + 8 <= size - kEdge; off += kStride) f(off, off + 8);
  f(size - kEdge, size);
}

void FillRange(uint8_t* p, uint32_t seed, size_t begin, size_t end) {
  size_t i = begin;
  for (; i < end && i % 8 != 0; ++i) p[i] = PatternByteAt(seed, i);
  for (; i + 8 <= end; i += 8) {
    const uint64_t w = PatternWord(seed, i / 8);
    memcpy(p + i, &w, 8);
  }
  for (; i < end; ++i) p[i] = PatternByteAt(seed, i);
}

// Returns the offset of the first wrong byte in [begin, end), or SIZE_MAX.
size_t CheckRange(const uint8_t* p, uint32_t seed, size_t begin, size_t end) {
  size_t i = begin;
  for (; i < end && i % 8 != 0; ++i) {
    if (p[i] != PatternByteAt(seed, i)) return i;
  }
  for (; i + 8 <= end; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    if (w != PatternWord(seed, i / 8)) {
      for (size_t k = i; k < i + 8; ++k) {
        if (p[k] != PatternByteAt(seed, k)) return k;
      }
    }
  }
  for (; i < end; ++i) {
    if (p[i] != PatternByteAt(seed, i)) return i;
  }
  return SIZE_MAX;
}

void Fill(const Block& b) {
  uint8_t* p = static_cast<uint8_t*>(b.p);
  ForEachRegion(b.size, [&](size_t begin, size_t end) { FillRange(p, b.seed, begin, end); });
}

std::atomic<bool> g_failed{false};
std::mutex g_report_mu;

void ReportFailure(const char* what, const Block& b, size_t offset) {
  g_failed = true;
  std::lock_guard<std::mutex> lock(g_report_mu);
  fprintf(stderr,
          "STRESS FAILURE: %s: block %p size %zu align %zu kind %d seed %u, offset %zu\n", what,
          b.p, b.size, b.align, static_cast<int>(b.kind), b.seed, offset);
}

// Verifies the pattern of `b` over its first `limit` bytes (the patterned ones among them).
bool Verify(const Block& b, size_t limit) {
  const uint8_t* p = static_cast<const uint8_t*>(b.p);
  size_t bad = SIZE_MAX;
  ForEachRegion(b.size, [&](size_t begin, size_t end) {
    if (bad != SIZE_MAX) return;
    if (end > limit) end = limit;
    if (begin < end) bad = CheckRange(p, b.seed, begin, end);
  });
  if (bad != SIZE_MAX) {
    ReportFailure("pattern mismatch (memory corrupted or handed out twice)", b, bad);
    return false;
  }
  return true;
}

struct Mailbox {
  std::mutex mu;
  std::vector<Block> items;
};

struct Shared {
  std::vector<Mailbox> mailboxes;
  uint64_t ops_per_thread = 0;
  uint64_t seed = 1;
};

class Worker {
 public:
  Worker(Shared* shared, int id)
      : shared_(shared), id_(id), rng_(shared->seed * 1000003 + static_cast<uint64_t>(id)),
        slots_(kSlots) {}

  void Run(std::barrier<>* done_sending) {
    while (ops_ < shared_->ops_per_thread && !g_failed.load(std::memory_order_relaxed)) {
      Step();
      if ((++steps_ & 63) == 0) DrainMailbox();
    }
    // Nobody sends after the barrier, so the final drain sees every block meant for us.
    done_sending->arrive_and_wait();
    DrainMailbox();
    for (Block& b : slots_) {
      if (b.p != nullptr) Release(b);
    }
  }

  uint64_t ops() const { return ops_; }

 private:
  static constexpr size_t kSlots = 2048;

  void Step() {
    Block& slot = slots_[rng_.Below(kSlots)];
    if (slot.p == nullptr) {
      Allocate(&slot);
      return;
    }
    const uint64_t r = rng_.Below(100);
    if (r < 8 && IsReallocatable(slot.kind)) {
      Reallocate(&slot);
    } else if (r < 18 && shared_->mailboxes.size() > 1) {
      Send(slot);
      slot = Block();
    } else {
      Release(slot);
      slot = Block();
    }
  }

  static bool IsReallocatable(Kind k) {
    return k == Kind::kMalloc || k == Kind::kCalloc || k == Kind::kMemalign;
  }

  size_t RandomAlign() { return size_t{16} << rng_.Below(9); }  // 16 .. 4096

  void Allocate(Block* b) {
    b->size = tcm_test::SkewedSize(rng_);
    b->seed = static_cast<uint32_t>(rng_.Next());
    b->align = 0;
    const uint64_t r = rng_.Below(100);
    if (r < 62) {
      b->kind = Kind::kMalloc;
      b->p = malloc(b->size);
    } else if (r < 67) {
      b->kind = Kind::kCalloc;
      b->p = calloc(1, b->size);
    } else if (r < 72) {
      b->kind = Kind::kMemalign;
      b->align = RandomAlign();
      b->p = memalign(b->align, b->size);
    } else if (r < 75) {
      b->kind = Kind::kMemalign;
      b->align = RandomAlign();
      if (posix_memalign(&b->p, b->align, b->size) != 0) b->p = nullptr;
    } else if (r < 78) {
      b->kind = Kind::kAlignedAlloc;
      b->align = RandomAlign();
      b->p = aligned_alloc(b->align, b->size);
    } else if (r < 92) {
      b->kind = Kind::kNew;
      b->p = ::operator new(b->size);
    } else if (r < 96) {
      b->kind = Kind::kNewArray;
      b->p = ::operator new[](b->size);
    } else {
      b->kind = Kind::kNewAligned;
      b->align = RandomAlign();
      b->p = ::operator new(b->size, std::align_val_t{b->align});
    }
    ++ops_;
    if (b->p == nullptr) {
      ReportFailure("allocation returned NULL", *b, 0);
      return;
    }
    const size_t need_align = b->align != 0 ? b->align : tcm_test::MinAlignmentFor(b->size);
    if (!tcm_test::IsAligned(b->p, need_align)) ReportFailure("misaligned block", *b, 0);
    if (malloc_usable_size(b->p) < b->size) ReportFailure("usable size < requested", *b, 0);
    if (b->kind == Kind::kCalloc) {
      const uint8_t* p = static_cast<const uint8_t*>(b->p);
      ForEachRegion(b->size, [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) {
          if (p[i] != 0) {
            ReportFailure("calloc returned non-zero memory", *b, i);
            return;
          }
        }
      });
    }
    Fill(*b);
  }

  void Reallocate(Block* b) {
    if (!Verify(*b, b->size)) return;
    const size_t old_size = b->size;
    const uint64_t r = rng_.Below(3);
    size_t new_size;
    if (r == 0) {
      new_size = old_size + 1 + rng_.Below(old_size + 16);  // grow
    } else if (r == 1) {
      new_size = 1 + rng_.Below(old_size);  // shrink
    } else {
      new_size = tcm_test::SkewedSize(rng_);  // anywhere
    }
    if (new_size > (size_t{1} << 20)) new_size = size_t{1} << 20;
    void* q = realloc(b->p, new_size);
    ++ops_;
    if (q == nullptr) {
      ReportFailure("realloc returned NULL", *b, 0);
      return;
    }
    b->p = q;
    // The patterned bytes of the old layout that survive the resize must be unchanged.
    if (!Verify(*b, new_size < old_size ? new_size : old_size)) {
      *b = Block();  // leak it: freeing a corrupted block could crash
      return;
    }
    if (!tcm_test::IsAligned(q, tcm_test::MinAlignmentFor(new_size))) {
      ReportFailure("realloc result misaligned", *b, 0);
    }
    b->size = new_size;
    b->kind = Kind::kMalloc;
    b->align = 0;
    b->seed = static_cast<uint32_t>(rng_.Next());
    Fill(*b);
  }

  void Release(const Block& b) {
    if (!Verify(b, b.size)) return;  // leak it: freeing a corrupted block could crash
    switch (b.kind) {
      case Kind::kMalloc:
      case Kind::kCalloc:
        if ((b.seed & 1) != 0 && &free_sized != nullptr) {
          free_sized(b.p, b.size);
        } else {
          free(b.p);
        }
        break;
      case Kind::kMemalign:
        free(b.p);
        break;
      case Kind::kAlignedAlloc:
        if (&free_aligned_sized != nullptr) {
          free_aligned_sized(b.p, b.align, b.size);
        } else {
          free(b.p);
        }
        break;
      case Kind::kNew:
        ::operator delete(b.p, b.size);
        break;
      case Kind::kNewArray:
        ::operator delete[](b.p);
        break;
      case Kind::kNewAligned:
        ::operator delete(b.p, b.size, std::align_val_t{b.align});
        break;
    }
    ++ops_;
  }

  void Send(const Block& b) {
    size_t to = rng_.Below(shared_->mailboxes.size() - 1);
    if (to >= static_cast<size_t>(id_)) ++to;  // never ourselves
    Mailbox& box = shared_->mailboxes[to];
    std::lock_guard<std::mutex> lock(box.mu);
    box.items.push_back(b);
  }

  void DrainMailbox() {
    Mailbox& box = shared_->mailboxes[static_cast<size_t>(id_)];
    {
      std::lock_guard<std::mutex> lock(box.mu);
      inbox_.swap(box.items);
    }
    for (Block& b : inbox_) {
      // Some foreign blocks get reallocated here first: realloc of another thread's block.
      if (IsReallocatable(b.kind) && rng_.Below(4) == 0) Reallocate(&b);
      Release(b);
    }
    inbox_.clear();
  }

  Shared* shared_;
  int id_;
  tcm_test::Rng rng_;
  std::vector<Block> slots_;
  std::vector<Block> inbox_;
  uint64_t ops_ = 0;
  uint64_t steps_ = 0;
};

bool ParseFlag(const char* arg, const char* name, uint64_t* value) {
  const size_t len = strlen(name);
  if (strncmp(arg, name, len) != 0 || arg[len] != '=') return false;
  char* end = nullptr;
  *value = strtoull(arg + len + 1, &end, 10);
  return end != nullptr && *end == '\0';
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t total_ops = 10'000'000;
  uint64_t threads = 4;
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    if (!ParseFlag(argv[i], "--ops", &total_ops) && !ParseFlag(argv[i], "--threads", &threads) &&
        !ParseFlag(argv[i], "--seed", &seed)) {
      fprintf(stderr, "usage: %s [--ops=N] [--threads=N] [--seed=N]\n", argv[0]);
      return 2;
    }
  }
  if (threads == 0 || threads > 256) {
    fprintf(stderr, "--threads must be 1..256\n");
    return 2;
  }
  std::string why;
  if (!tcm_test::OurAllocatorIsActive(&why)) {
    fprintf(stderr, "FATAL: the allocator under test is not in use: %s\n", why.c_str());
    return 1;
  }

  Shared shared;
  shared.mailboxes = std::vector<Mailbox>(threads);
  shared.ops_per_thread = (total_ops + threads - 1) / threads;
  shared.seed = seed;
  std::vector<Worker> workers;
  workers.reserve(threads);
  for (uint64_t t = 0; t < threads; ++t) workers.emplace_back(&shared, static_cast<int>(t));
  std::barrier<> done_sending(static_cast<std::ptrdiff_t>(threads));

  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> running;
  for (Worker& w : workers) running.emplace_back([&w, &done_sending] { w.Run(&done_sending); });
  for (std::thread& t : running) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  uint64_t ops = 0;
  for (const Worker& w : workers) ops += w.ops();
  printf("stress: %llu threads, %llu operations in %.2f s (%.1f M ops/s), RSS %zu MiB: %s\n",
         static_cast<unsigned long long>(threads), static_cast<unsigned long long>(ops), seconds,
         ops / seconds / 1e6, tcm_test::ResidentBytes() >> 20, g_failed ? "FAILED" : "OK");
  if (g_failed) return 1;
  if (ops < total_ops) {
    fprintf(stderr, "only %llu of %llu operations ran\n", static_cast<unsigned long long>(ops),
            static_cast<unsigned long long>(total_ops));
    return 1;
  }
  return 0;
}
