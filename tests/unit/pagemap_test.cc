// PageMap: the radix tree free() consults for every pointer. Unpopulated parts must read
// as "nothing here" (class 0, no span) without faulting, including addresses the tree can
// never hold, and Ensure must allocate nodes only when needed and fail without damage.
#include "core/pagemap.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>

namespace tcm {
namespace {

// Node allocator with a switch to simulate running out of memory. calloc is fine here:
// the test process uses glibc malloc, and the nodes are zeroed as the contract requires.
// Nodes are leaked on purpose (PageMap never frees them either).
int g_allocs_left = -1;  // < 0: unlimited
int g_allocs_done = 0;
void* TestNodeAlloc(size_t bytes) {
  if (g_allocs_left == 0) return nullptr;
  if (g_allocs_left > 0) --g_allocs_left;
  ++g_allocs_done;
  return calloc(1, bytes);
}

class PageMapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_allocs_left = -1;
    g_allocs_done = 0;
    map_ = std::make_unique<PageMap>(&TestNodeAlloc);
  }
  void TearDown() override { g_allocs_left = -1; }

  // Distinct fake span pointers: the pagemap never dereferences them.
  static Span* Fake(uintptr_t i) { return reinterpret_cast<Span*>((i + 1) * 64); }

  std::unique_ptr<PageMap> map_;
};

constexpr uintptr_t kMaxPage = (uintptr_t{1} << PageMap::kPageBits) - 1;
constexpr uintptr_t kLeafPages = PageMap::kLeafLength;
constexpr uintptr_t kMidPages = PageMap::kLeafLength * PageMap::kMidLength;
constexpr uintptr_t kClassLeafPages = PageMap::kClassLeafLength;

TEST_F(PageMapTest, EmptyMapKnowsNothing) {
  // Lookups of unpopulated pages go through the shared zero nodes: no fault, no allocation.
  for (uintptr_t addr : {uintptr_t{0}, uintptr_t{1}, uintptr_t{4096}, uintptr_t{0x7f0012345678},
                         (uintptr_t{1} << kAddressBits) - 1}) {
    EXPECT_EQ(map_->ClassOf(addr), 0) << std::hex << addr;
    EXPECT_EQ(map_->GetSpan(PageId::FromAddr(addr)), nullptr) << std::hex << addr;
  }
  // Pages beyond 48 bits cannot be in the map at all (free() of a wild pointer must not
  // index past the root).
  for (uintptr_t page : {kMaxPage + 1, uintptr_t{1} << 40, ~uintptr_t{0}})
    EXPECT_EQ(map_->GetSpan(PageId{page}), nullptr) << std::hex << page;
  EXPECT_EQ(map_->node_bytes(), 0u);
  EXPECT_EQ(g_allocs_done, 0);
}

// The allocator's pagemap is a constinit global: its default state must be all zero, so
// it lives in .bss instead of .data with its class root as 2048 load-time relocations (96
// KiB of the library's image resident at start-up, 68 KiB of VmHWM net), and only Init()
// makes the class map readable. Byte-compares a default-constructed
// map with zeros, then checks Init() against the constructor that takes an allocator.
TEST(PageMapInit, DefaultIsAllZeroAndInitMakesTheClassMapReadable) {
  auto storage = std::make_unique<unsigned char[]>(sizeof(PageMap));
  auto* map = new (storage.get()) PageMap();
  for (size_t i = 0; i < sizeof(PageMap); ++i) ASSERT_EQ(storage[i], 0) << "byte " << i << " of a default PageMap";
  EXPECT_FALSE(map->initialized());
  map->Init(&TestNodeAlloc);
  EXPECT_TRUE(map->initialized());
  for (uintptr_t addr : {uintptr_t{0}, uintptr_t{0x7f0012345678}, (uintptr_t{1} << kAddressBits) - 1})
    EXPECT_EQ(map->ClassOf(addr), 0) << std::hex << addr;
  ASSERT_TRUE(map->Ensure(PageId{12345}, Length{1}));
  map->SetClass(PageId{12345}, 7, PageId{12345});
  EXPECT_EQ(map->ClassOf(PageId{12345}.addr()), 7);
  map->Init(&TestNodeAlloc);  // idempotent: a populated slot stays
  EXPECT_EQ(map->ClassOf(PageId{12345}.addr()), 7);
  map->~PageMap();
}
static_assert(std::is_trivially_destructible_v<PageMap>);

