// Fuzz target: the whole allocation API, with our allocator as the process's malloc.
//
// Linked with the static libtcmalloc_minimal.a (--whole-archive), so malloc, operator new and
// friends here — and inside libFuzzer itself — are ours. AddressSanitizer would replace
// malloc too, so this target is built with -fsanitize=fuzzer,undefined and no ASan: the checks
// below are the oracle. A byte stream drives random sequences of malloc, calloc, realloc,
// reallocarray, memalign, posix_memalign, aligned_alloc, valloc, pvalloc, every operator
// new/delete and sized/aligned frees, over a table of live blocks, checking:
//   - every block is aligned as its API promises (16 B from 16 B on, the requested alignment,
//     4 KiB for valloc/pvalloc), its usable size covers the request (and equals nallocx's
//     answer for plain malloc), and it overlaps no other live block's usable range;
//   - the fill pattern written into each block is intact when it is checked, reallocated
//     (the common prefix moves) or freed; calloc memory reads as zeros;
//   - impossible requests fail as the standards say: NULL with errno ENOMEM (calloc and
//     reallocarray overflow, huge sizes), EINVAL for bad alignments, std::bad_alloc from
//     operator new, and a failed realloc leaves the old block untouched;
//   - every 256th input MallocExtension::VerifyAllMemory() walks the heap; now and then the
//     thread gives its cache back (MarkThreadIdle) or trims (malloc_trim).
// Each input frees what it still holds, so inputs are independent apart from the cache state
// they leave behind (which is part of what is being fuzzed).
#include <malloc.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <new>

#include <gperftools/malloc_extension.h>
#include <gperftools/nallocx.h>
#include <gperftools/tcmalloc.h>

#include "fuzz_input.h"

// Impossible requests (SIZE_MAX and friends) are made on purpose; g++ sees them coming.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Walloc-size-larger-than="
#endif

extern "C" {
// Defined by our library; glibc 2.36's headers do not declare them yet.
void free_sized(void* p, size_t size) noexcept;
void free_aligned_sized(void* p, size_t align, size_t size) noexcept;
}

namespace tcm::fuzz {
namespace {

// How a block was obtained, and so how it must be released.
enum class Kind : uint8_t { kMalloc, kNew, kNewArray, kNewAligned };

struct Block {
  void* p = nullptr;
  size_t size = 0;     // requested
  size_t usable = 0;   // malloc_usable_size when obtained
  size_t align = 0;    // requested (0 = the API's default)
  uint8_t seed = 0;
  Kind kind = Kind::kMalloc;
};

constexpr int kSlots = 32;
constexpr size_t kFullFill = 1 << 20;  // blocks are filled in full up to here, sparsely above
constexpr size_t kTail = 64;

// The pattern: one 64-bit word per 8-byte offset, mixed from the offset and the block's
// seed, so a byte that moved, or came from another block, does not match.
uint64_t WordAt(size_t offset8, uint8_t seed) {
  return (offset8 + 1) * 0x9e3779b97f4a7c15ULL ^ (seed * 0x0101010101010101ULL);
}
uint8_t PatternAt(size_t offset, uint8_t seed) {
  return static_cast<uint8_t>(WordAt(offset & ~size_t{7}, seed) >> (8 * (offset & 7)));
}

// Calls f(begin, end) for the byte ranges of a `size`-byte block that carry the pattern:
// everything below kFullFill, then 8 bytes at each 4 KiB boundary, and the last kTail bytes
// (overruns into the next block show up there).
template <typename F>
FUZZ_NO_COVERAGE void ForFilledRanges(size_t size, F f) {
  f(size_t{0}, size < kFullFill ? size : kFullFill);
  for (size_t o = kFullFill; o < size; o += 4096) f(o, o + 8 < size ? o + 8 : size);
  f(size > kTail ? size - kTail : 0, size);
}

// Blocks are at least 8-byte aligned (checked when obtained), so whole words can be used.
FUZZ_NO_COVERAGE void Fill(void* p, size_t size, uint8_t seed) {
  auto* b = static_cast<uint8_t*>(p);
  ForFilledRanges(size, [&](size_t lo, size_t hi) FUZZ_NO_COVERAGE {
    size_t o = lo;
    for (; o < hi && (o & 7) != 0; ++o) b[o] = PatternAt(o, seed);
    for (; o + 8 <= hi; o += 8) *reinterpret_cast<uint64_t*>(b + o) = WordAt(o, seed);
    for (; o < hi; ++o) b[o] = PatternAt(o, seed);
  });
}

// Checks the pattern of a block filled for `filled` bytes, over its first `limit` bytes.
FUZZ_NO_COVERAGE bool Intact(const void* p, size_t filled, size_t limit, uint8_t seed) {
  const auto* b = static_cast<const uint8_t*>(p);
  bool ok = true;
  ForFilledRanges(filled, [&](size_t lo, size_t hi) FUZZ_NO_COVERAGE {
    if (hi > limit) hi = limit;
    size_t o = lo;
    for (; o < hi && (o & 7) != 0; ++o) ok &= b[o] == PatternAt(o, seed);
    uint64_t diff = 0;
    for (; o + 8 <= hi; o += 8) diff |= *reinterpret_cast<const uint64_t*>(b + o) ^ WordAt(o, seed);
    ok &= diff == 0;
    for (; o < hi; ++o) ok &= b[o] == PatternAt(o, seed);
  });
  return ok;
}

FUZZ_NO_COVERAGE bool Zeroed(const void* p, size_t size) {
  const auto* b = static_cast<const uint8_t*>(p);
  bool ok = true;
  ForFilledRanges(size, [&](size_t lo, size_t hi) FUZZ_NO_COVERAGE {
    uint8_t any = 0;
    for (size_t o = lo; o < hi; ++o) any |= b[o];
    ok &= any == 0;
  });
  return ok;
}

size_t PickSize(FuzzInput& in) {
  const uint8_t k = in.Byte();
  if (k < 80) return in.Range(0, 64);
  if (k < 150) return in.Range(65, 1024);
  if (k < 200) return in.Range(1025, 32 << 10);
  if (k < 230) return in.Range((32 << 10) + 1, (256 << 10) + 16384);
  if (k < 250) return in.Range((256 << 10) + 1, 2 << 20);
  return in.Range((2 << 20) + 1, 16 << 20);
}

size_t PickAlign(FuzzInput& in) {
  const uint8_t k = in.Byte();
  if (k < 200) return size_t{1} << (k % 13);  // 1 B .. 4 KiB
  return size_t{1} << (13 + k % 10);         // 8 KiB .. 4 MiB
}

class Driver {
 public:
  ~Driver() {
    for (Block& b : slots_)
      if (b.p != nullptr) Release(b);
  }

