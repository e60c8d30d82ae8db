// The gperftools entry points of include/gperftools/tcmalloc.h (tc_*), the libc names and
// glibc's __libc_* aliases all resolving to the allocator, the new-mode switch, and the
// statistics calls: mallinfo, mallinfo2, malloc_stats, malloc_trim, mallopt.
#include <gtest/gtest.h>

#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

using tcm_test::AllBytesAre;
using tcm_test::CheckPattern;
using tcm_test::DefinedByAllocator;
using tcm_test::FillPattern;
using tcm_test::FnAddr;
using tcm_test::IsAligned;
using tcm_test::Opaque;

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * 1024;
constexpr size_t kTooBig = size_t{1} << 50;

struct Entry {
  const char* name;
  const void* addr;
};

#define TCM_ENTRY(fn) Entry{#fn, FnAddr(&fn)}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // mallinfo: deprecated, still tested
const void* MallinfoAddress() { return FnAddr(&mallinfo); }
struct mallinfo CallMallinfo() { return mallinfo(); }
#pragma GCC diagnostic pop

TEST(TcApi, EveryEntryPointOfTheHeaderResolvesToTheAllocator) {
  const Entry entries[] = {
      TCM_ENTRY(tc_version),
      TCM_ENTRY(tc_malloc),
      TCM_ENTRY(tc_malloc_skip_new_handler),
      TCM_ENTRY(tc_free),
      TCM_ENTRY(tc_free_sized),
      TCM_ENTRY(tc_free_aligned_sized),
      TCM_ENTRY(tc_realloc),
      TCM_ENTRY(tc_calloc),
      TCM_ENTRY(tc_cfree),
      TCM_ENTRY(tc_memalign),
      TCM_ENTRY(tc_posix_memalign),
      TCM_ENTRY(tc_valloc),
      TCM_ENTRY(tc_pvalloc),
      TCM_ENTRY(tc_malloc_stats),
      TCM_ENTRY(tc_mallopt),
      TCM_ENTRY(tc_mallinfo),
      TCM_ENTRY(tc_mallinfo2),
      TCM_ENTRY(tc_malloc_size),
      TCM_ENTRY(tc_set_new_mode),
      TCM_ENTRY(tc_query_new_mode),
      TCM_ENTRY(tc_nallocx),
      TCM_ENTRY(tc_new),
      TCM_ENTRY(tc_new_nothrow),
      TCM_ENTRY(tc_delete),
      TCM_ENTRY(tc_delete_sized),
      TCM_ENTRY(tc_delete_nothrow),
      TCM_ENTRY(tc_newarray),
      TCM_ENTRY(tc_newarray_nothrow),
      TCM_ENTRY(tc_deletearray),
      TCM_ENTRY(tc_deletearray_sized),
      TCM_ENTRY(tc_deletearray_nothrow),
      TCM_ENTRY(tc_new_aligned),
      TCM_ENTRY(tc_new_aligned_nothrow),
      TCM_ENTRY(tc_delete_aligned),
      TCM_ENTRY(tc_delete_sized_aligned),
      TCM_ENTRY(tc_delete_aligned_nothrow),
      TCM_ENTRY(tc_newarray_aligned),
      TCM_ENTRY(tc_newarray_aligned_nothrow),
      TCM_ENTRY(tc_deletearray_aligned),
      TCM_ENTRY(tc_deletearray_sized_aligned),
      TCM_ENTRY(tc_deletearray_aligned_nothrow),
      TCM_ENTRY(nallocx),
  };
  for (const Entry& e : entries) {
    EXPECT_NE(e.addr, nullptr) << e.name << " is not exported";
    if (e.addr != nullptr) {
      EXPECT_TRUE(DefinedByAllocator(e.addr)) << e.name;
    }
  }
}