TEST_F(PageMapTest, SetAndGetRoundTripEverywhere) {
  // Low, high (last page below 2^48) and pages on both sides of leaf and mid boundaries.
  const uintptr_t pages[] = {0,
                             1,
                             kLeafPages - 1,
                             kLeafPages,
                             kMidPages - 1,
                             kMidPages,
                             kClassLeafPages - 1,  // the class map has its own leaves
                             kClassLeafPages,
                             0x7f0012345678 >> kPageShift,
                             kMaxPage - 1,
                             kMaxPage};
  for (size_t i = 0; i < std::size(pages); ++i) {
    PageId p{pages[i]};
    ASSERT_TRUE(map_->Ensure(p, Length{1})) << std::hex << pages[i];
    map_->Set(p, Fake(i));
    map_->SetClass(p, static_cast<uint8_t>(i + 1), p);
  }
  for (size_t i = 0; i < std::size(pages); ++i) {
    PageId p{pages[i]};
    EXPECT_EQ(map_->GetSpan(p), Fake(i)) << std::hex << pages[i];
    EXPECT_EQ(map_->ClassOf(p.addr()), i + 1) << std::hex << pages[i];
    // Any address inside the page finds the same entry.
    EXPECT_EQ(map_->ClassOf(p.addr() + kPageSize - 1), i + 1) << std::hex << pages[i];
  }
  // Entries are independent: an Ensured but unset neighbour still reads empty.
  EXPECT_EQ(map_->GetSpan(PageId{2}), nullptr);
  EXPECT_EQ(map_->ClassOf(PageId{2}.addr()), 0);
}

// free()'s block-start test reads the offset from the span start out of the class entry
// (the start's low 32 bits beside the class). A span may straddle a multiple of 4 GiB: the
// 32-bit difference must stay exact on both sides of it, on every page of the span, and
// for the largest class number.
TEST_F(PageMapTest, SpanOffsetIsExactOnEveryPageOfASpan) {
  const uintptr_t four_gib_pages = (uintptr_t{1} << 32) >> kPageShift;
  for (const uintptr_t first : {uintptr_t{3}, 5 * four_gib_pages - 2, uintptr_t{0x7f0012345678} >> kPageShift}) {
    const PageId start{first};
    const Length n{5};
    ASSERT_TRUE(map_->Ensure(start, n));
    for (const uint8_t cl : {uint8_t{1}, uint8_t{88}, uint8_t{127}}) {
      for (uintptr_t i = 0; i < n.n; ++i) map_->SetClass(start + Length{i}, cl, start);
      for (const uintptr_t off : {uintptr_t{0}, uintptr_t{8}, kPageSize - 1, kPageSize, 3 * kPageSize + 4104,
                                  n.n * kPageSize - 1}) {
        const uintptr_t addr = start.addr() + off;
        ASSERT_EQ(map_->ClassOf(addr), cl) << std::hex << addr;
        EXPECT_EQ(map_->SpanOffset(addr, cl), off) << std::hex << addr << " class " << int{cl};
      }
    }
    for (uintptr_t i = 0; i < n.n; ++i) map_->SetClass(start + Length{i}, 0, start);
    EXPECT_EQ(map_->ClassOf(start.addr()), 0);
  }
}

// The block-start test on those offsets: an unset row fails every pointer (class 0's never
// is set, so free() needs no test of its own for it), a row that passes every block passes
// interior pointers too (TCMALLOC_HARDENED=0), and an armed 48-byte class (a size that does
// not divide the page, so blocks straddle page boundaries) passes exactly the block starts,
// on every page and across a multiple of 4 GiB.
TEST_F(PageMapTest, BlockStartTestFindsEveryInteriorOffset) {
  constexpr size_t kSize = 48;
  constexpr uint8_t kClass = 4;
  const uintptr_t four_gib_pages = (uintptr_t{1} << 32) >> kPageShift;
  const PageId start{7 * four_gib_pages - 1};
  const Length n{3};
  ASSERT_TRUE(map_->Ensure(start, n));
  for (uintptr_t i = 0; i < n.n; ++i) map_->SetClass(start + Length{i}, kClass, start);
  EXPECT_EQ(map_->LookUpBlock(start.addr() + kPageSize + 5).cl, kClass);
  EXPECT_FALSE(map_->LookUpBlock(start.addr()).block_start) << "an unset row fails every pointer";
  map_->PassEveryBlock(kClass);
  EXPECT_TRUE(map_->LookUpBlock(start.addr() + 16).block_start);
  map_->ArmBlockStartTest(kClass, ~uint64_t{0} / kSize + 1);  // SizeMap::kDivisionMagic's value
  size_t starts = 0;
  for (uintptr_t off = 0; off < n.n * kPageSize; ++off) {
    const bool expected = off % kSize == 0;
    ASSERT_EQ(map_->LookUpBlock(start.addr() + off).block_start, expected) << "offset " << off;
    starts += expected;
  }
  EXPECT_EQ(starts, (n.n * kPageSize + kSize - 1) / kSize);
  // Class 0 (a page of no small-object span, nullptr) fails: the slow path decides.
  EXPECT_FALSE(map_->LookUpBlock(PageId{99}.addr()).block_start);
  EXPECT_EQ(map_->LookUpBlock(PageId{99}.addr()).cl, 0u);
  EXPECT_FALSE(map_->LookUpBlock(0).block_start);
}