  void Run(FuzzInput& in) {
    while (!in.empty()) {
      const uint8_t op = in.Byte();
      Block& b = slots_[in.Byte() % kSlots];
      switch (op % 16) {
        case 0:
        case 1:
        case 2:
        case 3:
        case 4: Obtain(b, in); break;
        case 5:
        case 6: Release(b); break;
        case 7:
        case 8: Realloc(b, PickSize(in), in.Byte()); break;
        case 9: ReallocArray(b, in); break;
        case 10: CheckBlock(b); break;
        case 11: CheckAll(); break;
        case 12: Impossible(in); break;
        case 13: CrossCheckUsable(b); break;
        case 14:
          if (in.Byte() < 8) MallocExtension::instance()->MarkThreadIdle();
          break;
        case 15:
          if (in.Byte() < 8) malloc_trim(0);
          break;
      }
    }
  }

 private:
  void Obtain(Block& b, FuzzInput& in) {
    if (b.p != nullptr) Release(b);
    const size_t size = PickSize(in);
    const uint8_t how = in.Byte() % 14;
    const size_t align = PickAlign(in);
    Block nb;
    nb.size = size;
    nb.seed = in.Byte();
    bool zero = false;
    switch (how) {
      case 0:
      case 1: nb.p = malloc(size); break;
      case 2: {
        // calloc(n, m) with n * m == size, split as the input says.
        const size_t n = size == 0 ? 0 : in.Range(1, size);
        const size_t m = n == 0 ? 0 : size / n;
        nb.size = n * m;
        nb.p = calloc(n, m);
        zero = true;
        break;
      }
      case 3:
        nb.p = memalign(align, size);
        nb.align = align;
        break;
      case 4: {
        const size_t a = align < sizeof(void*) ? sizeof(void*) : align;
        void* out = nullptr;
        FUZZ_CHECK(posix_memalign(&out, a, size) == 0);
        nb.p = out;
        nb.align = a;
        break;
      }
      case 5:
        nb.p = aligned_alloc(align, size);
        nb.align = align;
        break;
      case 6:
        nb.p = valloc(size);
        nb.align = 4096;
        break;
      case 7:
        nb.p = pvalloc(size);
        nb.align = 4096;
        nb.size = size == 0 ? 4096 : (size + 4095) & ~size_t{4095};  // pvalloc rounds up
        break;
      case 8:
        nb.p = ::operator new(size);
        nb.kind = Kind::kNew;
        break;
      case 9:
        nb.p = ::operator new[](size);
        nb.kind = Kind::kNewArray;
        break;
      case 10:
        nb.p = ::operator new(size, std::align_val_t{align});
        nb.align = align;
        nb.kind = Kind::kNewAligned;
        break;
      case 11:
        nb.p = ::operator new(size, std::nothrow);
        nb.kind = Kind::kNew;
        break;
      case 12: nb.p = realloc(nullptr, size); break;
      case 13: nb.p = tc_malloc(size); break;
    }
    FUZZ_CHECK(nb.p != nullptr);  // sizes here are at most 16 MiB: nothing may fail
    const auto addr = reinterpret_cast<uintptr_t>(nb.p);
    if (nb.size >= 16) FUZZ_CHECK(addr % 16 == 0);
    FUZZ_CHECK(addr % 8 == 0);
    if (nb.align != 0) FUZZ_CHECK(addr % nb.align == 0);
    nb.usable = malloc_usable_size(nb.p);
    FUZZ_CHECK(nb.usable >= nb.size);
    if (how <= 1) FUZZ_CHECK(nb.usable == nallocx(size, 0));
    if (zero) FUZZ_CHECK(Zeroed(nb.p, nb.size));
    Track(nb);
    Fill(nb.p, nb.size, nb.seed);
    b = nb;
  }