TEST(LibcNames, EveryAllocationFunctionIsServedByTheAllocator) {
  using std::align_val_t;
  using std::nothrow_t;
  const Entry entries[] = {
      TCM_ENTRY(malloc),
      TCM_ENTRY(free),
      TCM_ENTRY(calloc),
      TCM_ENTRY(realloc),
      TCM_ENTRY(memalign),
      TCM_ENTRY(posix_memalign),
      TCM_ENTRY(aligned_alloc),
      TCM_ENTRY(valloc),
      TCM_ENTRY(pvalloc),
      TCM_ENTRY(malloc_usable_size),
      TCM_ENTRY(malloc_size),
      TCM_ENTRY(cfree),
      TCM_ENTRY(free_sized),
      TCM_ENTRY(free_aligned_sized),
      {"mallinfo", MallinfoAddress()},
      TCM_ENTRY(mallinfo2),
      TCM_ENTRY(malloc_stats),
      TCM_ENTRY(mallopt),
      TCM_ENTRY(__libc_malloc),
      TCM_ENTRY(__libc_free),
      TCM_ENTRY(__libc_calloc),
      TCM_ENTRY(__libc_realloc),
      TCM_ENTRY(__libc_memalign),
      TCM_ENTRY(__libc_valloc),
      TCM_ENTRY(__libc_pvalloc),
      {"operator new(size_t)", FnAddr(static_cast<void* (*)(size_t)>(&::operator new))},
      {"operator new[](size_t)", FnAddr(static_cast<void* (*)(size_t)>(&::operator new[]))},
      {"operator new(size_t, nothrow_t)",
       FnAddr(static_cast<void* (*)(size_t, const nothrow_t&) noexcept>(&::operator new))},
      {"operator new[](size_t, nothrow_t)",
       FnAddr(static_cast<void* (*)(size_t, const nothrow_t&) noexcept>(&::operator new[]))},
      {"operator new(size_t, align_val_t)",
       FnAddr(static_cast<void* (*)(size_t, align_val_t)>(&::operator new))},
      {"operator new[](size_t, align_val_t)",
       FnAddr(static_cast<void* (*)(size_t, align_val_t)>(&::operator new[]))},
      {"operator new(size_t, align_val_t, nothrow_t)",
       FnAddr(static_cast<void* (*)(size_t, align_val_t, const nothrow_t&) noexcept>(
           &::operator new))},
      {"operator new[](size_t, align_val_t, nothrow_t)",
       FnAddr(static_cast<void* (*)(size_t, align_val_t, const nothrow_t&) noexcept>(
           &::operator new[]))},
      {"operator delete(void*)", FnAddr(static_cast<void (*)(void*) noexcept>(&::operator delete))},
      {"operator delete[](void*)",
       FnAddr(static_cast<void (*)(void*) noexcept>(&::operator delete[]))},
      {"operator delete(void*, nothrow_t)",
       FnAddr(static_cast<void (*)(void*, const nothrow_t&) noexcept>(&::operator delete))},
      {"operator delete[](void*, nothrow_t)",
       FnAddr(static_cast<void (*)(void*, const nothrow_t&) noexcept>(&::operator delete[]))},
      {"operator delete(void*, size_t)",
       FnAddr(static_cast<void (*)(void*, size_t) noexcept>(&::operator delete))},
      {"operator delete[](void*, size_t)",
       FnAddr(static_cast<void (*)(void*, size_t) noexcept>(&::operator delete[]))},
      {"operator delete(void*, align_val_t)",
       FnAddr(static_cast<void (*)(void*, align_val_t) noexcept>(&::operator delete))},
      {"operator delete[](void*, align_val_t)",
       FnAddr(static_cast<void (*)(void*, align_val_t) noexcept>(&::operator delete[]))},
      {"operator delete(void*, align_val_t, nothrow_t)",
       FnAddr(static_cast<void (*)(void*, align_val_t, const nothrow_t&) noexcept>(
           &::operator delete))},
      {"operator delete[](void*, align_val_t, nothrow_t)",
       FnAddr(static_cast<void (*)(void*, align_val_t, const nothrow_t&) noexcept>(
           &::operator delete[]))},
      {"operator delete(void*, size_t, align_val_t)",
       FnAddr(static_cast<void (*)(void*, size_t, align_val_t) noexcept>(&::operator delete))},
      {"operator delete[](void*, size_t, align_val_t)",
       FnAddr(static_cast<void (*)(void*, size_t, align_val_t) noexcept>(&::operator delete[]))},
  };
  for (const Entry& e : entries) {
    EXPECT_NE(e.addr, nullptr) << e.name << " does not resolve";
    if (e.addr != nullptr) {
      EXPECT_TRUE(DefinedByAllocator(e.addr))
          << e.name << " resolves to " << tcm_test::ObjectNameOf(e.addr) << ", not the allocator";
    }
  }
  // Not required: glibc's reallocarray calls realloc, and glibc's malloc_trim on an unused glibc
  // heap is harmless. Reported for information only.
  for (const Entry& e : {TCM_ENTRY(reallocarray), TCM_ENTRY(malloc_trim)}) {
    if (!DefinedByAllocator(e.addr)) {
      std::cout << "note: " << e.name << " comes from " << tcm_test::ObjectNameOf(e.addr) << "\n";
    }
  }
}

