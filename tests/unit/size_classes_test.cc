// Size classes: the table the whole allocator rounds through. The header's static_asserts
// check shape; these tests check the promises made to callers (smallest fitting class,
// bounded rounding waste, span packing) exhaustively over every small request size.
#include "core/size_classes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>

namespace tcm {
namespace {

TEST(SizeClasses, CountIsAboutWhatTheDesignSays) {
  // kNumClasses counts class 0 ("not a small object") too.
  EXPECT_GE(kNumClasses - 1, 88u);
  EXPECT_LE(kNumClasses - 1, 100u);
  EXPECT_EQ(SizeMap::ClassSize(0), 0u);
  EXPECT_EQ(SizeMap::ClassSize(kNumClasses - 1), kMaxSize);
}

TEST(SizeClasses, ObjectIndexIsExactForEveryOffsetOfEverySpan) {
  // The hardening checks find an object's index without a division; one wrong offset would
  // let an interior pointer through or reject a good one.
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    const size_t size = SizeMap::ClassSize(cl);
    const size_t span_bytes = SizeMap::ClassPages(cl) * kPageSize;
    size_t failures = 0;
    for (size_t off = 0; off < span_bytes && failures < 5; ++off)
      if (SizeMap::ObjectIndex(cl, off) != off / size) {
        ADD_FAILURE() << "class " << cl << " offset " << off;
        ++failures;
      }
  }
}

TEST(SizeClasses, ExactObjectIndexIsTheQuotientAndSaysWhetherTheOffsetStartsABlock) {
  // Every offset of every class's span, and offsets past it: the batch checks rely on the
  // index (a bit of the span's bitmap) and on the block-start answer for each of them.
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    const size_t size = SizeMap::ClassSize(cl);
    const uint64_t magic = SizeMap::kDivisionMagic[cl];
    const size_t span_bytes = SizeMap::ClassPages(cl) * kPageSize;
    size_t failures = 0;
    auto check = [&](size_t off) {
      bool starts = false;
      const size_t index = SizeMap::ExactObjectIndex(magic, off, &starts);
      if (index != off / size || starts != (off % size == 0) || SizeMap::StartsObject(magic, off) != starts) {
        ADD_FAILURE() << "class " << cl << " (" << size << " B) offset " << off << ": index " << index << ", starts "
                      << starts;
        ++failures;
      }
    };
    for (size_t off = 0; off < 2 * span_bytes && failures < 5; ++off) check(off);
    // Up to 2^32 (what the check allows): near multiples of the size.
    for (size_t k = uint64_t{1} << 32 >> 12; k <= (uint64_t{1} << 32) / size && failures < 5; k += (k >> 4) + 1)
      for (size_t d : {size_t{0}, size_t{1}, size - 1}) check(k * size - d);
  }
  // A stale span's offset (anything, up to 2^64 - 1) must not come out as a small index.
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    bool starts = false;
    for (uint64_t off : {uint64_t{1} << 32, uint64_t{1} << 40, ~uint64_t{0} - 7, ~uint64_t{0}})
      EXPECT_GE(SizeMap::ExactObjectIndex(SizeMap::kDivisionMagic[cl], off, &starts), SizeMap::ObjectsPerSpan(cl))
          << "class " << cl << " offset " << off;
  }
}

TEST(SizeClasses, TheThirtyTwoBitBlockStartTestIsExactBelowSixtyFourKiB) {
  // The vectorised batch check relies on it for every offset below 2^16 of every class up
  // to 64 KiB (spans of up to 64 KiB of blocks take that path).
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    const size_t size = SizeMap::ClassSize(cl);
    if (size > SizeMap::kSmallOffsetLimit) continue;
    const uint32_t magic32 = SizeMap::kDivisionMagic32[cl];
    size_t failures = 0;
    for (uint32_t off = 0; off < SizeMap::kSmallOffsetLimit && failures < 5; ++off)
      if (SizeMap::StartsObjectSmall(magic32, off) != (off % size == 0)) {
        ADD_FAILURE() << "class " << cl << " (" << size << " B) offset " << off;
        ++failures;
      }
  }
}