  void Release(Block& b) {
    if (b.p == nullptr) return;
    CheckBlock(b);
    Untrack(b);
    switch (b.kind) {
      case Kind::kMalloc:
        switch (b.seed % 4) {
          case 0: free(b.p); break;
          case 1: free_sized(b.p, b.size); break;
          case 2: free_aligned_sized(b.p, b.align == 0 ? 1 : b.align, b.size); break;
          default: tc_free(b.p); break;
        }
        break;
      case Kind::kNew:
        if (b.seed & 1) {
          ::operator delete(b.p, b.size);
        } else {
          ::operator delete(b.p);
        }
        break;
      case Kind::kNewArray: ::operator delete[](b.p); break;
      case Kind::kNewAligned:
        if (b.seed & 1) {
          ::operator delete(b.p, b.size, std::align_val_t{b.align});
        } else {
          ::operator delete(b.p, std::align_val_t{b.align});
        }
        break;
    }
    b = Block{};
  }

  void Realloc(Block& b, size_t size, uint8_t seed) {
    if (b.p == nullptr || b.kind != Kind::kMalloc) return;
    CheckBlock(b);
    Untrack(b);
    void* q = realloc(b.p, size);
    if (size == 0) {
      FUZZ_CHECK(q == nullptr);  // glibc's behaviour: realloc(p, 0) frees p
      b = Block{};
      return;
    }
    FUZZ_CHECK(q != nullptr);
    // The common prefix moved with the block.
    FUZZ_CHECK(Intact(q, b.size, size < b.size ? size : b.size, b.seed));
    FUZZ_CHECK(reinterpret_cast<uintptr_t>(q) % 8 == 0);
    if (size >= 16) FUZZ_CHECK(reinterpret_cast<uintptr_t>(q) % 16 == 0);
    b.p = q;
    b.size = size;
    b.align = 0;  // realloc keeps only malloc's alignment
    b.usable = malloc_usable_size(q);
    FUZZ_CHECK(b.usable >= size);
    b.seed = seed;
    Track(b);
    Fill(b.p, b.size, b.seed);
  }

  void ReallocArray(Block& b, FuzzInput& in) {
    if (b.p == nullptr || b.kind != Kind::kMalloc) return;
    // An overflowing product fails with ENOMEM and leaves the block alone.
    const size_t n = (SIZE_MAX >> in.Range(0, 8)) - in.Range(0, 7);
    const size_t m = in.Range(2, 1 << 16);
    size_t product;
    if (__builtin_mul_overflow(n, m, &product)) {
      errno = 0;
      FUZZ_CHECK(reallocarray(b.p, n, m) == nullptr);
      FUZZ_CHECK(errno == ENOMEM);
      CheckBlock(b);
      return;
    }
    Realloc(b, PickSize(in), in.Byte());
  }

