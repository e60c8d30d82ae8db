// FindBlock: every byte of a block maps to that block's start, size and class; the bytes
// around and between blocks, freed runs and foreign addresses are "not ours".
#include "core/block_lookup.h"

#include <gtest/gtest.h>

#include "core/size_classes.h"
#include "test_heap.h"

namespace tcm {
namespace {

using testing::TestHeap;

TEST(BlockLookup, PageRunIsOneBlock) {
  auto t = TestHeap::Make();
  Span* run;
  {
    SpinLockHolder h(t->heap.lock());
    run = t->heap.New(Length{4});
  }
  ASSERT_NE(run, nullptr);
  const uintptr_t start = run->start_addr();
  const size_t bytes = Length{4}.bytes();
  for (uintptr_t a : {start, start + 1, start + kPageSize - 1, start + 3 * kPageSize, start + bytes - 1}) {
    const Block b = FindBlock(t->pagemap, a);
    ASSERT_TRUE(b.found()) << a - start;
    EXPECT_EQ(b.start, start);
    EXPECT_EQ(b.size, bytes);
    EXPECT_EQ(b.cl, 0u);
    EXPECT_EQ(b.span, run);
  }
  // Just past the run: not this block (some other span's or nobody's).
  const Block after = FindBlock(t->pagemap, start + bytes);
  EXPECT_TRUE(!after.found() || after.start >= start + bytes);
  {
    SpinLockHolder h(t->heap.lock());
    t->heap.Delete(run);
  }
  EXPECT_FALSE(FindBlock(t->pagemap, start).found()) << "a freed run is not a block";
  EXPECT_FALSE(FindBlock(t->pagemap, start + bytes - 1).found());
}

TEST(BlockLookup, SmallObjectSpanMapsEveryByteToItsObject) {
  // A class whose size does not divide the span: the span ends in a tail with no object.
  size_t cl = 0;
  for (size_t c = 1; c < kNumClasses && cl == 0; ++c)
    if ((SizeMap::ClassPages(c) * kPageSize) % SizeMap::ClassSize(c) != 0) cl = c;
  ASSERT_NE(cl, 0u);
  const size_t size = SizeMap::ClassSize(cl);
  auto t = TestHeap::Make();
  Span* span;
  {
    SpinLockHolder h(t->heap.lock());
    span = t->heap.New(Length{SizeMap::ClassPages(cl)});
    ASSERT_NE(span, nullptr);
    t->heap.RegisterSizeClass(span, static_cast<uint8_t>(cl));
  }
  const uintptr_t start = span->start_addr();
  const size_t objects = SizeMap::ObjectsPerSpan(cl);
  for (size_t i = 0; i < objects; i += (objects > 64 ? objects / 64 : 1)) {
    const uintptr_t obj = start + i * size;
    for (uintptr_t a : {obj, obj + size / 2, obj + size - 1}) {
      const Block b = FindBlock(t->pagemap, a);
      ASSERT_TRUE(b.found()) << "object " << i;
      EXPECT_EQ(b.start, obj);
      EXPECT_EQ(b.size, size);
      EXPECT_EQ(b.cl, cl);
      EXPECT_EQ(b.span, span);
    }
  }
  const uintptr_t tail = start + objects * size;
  const uintptr_t span_end = start + SizeMap::ClassPages(cl) * kPageSize;
  ASSERT_LT(tail, span_end);
  EXPECT_FALSE(FindBlock(t->pagemap, tail).found()) << "the tail holds no object";
  EXPECT_FALSE(FindBlock(t->pagemap, span_end - 1).found());
}

TEST(BlockLookup, ForeignAddressesAreNotOurs) {
  auto t = TestHeap::Make();
  int on_stack = 0;
  EXPECT_FALSE(FindBlock(t->pagemap, 0).found());
  EXPECT_FALSE(FindBlock(t->pagemap, reinterpret_cast<uintptr_t>(&on_stack)).found());
  EXPECT_FALSE(FindBlock(t->pagemap, uintptr_t{1} << kAddressBits).found());
  EXPECT_FALSE(FindBlock(t->pagemap, ~uintptr_t{0}).found());
}

}  // namespace
}  // namespace tcm
