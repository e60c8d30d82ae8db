// platform/os.h: page residency (mincore), the primitive under GetStats' "Metadata
// mappings" line and the heap checker's scan of metadata.
#include "platform/os.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdint>

namespace tcm::os {
namespace {

constexpr size_t kPage = 4096;

// Anonymous memory in small pages only: a huge page would make one touch count 2 MiB.
char* MapSmallPages(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  madvise(p, bytes, MADV_NOHUGEPAGE);
  return static_cast<char*>(p);
}

TEST(PlatformOs, PageResidencyTellsTouchedPagesFromUntouchedOnes) {
  char* two = MapSmallPages(2 * kPage);
  ASSERT_NE(two, nullptr);
  two[kPage] = 1;  // the second page only
  unsigned char resident[2] = {9, 9};
  ASSERT_TRUE(PageResidency(reinterpret_cast<uintptr_t>(two), 2, resident));
  EXPECT_EQ(resident[0] & 1, 0);
  EXPECT_EQ(resident[1] & 1, 1);
  munmap(two, 2 * kPage);
  // Unmapped now: the kernel refuses (ENOMEM), and errno is left as it was.
  errno = 55;
  EXPECT_FALSE(PageResidency(reinterpret_cast<uintptr_t>(two), 2, resident));
  EXPECT_EQ(errno, 55);
}

// ResidentBytes asks the kernel 2 MiB at a time: pages touched on both sides of that
// boundary and in the last, partial piece all count, untouched ones do not.
TEST(PlatformOs, ResidentBytesCountsTheTouchedPagesOfEveryPiece) {
  constexpr size_t kBytes = (5u << 20) + 3 * kPage;  // three pieces, the last not whole
  char* p = MapSmallPages(kBytes);
  ASSERT_NE(p, nullptr);
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  EXPECT_EQ(ResidentBytes(start, kBytes), 0u);
  p[0] = 1;
  p[(2u << 20) - kPage] = 1;  // last page of the first piece
  p[2u << 20] = 1;            // first page of the second
  p[kBytes - 1] = 1;          // last page of the last
  EXPECT_EQ(ResidentBytes(start, kBytes), 4 * kPage);
  EXPECT_EQ(ResidentBytes(start + kPage, (2u << 20) - 2 * kPage), 0u) << "between the touched pages";
  munmap(p, kBytes);
}

}  // namespace
}  // namespace tcm::os
