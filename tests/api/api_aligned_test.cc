// Aligned allocation: memalign, posix_memalign, aligned_alloc (and their tc_ spellings) for every
// power-of-two alignment up to 1 MiB, and their error contracts:
//   posix_memalign: returns EINVAL for an alignment that is not a power-of-two multiple of
//                   sizeof(void*), and leaves errno alone;
//   aligned_alloc, memalign: NULL with errno EINVAL for a non-power-of-two alignment;
//   all of them: ENOMEM (NULL or a nonzero return) for sizes nobody can satisfy.
#include <gtest/gtest.h>

#include <vector>

#include "test_util.h"

namespace {

using tcm_test::CheckPattern;
using tcm_test::FillPattern;
using tcm_test::IsAligned;
using tcm_test::Opaque;

constexpr size_t kMiB = 1024 * 1024;
constexpr size_t kMaxAlign = kMiB;

std::vector<size_t> SizesFor(size_t align) {
  return {1, align / 2 + 1, align, align + 1, 3 * align + 5, 100000};
}

enum class Fn { kMemalign, kPosixMemalign, kAlignedAlloc, kTcMemalign, kTcPosixMemalign };

const char* Name(Fn fn) {
  switch (fn) {
    case Fn::kMemalign: return "memalign";
    case Fn::kPosixMemalign: return "posix_memalign";
    case Fn::kAlignedAlloc: return "aligned_alloc";
    case Fn::kTcMemalign: return "tc_memalign";
    case Fn::kTcPosixMemalign: return "tc_posix_memalign";
  }
  return "?";
}

void* Allocate(Fn fn, size_t align, size_t size) {
  void* p = nullptr;
  switch (fn) {
    case Fn::kMemalign: return memalign(Opaque(align), size);
    case Fn::kAlignedAlloc: return aligned_alloc(Opaque(align), size);
    case Fn::kTcMemalign: return tc_memalign(Opaque(align), size);
    case Fn::kPosixMemalign:
      if (posix_memalign(&p, Opaque(align), size) != 0) return nullptr;
      return p;
    case Fn::kTcPosixMemalign:
      if (tc_posix_memalign(&p, Opaque(align), size) != 0) return nullptr;
      return p;
  }
  return nullptr;
}

class AlignedAlloc : public testing::TestWithParam<Fn> {};

TEST_P(AlignedAlloc, EveryPowerOfTwoAlignmentUpTo1MiB) {
  const Fn fn = GetParam();
  if (fn == Fn::kTcMemalign) {
    ASSERT_NE(&tc_memalign, nullptr);
  }
  if (fn == Fn::kTcPosixMemalign) {
    ASSERT_NE(&tc_posix_memalign, nullptr);
  }
  const bool posix = fn == Fn::kPosixMemalign || fn == Fn::kTcPosixMemalign;
  for (size_t align = posix ? sizeof(void*) : 1; align <= kMaxAlign; align <<= 1) {
    for (size_t n : SizesFor(align)) {
      // Several at once, so that the test does not just see one recycled block.
      void* blocks[6];
      for (int k = 0; k < 6; ++k) {
        void* p = Allocate(fn, align, n);
        ASSERT_NE(p, nullptr) << Name(fn) << "(" << align << ", " << n << ")";
        EXPECT_TRUE(IsAligned(p, align)) << Name(fn) << "(" << align << ", " << n << ") = " << p;
        EXPECT_GE(malloc_usable_size(p), n);
        FillPattern(p, n, static_cast<uint32_t>(align + n + k));
        blocks[k] = p;
      }
      for (int k = 0; k < 6; ++k) {
        EXPECT_TRUE(CheckPattern(blocks[k], n, static_cast<uint32_t>(align + n + k)))
            << Name(fn) << "(" << align << ", " << n << "): neighbouring blocks overlap";
        free(blocks[k]);
      }
    }
  }
}

TEST_P(AlignedAlloc, ZeroSizeIsFreeable) {
  const Fn fn = GetParam();
  if (fn == Fn::kTcMemalign) {
    ASSERT_NE(&tc_memalign, nullptr);
  }
  if (fn == Fn::kTcPosixMemalign) {
    ASSERT_NE(&tc_posix_memalign, nullptr);
  }
  for (size_t align : {size_t{8}, size_t{64}, size_t{4096}}) {
    void* p = Allocate(fn, align, Opaque(size_t{0}));
    if (p != nullptr) {
      EXPECT_TRUE(IsAligned(p, align));
    }
    free(p);
  }
}

INSTANTIATE_TEST_SUITE_P(AllFunctions, AlignedAlloc,
                         testing::Values(Fn::kMemalign, Fn::kPosixMemalign, Fn::kAlignedAlloc,
                                         Fn::kTcMemalign, Fn::kTcPosixMemalign),
                         [](const testing::TestParamInfo<Fn>& info) {
                           return std::string(Name(info.param));
                         });

// Alignments that are not powers of two, and (for posix_memalign) not multiples of
// sizeof(void*).
const size_t kNotPowerOfTwo[] = {3, 6, 12, 24, 48, 100, 4095, 4097, kMiB + 8, SIZE_MAX};

TEST(PosixMemalign, BadAlignmentReturnsEinvalAndLeavesErrnoAlone) {
  std::vector<size_t> bad(std::begin(kNotPowerOfTwo), std::end(kNotPowerOfTwo));
  bad.insert(bad.end(), {0, 1, 2, 4});  // powers of two below sizeof(void*)
  for (size_t align : bad) {
    void* sentinel = reinterpret_cast<void*>(0x1234);
    void* p = sentinel;
    errno = EDOM;
    const int rc = posix_memalign(&p, Opaque(align), 64);
    EXPECT_EQ(rc, EINVAL) << "posix_memalign(align=" << align << ")";
    EXPECT_EQ(errno, EDOM) << "posix_memalign(align=" << align << ") must not set errno";
    EXPECT_TRUE(p == sentinel || p == nullptr) << "POSIX: memptr unmodified or NULL on failure";
    if (rc == 0) free(p);
    if (&tc_posix_memalign != nullptr) {
      p = sentinel;
      errno = EDOM;
      const int tc_rc = tc_posix_memalign(&p, Opaque(align), 64);
      EXPECT_EQ(tc_rc, EINVAL) << "tc_posix_memalign(align=" << align << ")";
      EXPECT_EQ(errno, EDOM) << "tc_posix_memalign(align=" << align << ") must not set errno";
      if (tc_rc == 0) free(p);
    }
  }
}

TEST(PosixMemalign, ImpossibleRequestsReturnEnomem) {
  const struct {
    size_t align, size;
  } cases[] = {{64, SIZE_MAX},
               {4096, SIZE_MAX - 100},
               {kMiB, SIZE_MAX - kMiB / 2},  // size + alignment overflows
               {kMiB, static_cast<size_t>(PTRDIFF_MAX) + 1},
               {size_t{1} << 63, 1}};  // an alignment no address range can satisfy
  for (const auto& c : cases) {
    void* p = nullptr;
    const int rc = posix_memalign(&p, Opaque(c.align), Opaque(c.size));
    EXPECT_NE(rc, 0) << "posix_memalign(" << c.align << ", " << c.size << ")";
    EXPECT_TRUE(rc == ENOMEM || (rc == EINVAL && c.size == 1))
        << "posix_memalign(" << c.align << ", " << c.size << ") returned " << rc;
    if (rc == 0) free(p);
  }
}

TEST(AlignedAllocAndMemalign, NonPowerOfTwoAlignmentFailsWithEinval) {
  for (size_t align : kNotPowerOfTwo) {
    errno = 0;
    void* p = aligned_alloc(Opaque(align), 64);
    EXPECT_EQ(p, nullptr) << "aligned_alloc(" << align << ", 64)";
    EXPECT_EQ(errno, EINVAL) << "aligned_alloc(" << align << ", 64)";
    free(p);
    errno = 0;
    void* q = memalign(Opaque(align), 64);
    EXPECT_EQ(q, nullptr) << "memalign(" << align << ", 64)";
    EXPECT_EQ(errno, EINVAL) << "memalign(" << align << ", 64)";
    free(q);
    if (&tc_memalign != nullptr) {
      errno = 0;
      void* r = tc_memalign(Opaque(align), 64);
      EXPECT_EQ(r, nullptr) << "tc_memalign(" << align << ", 64)";
      EXPECT_EQ(errno, EINVAL) << "tc_memalign(" << align << ", 64)";
      free(r);
    }
  }
}

TEST(AlignedAllocAndMemalign, ImpossibleSizesFailWithEnomem) {
  const struct {
    size_t align, size;
  } cases[] = {{64, SIZE_MAX},
               {4096, SIZE_MAX - 100},
               {kMiB, SIZE_MAX - kMiB / 2},
               {16, static_cast<size_t>(PTRDIFF_MAX) + 1},
               {8, size_t{1} << 48}};
  for (const auto& c : cases) {
    errno = 0;
    void* p = aligned_alloc(Opaque(c.align), Opaque(c.size));
    EXPECT_EQ(p, nullptr) << "aligned_alloc(" << c.align << ", " << c.size << ")";
    EXPECT_EQ(errno, ENOMEM) << "aligned_alloc(" << c.align << ", " << c.size << ")";
    free(p);
    errno = 0;
    void* q = memalign(Opaque(c.align), Opaque(c.size));
    EXPECT_EQ(q, nullptr) << "memalign(" << c.align << ", " << c.size << ")";
    EXPECT_EQ(errno, ENOMEM) << "memalign(" << c.align << ", " << c.size << ")";
    free(q);
  }
  // An alignment no address range can satisfy: must fail, not loop or wrap.
  errno = 0;
  void* r = memalign(Opaque(size_t{1} << 63), 1);
  EXPECT_EQ(r, nullptr);
  EXPECT_TRUE(errno == ENOMEM || errno == EINVAL) << "errno " << errno;
  free(r);
}

TEST(AlignedAllocAndMemalign, AlignedBlocksCanBeReallocatedAndFreedSized) {
  for (size_t align : {size_t{64}, size_t{4096}, size_t{65536}, kMiB}) {
    void* p = memalign(Opaque(align), 1000);
    ASSERT_NE(p, nullptr);
    FillPattern(p, 1000, 77);
    void* q = realloc(p, Opaque(size_t{500000}));
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(CheckPattern(q, 1000, 77)) << align;
    EXPECT_TRUE(IsAligned(q, 16));
    void* r = realloc(q, Opaque(size_t{10}));
    ASSERT_NE(r, nullptr);
    EXPECT_TRUE(CheckPattern(r, 10, 77)) << align;
    free(r);
    if (&free_sized != nullptr) {
      void* s = aligned_alloc(Opaque(align), 3 * align);
      ASSERT_NE(s, nullptr);
      free_sized(s, 3 * align);
    }
  }
}

}  // namespace
