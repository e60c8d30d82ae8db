// SystemAllocator: the page heap's memory source. Each source (mmap, sbrk) must return
// zero-filled, aligned memory of at least the size asked, count what it handed out, and
// fail with nullptr (not crash) when disabled or asked for the impossible.
#include "core/system_alloc.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/config.h"

namespace tcm {
namespace {

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * 1024;

// The one place that spells SystemAllocator::Alloc's signature.
void* Alloc(SystemAllocator* sys, size_t bytes, size_t align, size_t* actual,
            bool* zeroed = nullptr) {
  return sys->Alloc(bytes, align, actual, zeroed);
}

bool AllZero(const void* p, size_t n) {
  const unsigned char* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i)
    if (c[i] != 0) return false;
  return true;
}

// Allocates from `sys` with several alignments and sizes and checks the contract; returns
// the total bytes obtained.
size_t ExerciseAlignments(SystemAllocator* sys) {
  size_t total = 0;
  for (size_t align : {8 * kKiB, 16 * kKiB, 64 * kKiB, 256 * kKiB, 1 * kMiB}) {
    for (size_t bytes : {size_t{1}, 8 * kKiB, 100 * kKiB + 3}) {
      size_t actual = 0;
      bool zeroed = false;
      void* p = Alloc(sys, bytes, align, &actual, &zeroed);
      EXPECT_NE(p, nullptr) << "bytes=" << bytes << " align=" << align;
      if (p == nullptr) continue;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << "align=" << align;
      EXPECT_GE(actual, bytes);
      EXPECT_EQ(actual % align, 0u);  // rounded up to whole alignment units
      EXPECT_TRUE(zeroed);  // fresh anonymous memory and a new break read as zeros
      EXPECT_TRUE(AllZero(p, actual)) << "bytes=" << bytes << " align=" << align;
      memset(p, 0x5A, actual);  // writable to the last byte
      total += actual;
    }
  }
  return total;
}

TEST(SystemAllocator, StartsWithBothSourcesEnabled) {
  SystemAllocator sys;
  EXPECT_TRUE(sys.enabled(SystemAllocator::kMmap));
  EXPECT_TRUE(sys.enabled(SystemAllocator::kSbrk));
  EXPECT_EQ(sys.total_bytes(), 0u);
}

TEST(SystemAllocator, MmapReturnsAlignedZeroedMemory) {
  SystemAllocator sys;
  const size_t total = ExerciseAlignments(&sys);
  EXPECT_EQ(sys.bytes_from(SystemAllocator::kMmap), total);
  EXPECT_EQ(sys.bytes_from(SystemAllocator::kSbrk), 0u);  // mmap is tried first
  EXPECT_EQ(sys.total_bytes(), total);
}

TEST(SystemAllocator, SbrkServesWhenMmapIsDisabled) {
  SystemAllocator sys;
  sys.set_enabled(SystemAllocator::kMmap, false);
  EXPECT_FALSE(sys.enabled(SystemAllocator::kMmap));
  const size_t total = ExerciseAlignments(&sys);
  EXPECT_EQ(sys.bytes_from(SystemAllocator::kSbrk), total);
  EXPECT_EQ(sys.bytes_from(SystemAllocator::kMmap), 0u);
}

TEST(SystemAllocator, FailsCleanlyWithNoSource) {
  SystemAllocator sys;
  sys.set_enabled(SystemAllocator::kMmap, false);
  sys.set_enabled(SystemAllocator::kSbrk, false);
  size_t actual = 12345;
  EXPECT_EQ(Alloc(&sys, kMiB, kPageSize, &actual), nullptr);
  EXPECT_EQ(actual, 12345u);  // untouched on failure
  EXPECT_EQ(sys.total_bytes(), 0u);
  // Re-enabling works again.
  sys.set_enabled(SystemAllocator::kMmap, true);
  EXPECT_NE(Alloc(&sys, kMiB, kPageSize, &actual), nullptr);
  EXPECT_EQ(actual, kMiB);
}

TEST(SystemAllocator, RefusesImpossibleSizes) {
  SystemAllocator sys;
  size_t actual = 0;
  EXPECT_EQ(Alloc(&sys, kMaxAllocation + 1, kPageSize, &actual), nullptr);
  // Near SIZE_MAX, rounding up to the alignment would wrap to a tiny size.
  EXPECT_EQ(Alloc(&sys, ~size_t{0} - 5, kPageSize, &actual), nullptr);
  EXPECT_EQ(sys.total_bytes(), 0u);
}

TEST(SystemAllocator, SmallAlignmentsBecomePageAlignment) {
  SystemAllocator sys;
  size_t actual = 0;
  void* p = Alloc(&sys, 1, 16, &actual);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kPageSize, 0u);
  EXPECT_EQ(actual, kPageSize);
  // `actual` is optional.
  EXPECT_NE(Alloc(&sys, kPageSize, kPageSize, nullptr), nullptr);
}

TEST(SystemAllocator, ReleasedMemoryReadsBackAsZero) {
  SystemAllocator sys;
  size_t actual = 0;
  char* p = static_cast<char*>(Alloc(&sys, 64 * kKiB, kPageSize, &actual));
  ASSERT_NE(p, nullptr);
  memset(p, 0x77, actual);
  bool zeroed = false;
  ASSERT_TRUE(sys.Release(p, actual, &zeroed));
  EXPECT_TRUE(zeroed) << "anonymous memory reads back as zero";
  EXPECT_TRUE(AllZero(p, actual));
  p[0] = 1;  // still mapped and writable
  EXPECT_EQ(sys.total_bytes(), actual);  // releasing does not un-count
}