TEST_F(PageMapTest, EnsureAcrossLeafAndMidBoundaries) {
  // A range straddling a mid boundary needs two mids and a leaf on each side.
  const PageId start{kMidPages - 3};
  const Length n{6};
  ASSERT_TRUE(map_->Ensure(start, n));
  EXPECT_EQ(map_->node_bytes(), 2 * sizeof(PageMap::Mid) + 2 * sizeof(PageMap::Leaf));
  for (uintptr_t i = 0; i < n.n; ++i) {
    map_->Set(start + Length{i}, Fake(i));
    map_->SetClass(start + Length{i}, 7, start);
  }
  for (uintptr_t i = 0; i < n.n; ++i) {
    EXPECT_EQ(map_->GetSpan(start + Length{i}), Fake(i));
    EXPECT_EQ(map_->ClassOf((start + Length{i}).addr()), 7);
  }
  // A range spanning parts of 4 leaves (in mid 0, which exists now) allocates 4 leaves.
  const size_t before = map_->node_bytes();
  ASSERT_TRUE(map_->Ensure(PageId{10 * kLeafPages + 5}, Length{3 * kLeafPages}));
  EXPECT_EQ(map_->node_bytes() - before, 4 * sizeof(PageMap::Leaf));
  map_->Set(PageId{13 * kLeafPages + 4}, Fake(99));  // last page of the range: covered
  EXPECT_EQ(map_->GetSpan(PageId{13 * kLeafPages + 4}), Fake(99));
}

TEST_F(PageMapTest, NodeBytesGrowOnlyForNewNodes) {
  ASSERT_TRUE(map_->Ensure(PageId{100}, Length{1}));
  const size_t one_leaf = sizeof(PageMap::Mid) + sizeof(PageMap::Leaf);
  EXPECT_EQ(map_->node_bytes(), one_leaf);
  // Same leaf again, or another page of it: nothing new.
  ASSERT_TRUE(map_->Ensure(PageId{100}, Length{1}));
  ASSERT_TRUE(map_->Ensure(PageId{0}, Length{kLeafPages}));
  EXPECT_EQ(map_->node_bytes(), one_leaf);
  EXPECT_EQ(g_allocs_done, 2);
  // Next leaf of the same mid: one leaf.
  ASSERT_TRUE(map_->Ensure(PageId{kLeafPages}, Length{1}));
  EXPECT_EQ(map_->node_bytes(), one_leaf + sizeof(PageMap::Leaf));
  // Empty range: nothing at all.
  ASSERT_TRUE(map_->Ensure(PageId{5 * kMidPages}, Length{0}));
  EXPECT_EQ(map_->node_bytes(), one_leaf + sizeof(PageMap::Leaf));
  EXPECT_EQ(g_allocs_done, 3);
}

TEST_F(PageMapTest, EnsureRejectsRangesBeyondTheAddressSpace) {
  EXPECT_TRUE(map_->Ensure(PageId{kMaxPage}, Length{1}));
  EXPECT_FALSE(map_->Ensure(PageId{kMaxPage}, Length{2}));
  EXPECT_FALSE(map_->Ensure(PageId{kMaxPage + 1}, Length{1}));
  // start + n wraps around: must not be mistaken for a small range.
  EXPECT_FALSE(map_->Ensure(PageId{5}, Length{~uintptr_t{0}}));
}

TEST_F(PageMapTest, EnsureFailsCleanlyWhenOutOfMemory) {
  g_allocs_left = 0;
  EXPECT_FALSE(map_->Ensure(PageId{1234}, Length{1}));
  EXPECT_EQ(map_->node_bytes(), 0u);
  EXPECT_EQ(map_->GetSpan(PageId{1234}), nullptr);

  // The mid succeeds, the leaf fails: the published mid is complete (points at the empty
  // leaf), so lookups still read as empty.
  g_allocs_left = 1;
  EXPECT_FALSE(map_->Ensure(PageId{1234}, Length{1}));
  EXPECT_EQ(map_->node_bytes(), sizeof(PageMap::Mid));
  EXPECT_EQ(map_->GetSpan(PageId{1234}), nullptr);
  EXPECT_EQ(map_->ClassOf(PageId{1234}.addr()), 0);

  // Memory is back: a retry completes the path and reuses the mid.
  g_allocs_left = -1;
  ASSERT_TRUE(map_->Ensure(PageId{1234}, Length{1}));
  EXPECT_EQ(map_->node_bytes(), sizeof(PageMap::Mid) + sizeof(PageMap::Leaf));
  map_->Set(PageId{1234}, Fake(1));
  EXPECT_EQ(map_->GetSpan(PageId{1234}), Fake(1));
}

TEST_F(PageMapTest, ClearingAClassNeverWritesTheSharedEmptyNodes) {
  // Class 0 is what an unpopulated page already reads; clearing one must not allocate or
  // write to the shared zero node that every other unpopulated lookup goes through.
  const PageId far{kMaxPage - 12345};
  map_->SetClass(far, 0, far);
  EXPECT_EQ(map_->ClassOf(far.addr()), 0);
  EXPECT_EQ(map_->ClassOf(PageId{777}.addr()), 0);
  EXPECT_EQ(map_->node_bytes(), 0u);
}

TEST_F(PageMapTest, SetWithoutEnsureCrashes) {
  // Writing through the shared empty nodes would corrupt every unpopulated lookup.
  EXPECT_DEATH(map_->Set(PageId{77}, Fake(0)), "internal check failed");
}

}  // namespace
}  // namespace tcm