TEST(TcApi, VersionReportsTheHeaderVersion) {
  ASSERT_NE(&tc_version, nullptr);
  int major = -1, minor = -1;
  const char* patch = nullptr;
  const char* version = tc_version(&major, &minor, &patch);
  ASSERT_NE(version, nullptr);
  EXPECT_STREQ(version, TC_VERSION_STRING);
  EXPECT_EQ(major, TC_VERSION_MAJOR);
  EXPECT_EQ(minor, TC_VERSION_MINOR);
  ASSERT_NE(patch, nullptr);
  EXPECT_STREQ(patch, TC_VERSION_PATCH);
  EXPECT_STREQ(tc_version(nullptr, nullptr, nullptr), version);  // every out-pointer optional
}

TEST(TcApi, MallocFamilyWorksAndMixesWithTheLibcNames) {
  ASSERT_NE(&tc_malloc, nullptr);
  for (size_t n : {size_t{0}, size_t{1}, size_t{16}, size_t{100}, size_t{5000}, 300 * kKiB,
                   2 * kMiB}) {
    void* a = tc_malloc(Opaque(n));
    ASSERT_NE(a, nullptr);
    EXPECT_GE(tc_malloc_size(a), n);
    EXPECT_EQ(tc_malloc_size(a), malloc_usable_size(a));
    EXPECT_TRUE(IsAligned(a, tcm_test::MinAlignmentFor(n)));
    FillPattern(a, n, 1);
    void* b = tc_realloc(a, Opaque(n * 2 + 1));
    ASSERT_NE(b, nullptr);
    EXPECT_TRUE(CheckPattern(b, n, 1));
    free(b);  // tc_ memory freed by the libc name

    void* c = malloc(Opaque(n));
    ASSERT_NE(c, nullptr);
    tc_free(c);  // and the other way round

    void* d = tc_calloc(Opaque(n), 1);
    ASSERT_NE(d, nullptr);
    EXPECT_TRUE(AllBytesAre(d, n, 0));
    tc_cfree(d);

    void* e = tc_malloc_skip_new_handler(Opaque(n));
    ASSERT_NE(e, nullptr);
    tc_free_sized(e, n);

    void* f = tc_memalign(Opaque(size_t{256}), n);
    ASSERT_NE(f, nullptr);
    EXPECT_TRUE(IsAligned(f, 256));
    if (&tc_free_aligned_sized != nullptr) {  // its absence fails EveryEntryPoint... above
      tc_free_aligned_sized(f, 256, n);
    } else {
      tc_free(f);
    }

    void* g = nullptr;
    ASSERT_EQ(tc_posix_memalign(&g, Opaque(size_t{4096}), n), 0);
    EXPECT_TRUE(IsAligned(g, 4096));
    tc_free(g);

    const size_t page = tcm_test::PageSize();
    void* h = tc_valloc(Opaque(n));
    ASSERT_NE(h, nullptr);
    EXPECT_TRUE(IsAligned(h, page));
    tc_free(h);
    void* i = tc_pvalloc(Opaque(n));
    ASSERT_NE(i, nullptr);
    EXPECT_TRUE(IsAligned(i, page));
    EXPECT_GE(tc_malloc_size(i), n == 0 ? page : (n + page - 1) / page * page);
    tc_free(i);
  }
  // tc_free_sized may be given anything from the requested size up to tc_nallocx of it.
  void* p = tc_malloc(Opaque(size_t{100}));
  ASSERT_NE(p, nullptr);
  tc_free_sized(p, tc_nallocx(100, 0));
  tc_free(Opaque<void*>(nullptr));
  tc_cfree(Opaque<void*>(nullptr));
  EXPECT_EQ(tc_malloc_size(Opaque<void*>(nullptr)), 0u);
}