TEST(SystemAllocator, ReleaseCanBeDisabled) {
  // TCMALLOC_DISABLE_MEMORY_RELEASE: the page heap keeps such runs as normal memory.
  SystemAllocator sys;
  size_t actual = 0;
  char* p = static_cast<char*>(Alloc(&sys, 64 * kKiB, kPageSize, &actual));
  ASSERT_NE(p, nullptr);
  p[0] = 9;
  sys.set_release_enabled(false);
  bool zeroed = false;
  EXPECT_FALSE(sys.Release(p, actual, &zeroed));
  EXPECT_EQ(p[0], 9);  // untouched
}

// A program-supplied source (MallocExtension::SetSystemAllocator) replaces the built-in
// ones; memory it returns is not assumed to be zero. Its NULL, or a block that breaks the
// contract, is out of memory (gperftools: the same), never a silent fallback to mmap.
struct UserSource {
  int calls = 0;
  bool misalign = false;
  bool fail = false;
};
void* UserAlloc(void* ctx, size_t size, size_t* actual, size_t alignment) {
  auto* u = static_cast<UserSource*>(ctx);
  ++u->calls;
  if (u->fail) return nullptr;
  // Leaked on purpose, like every system allocation.
  char* p = static_cast<char*>(aligned_alloc(alignment, size + alignment));
  if (p == nullptr) return nullptr;
  *actual = size;
  return u->misalign ? p + 4096 : p;
}

TEST(SystemAllocator, UserSourceComesFirst) {
  SystemAllocator sys;
  UserSource u;
  sys.SetUserSource(&UserAlloc, &u);
  EXPECT_TRUE(sys.enabled(SystemAllocator::kUser));
  size_t actual = 0;
  bool zeroed = true;
  void* p = Alloc(&sys, 100 * kKiB, 64 * kKiB, &actual, &zeroed);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(u.calls, 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (64 * kKiB), 0u);
  EXPECT_GE(actual, 100 * kKiB);
  EXPECT_FALSE(zeroed);
  EXPECT_EQ(sys.bytes_from(SystemAllocator::kUser), actual);
  EXPECT_EQ(sys.bytes_from(SystemAllocator::kMmap), 0u);
}

TEST(SystemAllocator, UserSourceNullIsOutOfMemory) {
  SystemAllocator sys;
  UserSource u;
  u.fail = true;
  sys.SetUserSource(&UserAlloc, &u);
  size_t actual = 0;
  bool zeroed = false;
  EXPECT_EQ(Alloc(&sys, 100 * kKiB, 64 * kKiB, &actual, &zeroed), nullptr);
  EXPECT_EQ(u.calls, 1);
  EXPECT_EQ(sys.bytes_from(SystemAllocator::kMmap), 0u) << "fell back to mmap behind its back";
  EXPECT_EQ(sys.total_bytes(), 0u);
}

TEST(SystemAllocator, MisalignedUserBlockIsOutOfMemory) {
  SystemAllocator sys;
  UserSource u;
  u.misalign = true;
  sys.SetUserSource(&UserAlloc, &u);
  size_t actual = 0;
  bool zeroed = false;
  EXPECT_EQ(Alloc(&sys, 100 * kKiB, 64 * kKiB, &actual, &zeroed), nullptr);
  EXPECT_EQ(u.calls, 1);
  EXPECT_EQ(sys.total_bytes(), 0u);
  // Removing the source turns it off, and the built-in sources serve again.
  sys.SetUserSource(nullptr, nullptr);
  EXPECT_FALSE(sys.enabled(SystemAllocator::kUser));
  void* p = Alloc(&sys, 100 * kKiB, 64 * kKiB, &actual, &zeroed);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(zeroed);
  EXPECT_EQ(sys.bytes_from(SystemAllocator::kMmap), actual);
}

TEST(SystemAllocator, MemfsServesUpToItsLimitThenFallsBack) {
  // /dev/shm is tmpfs on Linux: files there behave like the memfs source's hugetlbfs.
  SystemAllocator sys;
  sys.ConfigureMemfs("/dev/shm", 2 * kMiB, /*abort_on_fail=*/false,
                     /*ignore_mmap_fail=*/false, /*map_private=*/false);
  ASSERT_TRUE(sys.enabled(SystemAllocator::kMemfs));
  size_t total = 0;
  for (int i = 0; i < 2; ++i) {
    size_t actual = 0;
    bool zeroed = false;
    char* p = static_cast<char*>(Alloc(&sys, kMiB, 64 * kKiB, &actual, &zeroed));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (64 * kKiB), 0u);
    EXPECT_EQ(actual, kMiB);
    EXPECT_TRUE(zeroed);
    EXPECT_TRUE(AllZero(p, actual));
    memset(p, 0x33, actual);
    total += actual;
  }
  EXPECT_EQ(sys.bytes_from(SystemAllocator::kMemfs), total);
  // The limit is reached: the next request comes from mmap.
  size_t actual = 0;
  ASSERT_NE(Alloc(&sys, kMiB, 64 * kKiB, &actual), nullptr);
  EXPECT_EQ(sys.bytes_from(SystemAllocator::kMemfs), total);
  EXPECT_EQ(sys.bytes_from(SystemAllocator::kMmap), actual);
}

TEST(SystemAllocator, UnusableMemfsDirectoryFallsBackToMmap) {
  SystemAllocator sys;
  sys.ConfigureMemfs("/nonexistent/tcmalloc-unit-test", 0, false, false, false);
  size_t actual = 0;
  ASSERT_NE(Alloc(&sys, kMiB, kPageSize, &actual), nullptr);
  EXPECT_FALSE(sys.enabled(SystemAllocator::kMemfs));  // not retried on every growth
  EXPECT_EQ(sys.bytes_from(SystemAllocator::kMmap), actual);
}

}  // namespace
}  // namespace tcm