  // Requests no allocator can serve: the failure must be the documented one.
  void Impossible(FuzzInput& in) {
    const size_t huge = SIZE_MAX - in.Range(0, 1 << 20);
    const size_t big = (size_t{1} << in.Range(47, 63)) + in.Range(0, 4096);
    errno = 0;
    FUZZ_CHECK(malloc(huge) == nullptr && errno == ENOMEM);
    errno = 0;
    FUZZ_CHECK(malloc(big) == nullptr && errno == ENOMEM);
    errno = 0;
    FUZZ_CHECK(calloc(huge / 2 + 2, 2) == nullptr && errno == ENOMEM);
    errno = 0;
    FUZZ_CHECK(calloc(big, big) == nullptr && errno == ENOMEM);
    // A power of two times an odd number >= 3: never a power of two.
    const size_t bad_align = (size_t{1} << in.Range(0, 20)) * (2 * in.Range(1, 3) + 1);
    void* out = reinterpret_cast<void*>(uintptr_t{0x1234});
    FUZZ_CHECK(posix_memalign(&out, bad_align, 16) == EINVAL);
    FUZZ_CHECK(posix_memalign(&out, sizeof(void*) / 2, 16) == EINVAL);
    FUZZ_CHECK(out == reinterpret_cast<void*>(uintptr_t{0x1234}));  // untouched on failure
    FUZZ_CHECK(posix_memalign(&out, 64, huge) == ENOMEM);
    errno = 0;
    FUZZ_CHECK(aligned_alloc(bad_align, 64) == nullptr && errno == EINVAL);
    // memalign with a bad alignment: EINVAL (our README), or glibc's rounding up to the next
    // power of two; either way nothing misaligned.
    errno = 0;
    if (void* m = memalign(bad_align, 64)) {
      FUZZ_CHECK(reinterpret_cast<uintptr_t>(m) % (size_t{1} << (64 - __builtin_clzll(bad_align))) == 0);
      free(m);
    } else {
      FUZZ_CHECK(errno == EINVAL);
    }
    errno = 0;
    FUZZ_CHECK(memalign(64, huge) == nullptr && errno == ENOMEM);
    FUZZ_CHECK(::operator new(huge, std::nothrow) == nullptr);
    bool threw = false;
    try {
      void* volatile p = ::operator new(big);
      (void)p;
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    FUZZ_CHECK(threw);
    // A realloc that cannot be served keeps the old block.
    for (Block& b : slots_) {
      if (b.p == nullptr || b.kind != Kind::kMalloc) continue;
      errno = 0;
      FUZZ_CHECK(realloc(b.p, huge) == nullptr && errno == ENOMEM);
      CheckBlock(b);
      break;
    }
  }

  void CrossCheckUsable(const Block& b) {
    if (b.p == nullptr) return;
    FUZZ_CHECK(malloc_usable_size(b.p) == b.usable);
    FUZZ_CHECK(tc_malloc_size(b.p) == b.usable);
    FUZZ_CHECK(MallocExtension::instance()->GetAllocatedSize(b.p) == b.usable);
    FUZZ_CHECK(MallocExtension::instance()->GetOwnership(b.p) == MallocExtension::kOwned);
  }

  void CheckBlock(const Block& b) {
    if (b.p == nullptr) return;
    FUZZ_CHECK(Intact(b.p, b.size, b.size, b.seed));
  }
  void CheckAll() {
    for (const Block& b : slots_) CheckBlock(b);
  }

  // Live usable ranges never overlap.
  void Track(const Block& b) {
    const auto lo = reinterpret_cast<uintptr_t>(b.p);
    const uintptr_t hi = lo + (b.usable == 0 ? 1 : b.usable);
    auto next = ranges_.lower_bound(lo);
    FUZZ_CHECK(next == ranges_.end() || next->first >= hi);
    if (next != ranges_.begin()) FUZZ_CHECK(std::prev(next)->second <= lo);
    ranges_[lo] = hi;
  }
  void Untrack(const Block& b) {
    FUZZ_CHECK(ranges_.erase(reinterpret_cast<uintptr_t>(b.p)) == 1);
  }

  Block slots_[kSlots];
  std::map<uintptr_t, uintptr_t> ranges_;
};

}  // namespace
}  // namespace tcm::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tcm::fuzz::FuzzInput in(data, size);
  {
    tcm::fuzz::Driver d;
    d.Run(in);
  }
  // A whole-heap walk takes milliseconds: every 256th input, whatever it was (so libFuzzer
  // does not learn to call it from every input).
  static unsigned inputs = 0;
  if (++inputs % 256 == 0) FUZZ_CHECK(MallocExtension::instance()->VerifyAllMemory());
  return 0;
}