TEST(TcApi, FailurePathsFollowTheLibcContracts) {
  ASSERT_NE(&tc_malloc, nullptr);
  errno = 0;
  EXPECT_EQ(tc_malloc(Opaque(SIZE_MAX)), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(tc_malloc_skip_new_handler(Opaque(SIZE_MAX)), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(tc_calloc(Opaque(SIZE_MAX / 4), 5), nullptr);
  EXPECT_EQ(errno, ENOMEM) << "tc_calloc overflow must set ENOMEM";
  void* keep = tc_malloc(Opaque(size_t{50}));
  ASSERT_NE(keep, nullptr);
  FillPattern(keep, 50, 4);
  errno = 0;
  EXPECT_EQ(tc_realloc(Opaque(keep), Opaque(SIZE_MAX)), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_TRUE(CheckPattern(keep, 50, 4));
  tc_free(keep);
  errno = 0;
  EXPECT_EQ(tc_memalign(Opaque(size_t{24}), 100), nullptr);
  EXPECT_EQ(errno, EINVAL);
  void* p = nullptr;
  errno = 0;
  EXPECT_EQ(tc_posix_memalign(&p, Opaque(size_t{12}), 100), EINVAL);
  EXPECT_EQ(errno, 0);
  EXPECT_NE(tc_posix_memalign(&p, 64, Opaque(SIZE_MAX)), 0);
  errno = 0;
  EXPECT_EQ(tc_valloc(Opaque(SIZE_MAX)), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(tc_pvalloc(Opaque(SIZE_MAX - 10)), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

void CheckNewBlock(void* p, size_t n, size_t align) {
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(IsAligned(p, align)) << p;
  EXPECT_GE(tc_malloc_size(p), n);
  memset(p, 0x3c, n);
}

TEST(TcApi, NewAndDeleteEntryPoints) {
  ASSERT_NE(&tc_new, nullptr);
  ASSERT_NE(&tc_new_aligned, nullptr);
  for (size_t n : {size_t{0}, size_t{24}, size_t{1000}, 300 * kKiB}) {
    const size_t a = tcm_test::MinAlignmentFor(n);
    void* p;
    p = tc_new(Opaque(n));
    CheckNewBlock(p, n, a);
    tc_delete(p);
    p = tc_new(Opaque(n));
    CheckNewBlock(p, n, a);
    tc_delete_sized(p, n);
    p = tc_new_nothrow(Opaque(n), std::nothrow);
    CheckNewBlock(p, n, a);
    tc_delete_nothrow(p, std::nothrow);
    p = tc_newarray(Opaque(n));
    CheckNewBlock(p, n, a);
    tc_deletearray(p);
    p = tc_newarray(Opaque(n));
    CheckNewBlock(p, n, a);
    tc_deletearray_sized(p, n);
    p = tc_newarray_nothrow(Opaque(n), std::nothrow);
    CheckNewBlock(p, n, a);
    tc_deletearray_nothrow(p, std::nothrow);
    for (size_t align : {size_t{32}, size_t{4096}, size_t{65536}}) {
      const std::align_val_t al{align};
      p = tc_new_aligned(Opaque(n), al);
      CheckNewBlock(p, n, align);
      tc_delete_aligned(p, al);
      p = tc_new_aligned(Opaque(n), al);
      CheckNewBlock(p, n, align);
      tc_delete_sized_aligned(p, n, al);
      p = tc_new_aligned_nothrow(Opaque(n), al, std::nothrow);
      CheckNewBlock(p, n, align);
      tc_delete_aligned_nothrow(p, al, std::nothrow);
      p = tc_newarray_aligned(Opaque(n), al);
      CheckNewBlock(p, n, align);
      tc_deletearray_aligned(p, al);
      p = tc_newarray_aligned(Opaque(n), al);
      CheckNewBlock(p, n, align);
      tc_deletearray_sized_aligned(p, n, al);
      p = tc_newarray_aligned_nothrow(Opaque(n), al, std::nothrow);
      CheckNewBlock(p, n, align);
      tc_deletearray_aligned_nothrow(p, al, std::nothrow);
    }
    // The tc_ and operator spellings share one heap.
    p = tc_new(Opaque(n));
    ::operator delete(p);
    p = ::operator new(Opaque(n));
    tc_delete(p);
  }
  std::set_new_handler(nullptr);
  const std::align_val_t al{64};
  EXPECT_THROW((void)tc_new(Opaque(kTooBig)), std::bad_alloc);
  EXPECT_THROW((void)tc_newarray(Opaque(SIZE_MAX)), std::bad_alloc);
  EXPECT_THROW((void)tc_new_aligned(Opaque(kTooBig), al), std::bad_alloc);
  EXPECT_THROW((void)tc_newarray_aligned(Opaque(SIZE_MAX), al), std::bad_alloc);
  EXPECT_EQ(tc_new_nothrow(Opaque(kTooBig), std::nothrow), nullptr);
  EXPECT_EQ(tc_newarray_nothrow(Opaque(SIZE_MAX), std::nothrow), nullptr);
  EXPECT_EQ(tc_new_aligned_nothrow(Opaque(kTooBig), al, std::nothrow), nullptr);
  EXPECT_EQ(tc_newarray_aligned_nothrow(Opaque(SIZE_MAX), al, std::nothrow), nullptr);
  tc_delete(Opaque<void*>(nullptr));
  tc_deletearray_sized(Opaque<void*>(nullptr), 10);
  tc_delete_sized_aligned(Opaque<void*>(nullptr), 10, al);
}

int g_new_mode_handler_calls = 0;

void NewModeHandler() {
  ++g_new_mode_handler_calls;
  std::set_new_handler(nullptr);  // give up: the allocation then fails
}

TEST(TcApi, NewModeMakesMallocCallTheNewHandler) {
  ASSERT_NE(&tc_set_new_mode, nullptr);
  ASSERT_NE(&tc_query_new_mode, nullptr);
  EXPECT_EQ(tc_query_new_mode(), 0) << "new-mode starts off";

  // Mode 0: malloc failure does not involve the handler.
  g_new_mode_handler_calls = 0;
  std::set_new_handler(NewModeHandler);
  EXPECT_EQ(tc_malloc(Opaque(kTooBig)), nullptr);
  EXPECT_EQ(g_new_mode_handler_calls, 0);
  std::set_new_handler(nullptr);

  EXPECT_EQ(tc_set_new_mode(1), 0) << "returns the previous mode";
  EXPECT_EQ(tc_query_new_mode(), 1);

  g_new_mode_handler_calls = 0;
  std::set_new_handler(NewModeHandler);
  errno = 0;
  EXPECT_EQ(tc_malloc(Opaque(kTooBig)), nullptr);
  EXPECT_EQ(g_new_mode_handler_calls, 1) << "in new-mode, tc_malloc failure calls the handler";
  EXPECT_EQ(errno, ENOMEM);

  // calloc follows malloc: a block that cannot be had calls the handler, a count times
  // size that overflows is refused without it.
  g_new_mode_handler_calls = 0;
  std::set_new_handler(NewModeHandler);
  errno = 0;
  EXPECT_EQ(tc_calloc(Opaque(size_t{1}), kTooBig), nullptr);
  EXPECT_EQ(g_new_mode_handler_calls, 1) << "in new-mode, tc_calloc failure calls the handler";
  EXPECT_EQ(errno, ENOMEM);
  g_new_mode_handler_calls = 0;
  std::set_new_handler(NewModeHandler);
  errno = 0;
  EXPECT_EQ(tc_calloc(Opaque(SIZE_MAX / 2), 3), nullptr);
  EXPECT_EQ(g_new_mode_handler_calls, 0) << "an overflowing count times size is not retried";
  EXPECT_EQ(errno, ENOMEM);
  std::set_new_handler(nullptr);

  g_new_mode_handler_calls = 0;
  std::set_new_handler(NewModeHandler);
  EXPECT_EQ(tc_malloc_skip_new_handler(Opaque(kTooBig)), nullptr);
  EXPECT_EQ(g_new_mode_handler_calls, 0) << "tc_malloc_skip_new_handler never calls it";
  std::set_new_handler(nullptr);

  // Successful allocations are unaffected.
  void* p = tc_malloc(Opaque(size_t{100}));
  EXPECT_NE(p, nullptr);
  tc_free(p);

  EXPECT_EQ(tc_set_new_mode(0), 1);
  EXPECT_EQ(tc_query_new_mode(), 0);
}

// ---- statistics ------------------------------------------------------------------------------

TEST(Mallinfo, CountersGrowWhenTenMegabytesAreAllocatedAndShrinkAfterwards) {
  struct Snapshot {
    long long arena, uordblks, hblkhd;
  };
  const struct {
    const char* name;
    Snapshot (*take)();
  } variants[] = {
      {"mallinfo2",
       [] {
         const struct mallinfo2 m = mallinfo2();
         return Snapshot{static_cast<long long>(m.arena), static_cast<long long>(m.uordblks),
                         static_cast<long long>(m.hblkhd)};
       }},
      {"mallinfo",
       [] {
         const struct mallinfo m = CallMallinfo();
         return Snapshot{m.arena, m.uordblks, m.hblkhd};
       }},
      {"tc_mallinfo2",
       [] {
         if (&tc_mallinfo2 == nullptr) return Snapshot{-1, -1, -1};
         const struct mallinfo2 m = tc_mallinfo2();
         return Snapshot{static_cast<long long>(m.arena), static_cast<long long>(m.uordblks),
                         static_cast<long long>(m.hblkhd)};
       }},
      {"tc_mallinfo",
       [] {
         if (&tc_mallinfo == nullptr) return Snapshot{-1, -1, -1};
         const struct mallinfo m = tc_mallinfo();
         return Snapshot{m.arena, m.uordblks, m.hblkhd};
       }},
  };
  constexpr long long kTen = 10 * kMiB;
  constexpr long long kSlack = kMiB;  // other threads of the test framework may free a little
  for (const auto& v : variants) {
    SCOPED_TRACE(v.name);
    const Snapshot before = v.take();
    if (before.uordblks < 0) {
      ADD_FAILURE() << v.name << " is unavailable or reports a negative uordblks";
      continue;
    }
    std::vector<void*> blocks;
    for (int i = 0; i < 5; ++i) blocks.push_back(malloc(Opaque(kMiB)));         // 5 MiB large
    for (int i = 0; i < 5120; ++i) blocks.push_back(malloc(Opaque(size_t{1024})));  // 5 MiB small
    for (void* p : blocks) {
      ASSERT_NE(p, nullptr);
      memset(p, 1, 1024);
    }
    const Snapshot held = v.take();
    // Bytes in use grow by about 10 MiB, and the system bytes cover what is in use. Where the
    // blocks are counted: uordblks, or uordblks plus hblkhd for allocators that count
    // mmapped blocks there (glibc). Ours counts every block in uordblks, and its hblkhd is
    // metadata, which may grow meanwhile: a central list set up on its first use (lists are
    // set up one by one) reserves its transfer cache's array, 1.2 MiB over the frees below
    // when the thread had moved to the other CPU's shard.
    const bool blocks_in_uordblks = held.uordblks - before.uordblks >= kTen - kSlack;
    auto in_use = [blocks_in_uordblks](const Snapshot& s) {
      return blocks_in_uordblks ? s.uordblks : s.uordblks + s.hblkhd;
    };
    EXPECT_GE(in_use(held) - in_use(before), kTen - kSlack);
    EXPECT_GE(held.arena + held.hblkhd, held.uordblks);
    EXPECT_GE(held.arena + held.hblkhd, kTen);
    for (void* p : blocks) free(p);
    const Snapshot after = v.take();
    EXPECT_LE(in_use(after), in_use(held) - (kTen - kSlack)) << "freed bytes are still counted as in use";
    EXPECT_GE(after.arena, 0);
    EXPECT_GE(after.uordblks, 0);
  }
}

// Runs `fn` with file descriptor 2 redirected to a temporary file and returns what it wrote.
template <typename F>
std::string CaptureStderr(F fn) {
  fflush(stderr);
  FILE* tmp = tmpfile();
  if (tmp == nullptr) return "<tmpfile failed>";
  const int saved = dup(2);
  dup2(fileno(tmp), 2);
  fn();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::string out;
  rewind(tmp);
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof(buf), tmp)) > 0) out.append(buf, got);
  fclose(tmp);
  return out;
}

TEST(MallocStats, PrintsSomethingToStderr) {
  void* p = malloc(Opaque(size_t{12345}));
  const std::string out = CaptureStderr([] { malloc_stats(); });
  EXPECT_FALSE(out.empty()) << "malloc_stats() printed nothing";
  free(p);
  if (&tc_malloc_stats != nullptr) {
    const std::string tc_out = CaptureStderr([] { tc_malloc_stats(); });
    EXPECT_FALSE(tc_out.empty()) << "tc_malloc_stats() printed nothing";
  }
}

TEST(MallocTrim, ReturnsZeroOrOneAndLiveBlocksSurvive) {
  // Live blocks of many sizes, then lots of freed memory for trim to give back.
  struct Block {
    void* p;
    size_t n;
  };
  std::vector<Block> live;
  tcm_test::Rng rng(11);
  for (int i = 0; i < 3000; ++i) {
    const size_t n = tcm_test::SkewedSize(rng);
    void* p = malloc(n);
    ASSERT_NE(p, nullptr);
    FillPattern(p, n, static_cast<uint32_t>(i));
    live.push_back({p, n});
  }
  std::vector<void*> garbage;
  for (int i = 0; i < 40; ++i) garbage.push_back(malloc(Opaque(kMiB + 4096 * i)));
  for (int i = 0; i < 20000; ++i) garbage.push_back(malloc(Opaque(size_t{512})));
  for (void* p : garbage) {
    ASSERT_NE(p, nullptr);
    memset(p, 0x22, 512);
  }
  for (void* p : garbage) free(p);
  for (size_t pad : {size_t{0}, size_t{128 * 1024}, size_t{64 * kMiB}}) {
    const int rc = malloc_trim(pad);
    EXPECT_TRUE(rc == 0 || rc == 1) << "malloc_trim(" << pad << ") returned " << rc;
  }
  for (size_t i = 0; i < live.size(); ++i) {
    ASSERT_TRUE(CheckPattern(live[i].p, live[i].n, static_cast<uint32_t>(i)))
        << "malloc_trim damaged a live block of " << live[i].n << " bytes";
  }
  // The heap keeps working, including reuse of trimmed memory, and calloc still zeroes it.
  for (int i = 0; i < 40; ++i) {
    void* p = calloc(1, Opaque(kMiB + 4096 * i));
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(AllBytesAre(p, kMiB, 0));
    free(p);
  }
  for (const Block& b : live) free(b.p);
}

TEST(Mallopt, IsAcceptedAndHarmless) {
  for (int cmd : {M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, M_TOP_PAD, M_ARENA_MAX, M_MXFAST, 12345}) {
    const int rc = mallopt(cmd, 128 * 1024);
    EXPECT_TRUE(rc == 0 || rc == 1) << "mallopt(" << cmd << ") returned " << rc;
  }
  ASSERT_NE(&tc_mallopt, nullptr);
  EXPECT_EQ(tc_mallopt(M_MMAP_THRESHOLD, 4096), 1) << "tc_mallopt is documented to return 1";
  void* p = malloc(Opaque(size_t{1} << 20));
  ASSERT_NE(p, nullptr);
  free(p);
}

}  // namespace