TEST(SizeClasses, EightByteObjectsCostEightBytes) {
  // The design's space claim: N 8-byte objects take ~8N bytes, so 1..8 share an exact class.
  EXPECT_EQ(SizeMap::ClassSize(1), 8u);
  for (size_t s = 1; s <= 8; ++s) EXPECT_EQ(SizeMap::ClassIndex(s), 1u) << "size " << s;
}

TEST(SizeClasses, EveryRequestGetsTheSmallestFittingClassWithBoundedWaste) {
  size_t failures = 0;
  for (size_t size = 1; size <= kMaxSize && failures < 10; ++size) {
    const size_t cl = SizeMap::ClassIndex(size);
    ASSERT_GE(cl, 1u);
    ASSERT_LT(cl, kNumClasses);
    const size_t got = SizeMap::ClassSize(cl);
    bool ok = true;
    // Fits.
    ok &= got >= size;
    // Smallest: the class just below is too small (classes are strictly increasing).
    ok &= cl == 1 || SizeMap::ClassSize(cl - 1) < size;
    // Rounding waste: at most 15 B for tiny requests, at most 12.5% above 128 B.
    ok &= got - size <= std::max<size_t>(15, size / 8);
    if (!ok) {
      ++failures;
      ADD_FAILURE() << "size " << size << " -> class " << cl << " (" << got << " B)";
    }
  }
  EXPECT_EQ(failures, 0u);
}

TEST(SizeClasses, ClassSizesAreIncreasingAndGlibcAligned) {
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    const size_t s = SizeMap::ClassSize(cl);
    if (cl > 1) {
      EXPECT_GT(s, SizeMap::ClassSize(cl - 1)) << "class " << cl;
    }
    // glibc guarantees 16-byte alignment for requests >= 16; programs rely on it.
    if (s >= 16) {
      EXPECT_EQ(s % 16, 0u) << "class " << cl << " size " << s;
    }
    // Each class size maps back to itself (ClassIndex is a fixed point on class sizes).
    EXPECT_EQ(SizeMap::ClassIndex(s), cl) << "size " << s;
  }
}

TEST(SizeClasses, SpansHoldObjectsWithLittleTailWaste) {
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    const size_t size = SizeMap::ClassSize(cl);
    const size_t span = SizeMap::ClassPages(cl) * kPageSize;
    ASSERT_GE(SizeMap::ClassPages(cl), 1u) << "class " << cl;
    const size_t objs = SizeMap::ObjectsPerSpan(cl);
    EXPECT_GE(objs, 1u) << "class " << cl;
    EXPECT_EQ(objs, span / size) << "class " << cl;
    EXPECT_LE(objs * size, span) << "class " << cl;
    // The unusable tail of a span is at most 1/8 of it, and 1/32 below 4 KiB, where it
    // shares an OS page with the last object (resident while the span is in use).
    EXPECT_LE(span - objs * size, span / 8) << "class " << cl << " size " << size;
    if (size < 4096) {
      EXPECT_LE(span - objs * size, span / 32) << "class " << cl << " size " << size;
    }
  }
}

TEST(SizeClasses, BigClassesHaveOneObjectSpans) {
  // A span returns to the page heap only when all its objects are free: from
  // kFewObjectsSize up, one live object must not pin a free one (issue 12, t-test1 64 KiB).
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    if (SizeMap::ClassSize(cl) < size_class_internal::kFewObjectsSize) continue;
    EXPECT_EQ(SizeMap::ObjectsPerSpan(cl), 1u) << "class " << cl << " size " << SizeMap::ClassSize(cl);
    EXPECT_EQ(SizeMap::ClassPages(cl), (SizeMap::ClassSize(cl) + kPageSize - 1) / kPageSize) << "class " << cl;
  }
}

TEST(SizeClasses, BatchSizesAreBounded) {
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    EXPECT_GE(SizeMap::NumToMove(cl), 2u) << "class " << cl;
    EXPECT_LE(SizeMap::NumToMove(cl), 32u) << "class " << cl;
  }
}

}  // namespace
}  // namespace tcm
