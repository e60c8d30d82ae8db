// C allocation API: malloc, free, calloc, realloc, reallocarray, valloc, pvalloc, cfree,
// free_sized, malloc_usable_size, malloc_size and nallocx, with the semantics glibc and the C
// standard give them (alignment, zeroing, errno on failure, content preservation).
#include <gperftools/malloc_hook.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "test_util.h"

// The preload mode links no allocator: these resolve to the preloaded library's at run time.
#pragma weak MallocHook_AddNewHook
#pragma weak MallocHook_RemoveNewHook
#pragma weak MallocHook_AddDeleteHook
#pragma weak MallocHook_RemoveDeleteHook

namespace {

using tcm_test::AllBytesAre;
using tcm_test::CheckPattern;
using tcm_test::FillPattern;
using tcm_test::IsAligned;
using tcm_test::MinAlignmentFor;
using tcm_test::Opaque;

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * 1024;

// One or more sizes in every size-class region, at and around the boundaries, plus large ones
// (> 256 KiB is served by the page heap directly).
const std::vector<size_t>& Sizes() {
  static const std::vector<size_t> sizes = {
      0,         1,         2,         7,         8,          9,          15,     16,
      17,        31,        32,        33,        48,         63,         64,     65,
      100,       127,       128,       129,       255,        256,        257,    511,
      512,       513,       1000,      1023,      1024,       1025,       2048,   4095,
      4096,      4097,      8191,      8192,      8193,       10000,      16384,  32768,
      32769,     65536,     65537,     100000,    131072,     262143,     262144, 262145,
      300000,    524288,    kMiB,      kMiB + 1,  3 * kMiB,   8 * kMiB + 7};
  return sizes;
}

// Sizes no allocator can satisfy on x86-64 (the user address space is 128 TiB).
const std::vector<size_t>& ImpossibleSizes() {
  static const std::vector<size_t> sizes = {
      SIZE_MAX,
      SIZE_MAX - 1,
      SIZE_MAX - 4096,
      SIZE_MAX - 256 * kKiB,
      static_cast<size_t>(PTRDIFF_MAX) + 1,
      static_cast<size_t>(PTRDIFF_MAX),
      size_t{1} << 48,
  };
  return sizes;
}

// ---- malloc / free -------------------------------------------------------------------------

TEST(Malloc, ZeroSizeReturnsUniqueFreeablePointers) {
  std::set<void*> seen;
  std::vector<void*> blocks;
  for (int i = 0; i < 100; ++i) {
    void* p = malloc(Opaque(size_t{0}));
    ASSERT_NE(p, nullptr) << "malloc(0) must return a unique pointer (glibc behaviour)";
    EXPECT_TRUE(seen.insert(p).second) << "malloc(0) returned " << p << " twice";
    blocks.push_back(p);
  }
  for (void* p : blocks) free(p);
}

TEST(Malloc, FreeNullIsANoOp) {
  free(Opaque<void*>(nullptr));
  if (&cfree != nullptr) cfree(Opaque<void*>(nullptr));
  if (&free_sized != nullptr) free_sized(Opaque<void*>(nullptr), 0);
  if (&free_aligned_sized != nullptr) free_aligned_sized(Opaque<void*>(nullptr), 64, 0);
  __libc_free(Opaque<void*>(nullptr));
}

TEST(Malloc, ResultsAreAlignedForEverySize) {
  std::vector<void*> blocks;
  for (size_t n = 1; n <= 4096; ++n) {
    void* p = malloc(Opaque(n));
    ASSERT_NE(p, nullptr) << n;
    EXPECT_TRUE(IsAligned(p, MinAlignmentFor(n))) << "malloc(" << n << ") = " << p;
    blocks.push_back(p);
  }
  for (size_t n : Sizes()) {
    void* p = malloc(Opaque(n));
    ASSERT_NE(p, nullptr) << n;
    EXPECT_TRUE(IsAligned(p, MinAlignmentFor(n))) << "malloc(" << n << ") = " << p;
    blocks.push_back(p);
  }
  for (void* p : blocks) free(p);
}

TEST(Malloc, UsableSizeIsAtLeastRequestedAndAllOfItIsWritable) {
  for (size_t n : Sizes()) {
    // Three neighbours, each filled to its usable size with its own byte: any overlap or
    // under-reported block shows up as a foreign byte.
    void* blocks[3];
    size_t usable[3];
    for (int k = 0; k < 3; ++k) {
      blocks[k] = malloc(Opaque(n));
      ASSERT_NE(blocks[k], nullptr) << n;
      usable[k] = malloc_usable_size(blocks[k]);
      EXPECT_GE(usable[k], n);
      memset(blocks[k], 0xA0 + k, usable[k]);
    }
    for (int k = 0; k < 3; ++k) {
      EXPECT_TRUE(AllBytesAre(blocks[k], usable[k], static_cast<uint8_t>(0xA0 + k)))
          << "size " << n << ": block " << k << " was overwritten by a neighbour";
      free(blocks[k]);
    }
  }
}

TEST(Malloc, DistinctLiveBlocksDoNotOverlap) {
  struct Range {
    uintptr_t begin, end;
  };
  std::vector<Range> ranges;
  std::vector<void*> blocks;
  tcm_test::Rng rng(7);
  for (int i = 0; i < 20000; ++i) {
    const size_t n = tcm_test::SkewedSize(rng, 64 * kKiB);
    void* p = malloc(n);
    ASSERT_NE(p, nullptr);
    blocks.push_back(p);
    ranges.push_back({reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(p) + n});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i) {
    ASSERT_LE(ranges[i - 1].end, ranges[i].begin) << "two live blocks overlap";
  }
  for (void* p : blocks) free(p);
}

TEST(Malloc, ImpossibleSizesFailWithEnomem) {
  for (size_t n : ImpossibleSizes()) {
    errno = 0;
    void* p = malloc(Opaque(n));
    EXPECT_EQ(p, nullptr) << "malloc(" << n << ")";
    EXPECT_EQ(errno, ENOMEM) << "malloc(" << n << ")";
    free(p);
  }
}

TEST(Malloc, LibcAliasesWorkAndInteroperate) {
  void* a = __libc_malloc(Opaque(size_t{100}));
  ASSERT_NE(a, nullptr);
  EXPECT_GE(malloc_usable_size(a), 100u);
  free(a);  // __libc_malloc'd memory freed by free()

  void* b = malloc(Opaque(size_t{200}));
  ASSERT_NE(b, nullptr);
  __libc_free(b);  // and the other way round

  void* c = __libc_calloc(Opaque(size_t{10}), 100);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(AllBytesAre(c, 1000, 0));
  FillPattern(c, 1000, 1);
  void* d = __libc_realloc(c, Opaque(size_t{100000}));
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(CheckPattern(d, 1000, 1));
  __libc_free(d);

  void* e = __libc_memalign(Opaque(size_t{4096}), 100);
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(IsAligned(e, 4096));
  free(e);

  void* f = __libc_valloc(Opaque(size_t{100}));
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(IsAligned(f, tcm_test::PageSize()));
  free(f);

  void* g = __libc_pvalloc(Opaque(size_t{100}));
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(IsAligned(g, tcm_test::PageSize()));
  EXPECT_GE(malloc_usable_size(g), tcm_test::PageSize());
  __libc_free(g);

  errno = 0;
  EXPECT_EQ(__libc_malloc(Opaque(SIZE_MAX)), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(__libc_calloc(Opaque(SIZE_MAX / 2), 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

// ---- calloc ----------------------------------------------------------------------------------

TEST(Calloc, ReturnsZeroedMemory) {
  for (size_t n : Sizes()) {
    void* p = calloc(Opaque(n), 1);
    ASSERT_NE(p, nullptr) << n;
    EXPECT_TRUE(AllBytesAre(p, n, 0)) << "calloc(" << n << ", 1) not zeroed";
    EXPECT_TRUE(IsAligned(p, MinAlignmentFor(n)));
    free(p);
    void* q = calloc(1, Opaque(n));
    ASSERT_NE(q, nullptr) << n;
    EXPECT_TRUE(AllBytesAre(q, n, 0)) << "calloc(1, " << n << ") not zeroed";
    free(q);
  }
}

TEST(Calloc, ZeroesReusedMemory) {
  // A freed block is dirty; calloc must not assume that recycled memory (or a recycled page-heap
  // span) is still zero.
  for (size_t n : Sizes()) {
    if (n == 0) continue;
    for (int round = 0; round < 3; ++round) {
      void* p = malloc(Opaque(n));
      ASSERT_NE(p, nullptr);
      memset(p, 0xff, malloc_usable_size(p));
      free(p);
      void* q = calloc(1, Opaque(n));
      ASSERT_NE(q, nullptr);
      EXPECT_TRUE(AllBytesAre(q, n, 0)) << "calloc(1, " << n << ") after free of dirty block";
      memset(q, 0xff, n);
      free(q);
      void* r = (n % 8 == 0) ? calloc(Opaque(n / 8), 8) : calloc(Opaque(n), 1);
      ASSERT_NE(r, nullptr);
      EXPECT_TRUE(AllBytesAre(r, n, 0)) << "calloc of " << n << " bytes after free of dirty block";
      free(r);
    }
  }
  // Many dirty blocks of one class, then as many callocs.
  std::vector<void*> blocks;
  for (int i = 0; i < 2000; ++i) {
    void* p = malloc(Opaque(size_t{64}));
    ASSERT_NE(p, nullptr);
    memset(p, 0xff, 64);
    blocks.push_back(p);
  }
  for (void* p : blocks) free(p);
  blocks.clear();
  for (int i = 0; i < 2000; ++i) {
    void* p = calloc(Opaque(size_t{4}), 16);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(AllBytesAre(p, 64, 0));
    blocks.push_back(p);
  }
  for (void* p : blocks) free(p);
}

TEST(Calloc, OverflowFailsWithEnomem) {
  const struct {
    size_t nmemb, size;
  } cases[] = {
      {SIZE_MAX, 2},
      {2, SIZE_MAX},
      {SIZE_MAX / 2 + 1, 2},
      {size_t{1} << 32, size_t{1} << 32},
      {SIZE_MAX, SIZE_MAX},
      {65537, SIZE_MAX / 65536},
      {size_t{1} << 63, 2},
  };
  for (const auto& c : cases) {
    errno = 0;
    void* p = calloc(Opaque(c.nmemb), Opaque(c.size));
    EXPECT_EQ(p, nullptr) << "calloc(" << c.nmemb << ", " << c.size << ")";
    EXPECT_EQ(errno, ENOMEM) << "calloc(" << c.nmemb << ", " << c.size << ") must set ENOMEM";
    free(p);
  }
}

TEST(Calloc, ImpossibleSizesWithoutOverflowFailWithEnomem) {
  const struct {
    size_t nmemb, size;
  } cases[] = {{1, SIZE_MAX}, {SIZE_MAX, 1}, {size_t{1} << 24, size_t{1} << 24}};
  for (const auto& c : cases) {
    errno = 0;
    void* p = calloc(Opaque(c.nmemb), Opaque(c.size));
    EXPECT_EQ(p, nullptr) << "calloc(" << c.nmemb << ", " << c.size << ")";
    EXPECT_EQ(errno, ENOMEM) << "calloc(" << c.nmemb << ", " << c.size << ")";
    free(p);
  }
}

TEST(Calloc, ZeroCountOrSizeReturnsFreeablePointer) {
  void* a = calloc(Opaque(size_t{0}), 8);
  void* b = calloc(8, Opaque(size_t{0}));
  void* c = calloc(Opaque(size_t{0}), 0);
  // glibc (and gperftools) return unique pointers here, like malloc(0).
  EXPECT_NE(a, nullptr);
  EXPECT_NE(b, nullptr);
  EXPECT_NE(c, nullptr);
  free(a);
  free(b);
  free(c);
}

// ---- realloc / reallocarray ------------------------------------------------------------------

TEST(Realloc, NullPointerActsAsMalloc) {
  for (size_t n : Sizes()) {
    void* p = realloc(nullptr, Opaque(n));
    ASSERT_NE(p, nullptr) << n;
    EXPECT_GE(malloc_usable_size(p), n);
    EXPECT_TRUE(IsAligned(p, MinAlignmentFor(n)));
    memset(p, 0x5a, n);
    free(p);
  }
}

TEST(Realloc, GrowthAndShrinkPreserveContents) {
  // One block walked up through every size-class region into large sizes and back down.
  std::vector<size_t> steps;
  for (size_t n : Sizes()) {
    if (n != 0) steps.push_back(n);
  }
  size_t size = 1;
  void* p = malloc(size);
  ASSERT_NE(p, nullptr);
  FillPattern(p, size, 42);
  auto walk = [&](size_t next) {
    void* q = realloc(p, Opaque(next));
    ASSERT_NE(q, nullptr) << size << " -> " << next;
    const size_t kept = std::min(size, next);
    const size_t bad = tcm_test::FindPatternMismatch(q, kept, 42);
    ASSERT_EQ(bad, kept) << "realloc " << size << " -> " << next << " lost byte " << bad;
    EXPECT_GE(malloc_usable_size(q), next);
    EXPECT_TRUE(IsAligned(q, MinAlignmentFor(next)));
    FillPattern(q, next, 42);  // same seed: the pattern of every prefix stays valid
    p = q;
    size = next;
  };
  for (size_t next : steps) walk(next);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) walk(*it);
  free(p);
}

TEST(Realloc, EveryPairOfSizesPreservesTheCommonPrefix) {
  const size_t sizes[] = {1,     8,      15,     16,     17,     100,      128,      257,
                          1000,  4096,   8193,   32768,  65537,  100000,   262144,   262145,
                          300000, kMiB,  3 * kMiB};
  uint32_t seed = 1;
  for (size_t from : sizes) {
    for (size_t to : sizes) {
      void* p = malloc(Opaque(from));
      ASSERT_NE(p, nullptr);
      FillPattern(p, from, seed);
      void* q = realloc(p, Opaque(to));
      ASSERT_NE(q, nullptr) << from << " -> " << to;
      EXPECT_TRUE(CheckPattern(q, std::min(from, to), seed)) << from << " -> " << to;
      memset(q, 0x11, to);
      free(q);
      ++seed;
    }
  }
}

TEST(Realloc, WithinUsableSizeKeepsContents) {
  for (size_t n : Sizes()) {
    if (n == 0) continue;
    void* p = malloc(Opaque(n));
    ASSERT_NE(p, nullptr);
    const size_t usable = malloc_usable_size(p);
    FillPattern(p, usable, 3);
    void* q = realloc(p, Opaque(usable));
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(CheckPattern(q, usable, 3)) << n;
    void* r = realloc(q, Opaque(n));  // same size as the original request
    ASSERT_NE(r, nullptr);
    EXPECT_TRUE(CheckPattern(r, n, 3)) << n;
    free(r);
  }
}

// A large block shrunk, grown back, grown in small steps and moved: after every call the
// block holds the request and its contents. realloc answers a large block that still fits
// from the length it recorded for it (PageMap::SetLargeLength); a length left from before a
// shrink would return the shrunk block for the bigger request.
TEST(Realloc, LargeBlockHoldsEveryRequestAcrossResizes) {
  char* p = static_cast<char*>(malloc(Opaque(kMiB)));
  ASSERT_NE(p, nullptr);
  FillPattern(p, kMiB, 4);
  p = static_cast<char*>(realloc(p, Opaque(300 * kKiB)));  // less than half: gives back the tail
  ASSERT_NE(p, nullptr);
  EXPECT_LT(malloc_usable_size(p), kMiB / 2) << "the tail was not given back";
  EXPECT_TRUE(CheckPattern(p, 300 * kKiB, 4));
  // Something may take the tail's pages now.
  void* neighbour = malloc(Opaque(512 * kKiB));
  ASSERT_NE(neighbour, nullptr);
  for (size_t size = 300 * kKiB + 64; size <= 3 * kMiB; size += 8 * kKiB + 64) {
    char* q = static_cast<char*>(realloc(p, Opaque(size)));
    ASSERT_NE(q, nullptr);
    ASSERT_GE(malloc_usable_size(q), size) << "realloc to " << size << " returned a smaller block";
    ASSERT_TRUE(CheckPattern(q, 300 * kKiB, 4)) << size;
    memset(q + size - 64, 0x5a, 64);  // the block really holds the request
    p = q;
  }
  free(neighbour);
  free(p);
}

TEST(Realloc, FailureLeavesTheOriginalBlockIntact) {
  for (size_t n : {size_t{100}, size_t{5000}, size_t{300000}, 2 * kMiB}) {
    void* p = malloc(Opaque(n));
    ASSERT_NE(p, nullptr);
    FillPattern(p, n, 9);
    for (size_t huge : ImpossibleSizes()) {
      errno = 0;
      void* q = realloc(Opaque(p), Opaque(huge));
      EXPECT_EQ(q, nullptr) << "realloc(" << n << " -> " << huge << ")";
      EXPECT_EQ(errno, ENOMEM) << "realloc(" << n << " -> " << huge << ")";
      if (q != nullptr) {
        p = q;  // keep the test memory-safe if the allocator misbehaves
        break;
      }
      EXPECT_TRUE(CheckPattern(p, n, 9)) << "failed realloc damaged the original block";
    }
    free(p);
  }
}

TEST(Realloc, ZeroSizeFreesOrReturnsAFreeablePointer) {
  for (size_t n : {size_t{10}, size_t{100000}, kMiB}) {
    void* p = malloc(Opaque(n));
    ASSERT_NE(p, nullptr);
    void* q = realloc(p, Opaque(size_t{0}));  // glibc frees and returns NULL; C23 leaves it open
    free(q);
  }
}

// An in-place realloc is reported to hooks as the old block freed and one of the new size
// allocated at the same address (what the heap profiler counts). realloc reads a small
// block's class first, as free() does; that path must step aside while hooks are installed.
const void* g_hook_new_ptr;
size_t g_hook_new_size;
const void* g_hook_deleted_ptr;
void RecordNew(const void* p, size_t size) {
  g_hook_new_ptr = p;
  g_hook_new_size = size;
}
void RecordDelete(const void* p) { g_hook_deleted_ptr = p; }

TEST(Realloc, InPlaceResizeIsReportedToHooks) {
  ASSERT_NE(&MallocHook_AddNewHook, nullptr) << "the allocator's hook API is not linked";
  void* p = malloc(Opaque(size_t{40}));  // the 48-byte class: 48 fits where it is
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(MallocHook::AddNewHook(&RecordNew));
  ASSERT_TRUE(MallocHook::AddDeleteHook(&RecordDelete));
  g_hook_new_ptr = g_hook_deleted_ptr = nullptr;
  void* q = realloc(p, Opaque(size_t{48}));
  ASSERT_TRUE(MallocHook::RemoveDeleteHook(&RecordDelete));
  ASSERT_TRUE(MallocHook::RemoveNewHook(&RecordNew));
  EXPECT_EQ(q, p) << "48 bytes fit the block of a 40-byte request";
  EXPECT_EQ(g_hook_deleted_ptr, p);
  EXPECT_EQ(g_hook_new_ptr, q);
  EXPECT_EQ(g_hook_new_size, 48u);
  free(q);
}

TEST(Reallocarray, BehavesLikeCheckedRealloc) {
  void* p = reallocarray(nullptr, Opaque(size_t{10}), 10);
  ASSERT_NE(p, nullptr);
  EXPECT_GE(malloc_usable_size(p), 100u);
  FillPattern(p, 100, 5);
  void* q = reallocarray(p, Opaque(size_t{1000}), 1000);  // 1 MB, into the page heap
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(CheckPattern(q, 100, 5));
  FillPattern(q, 1000 * 1000, 6);
  const struct {
    size_t nmemb, size;
  } overflows[] = {{SIZE_MAX, 2}, {size_t{1} << 32, size_t{1} << 32}, {2, SIZE_MAX / 2 + 1}};
  for (const auto& c : overflows) {
    errno = 0;
    void* r = reallocarray(Opaque(q), Opaque(c.nmemb), Opaque(c.size));
    EXPECT_EQ(r, nullptr) << c.nmemb << " x " << c.size;
    EXPECT_EQ(errno, ENOMEM) << c.nmemb << " x " << c.size;
    if (r != nullptr) {
      q = r;
      break;
    }
    EXPECT_TRUE(CheckPattern(q, 1000 * 1000, 6)) << "failed reallocarray damaged the block";
  }
  void* s = reallocarray(q, Opaque(size_t{7}), 3);  // shrink
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(CheckPattern(s, 21, 6));
  free(s);
  errno = 0;
  EXPECT_EQ(reallocarray(nullptr, Opaque(SIZE_MAX), 2), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

// ---- valloc / pvalloc ------------------------------------------------------------------------

TEST(Valloc, ReturnsPageAlignedBlocks) {
  const size_t page = tcm_test::PageSize();
  for (size_t n : {size_t{0}, size_t{1}, size_t{100}, page - 1, page, page + 1, 3 * page,
                   300 * kKiB, kMiB}) {
    void* p = valloc(Opaque(n));
    ASSERT_NE(p, nullptr) << n;
    EXPECT_TRUE(IsAligned(p, page)) << "valloc(" << n << ") = " << p;
    EXPECT_GE(malloc_usable_size(p), n);
    memset(p, 0x33, n);
    free(p);
  }
  for (size_t n : ImpossibleSizes()) {
    errno = 0;
    void* p = valloc(Opaque(n));
    EXPECT_EQ(p, nullptr) << "valloc(" << n << ")";
    EXPECT_EQ(errno, ENOMEM) << "valloc(" << n << ")";
    free(p);
  }
}

TEST(Pvalloc, RoundsUpToWholePages) {
  const size_t page = tcm_test::PageSize();
  for (size_t n : {size_t{0}, size_t{1}, size_t{100}, page - 1, page, page + 1, 3 * page + 5,
                   300 * kKiB, kMiB + 1}) {
    void* p = pvalloc(Opaque(n));
    ASSERT_NE(p, nullptr) << n;
    EXPECT_TRUE(IsAligned(p, page)) << "pvalloc(" << n << ") = " << p;
    const size_t rounded = n == 0 ? page : (n + page - 1) / page * page;
    EXPECT_GE(malloc_usable_size(p), rounded) << "pvalloc(" << n << ")";
    memset(p, 0x44, rounded);  // the whole rounded size belongs to the caller
    free(p);
  }
  // Rounding these up to a page overflows size_t: the allocator must not wrap around to a tiny
  // block.
  for (size_t n : {SIZE_MAX, SIZE_MAX - page + 2, SIZE_MAX - 2 * page,
                   static_cast<size_t>(PTRDIFF_MAX) + 1}) {
    errno = 0;
    void* p = pvalloc(Opaque(n));
    EXPECT_EQ(p, nullptr) << "pvalloc(" << n << ")";
    EXPECT_EQ(errno, ENOMEM) << "pvalloc(" << n << ")";
    free(p);
  }
}

// ---- cfree, free_sized, usable size, nallocx ------------------------------------------------

TEST(Cfree, FreesMallocMemory) {
  ASSERT_NE(&cfree, nullptr) << "cfree is not exported";
  for (size_t n : {size_t{0}, size_t{10}, size_t{5000}, kMiB}) {
    void* p = malloc(Opaque(n));
    ASSERT_NE(p, nullptr);
    cfree(p);
  }
}

TEST(FreeSized, AcceptsTheRequestedSize) {
  ASSERT_NE(&free_sized, nullptr) << "free_sized (C23) is not exported";
  for (size_t n : Sizes()) {
    void* p = malloc(Opaque(n));
    ASSERT_NE(p, nullptr);
    memset(p, 1, n);
    free_sized(p, n);
    void* q = calloc(Opaque(n), 1);
    ASSERT_NE(q, nullptr);
    free_sized(q, n);
    void* r = malloc(Opaque(n / 2 + 1));
    ASSERT_NE(r, nullptr);
    void* s = realloc(r, Opaque(n + 1));
    ASSERT_NE(s, nullptr);
    free_sized(s, n + 1);
  }
}

TEST(FreeAlignedSized, AcceptsAlignedAllocBlocks) {
  ASSERT_NE(&free_aligned_sized, nullptr) << "free_aligned_sized (C23) is not exported";
  for (size_t align = 1; align <= kMiB; align <<= 1) {
    for (size_t n : {align, 3 * align, size_t{100}}) {
      void* p = aligned_alloc(Opaque(align), n);
      ASSERT_NE(p, nullptr) << align << " " << n;
      EXPECT_TRUE(IsAligned(p, align));
      memset(p, 2, n);
      free_aligned_sized(p, align, n);
    }
  }
}

TEST(UsableSize, NullIsZeroAndAllSpellingsAgree) {
  EXPECT_EQ(malloc_usable_size(Opaque<void*>(nullptr)), 0u);
  if (&malloc_size != nullptr) {
    EXPECT_EQ(malloc_size(Opaque<void*>(nullptr)), 0u);
  }
  if (&tc_malloc_size != nullptr) {
    EXPECT_EQ(tc_malloc_size(Opaque<void*>(nullptr)), 0u);
  }
  ASSERT_NE(&malloc_size, nullptr) << "malloc_size is not exported";
  for (size_t n : Sizes()) {
    void* p = malloc(Opaque(n));
    ASSERT_NE(p, nullptr);
    const size_t usable = malloc_usable_size(p);
    EXPECT_GE(usable, n);
    EXPECT_EQ(malloc_size(p), usable) << n;
    EXPECT_EQ(tc_malloc_size(p), usable) << n;
    free(p);
  }
}

TEST(Nallocx, MatchesTheUsableSizeOfMalloc) {
  ASSERT_NE(&nallocx, nullptr) << "nallocx is not exported";
  std::vector<size_t> sizes;
  for (size_t n = 0; n <= 10000; ++n) sizes.push_back(n);
  for (size_t n = 10001; n <= 2 * kMiB; n += 4099) sizes.push_back(n);
  for (size_t n : Sizes()) sizes.push_back(n);
  for (size_t n : sizes) {
    const size_t predicted = nallocx(n, 0);
    void* p = malloc(Opaque(n));
    ASSERT_NE(p, nullptr);
    const size_t usable = malloc_usable_size(p);
    free(p);
    ASSERT_EQ(predicted, usable) << "nallocx(" << n << ", 0) disagrees with malloc";
    ASSERT_GE(predicted, n);
    if (&tc_nallocx != nullptr) {
      ASSERT_EQ(tc_nallocx(n, 0), predicted) << n;
    }
  }
}

TEST(Nallocx, WithAlignmentFlagIsLargeEnough) {
  ASSERT_NE(&nallocx, nullptr) << "nallocx is not exported";
  for (int lg = 0; lg <= 16; ++lg) {
    const size_t align = size_t{1} << lg;
    for (size_t n : {size_t{1}, size_t{17}, align, align + 1, 3 * align, size_t{100000}}) {
      const size_t predicted = nallocx(n, MALLOCX_LG_ALIGN(lg));
      EXPECT_GE(predicted, n) << "nallocx(" << n << ", LG_ALIGN(" << lg << "))";
      void* p = memalign(align, n);
      ASSERT_NE(p, nullptr);
      EXPECT_GE(malloc_usable_size(p), n);
      free(p);
    }
  }
}

}  // namespace
