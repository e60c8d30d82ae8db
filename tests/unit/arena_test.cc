// Arena and MetadataFreeList: where every piece of allocator metadata comes from. The
// arena must hand out zeroed, aligned, non-overlapping memory (the allocator never clears
// what it gets) and account for it; large requests must not be truncated to a chunk.
#include "core/arena.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include <sys/mman.h>

namespace tcm {
namespace {

bool AllZero(const void* p, size_t n) {
  const unsigned char* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i)
    if (c[i] != 0) return false;
  return true;
}

// [start, end) ranges must not overlap.
void ExpectDisjoint(std::vector<std::pair<uintptr_t, uintptr_t>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    ASSERT_LE(ranges[i - 1].second, ranges[i].first) << "overlapping arena blocks";
}

TEST(Arena, StartsEmpty) {
  Arena arena;
  EXPECT_EQ(arena.bytes_reserved(), 0u);
  EXPECT_EQ(arena.bytes_used(), 0u);
}

TEST(Arena, AlignedZeroedDisjointBlocks) {
  Arena arena;
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
  size_t used = 0;
  for (int round = 0; round < 50; ++round) {
    for (size_t align : {8, 16, 64, 256, 4096}) {
      for (size_t bytes : {1, 24, 100, 4097}) {
        void* p = arena.Alloc(bytes, align);
        ASSERT_NE(p, nullptr);
        const uintptr_t a = reinterpret_cast<uintptr_t>(p);
        EXPECT_EQ(a % align, 0u) << "align " << align;
        ASSERT_TRUE(AllZero(p, bytes)) << "bytes " << bytes;
        memset(p, 0xEE, bytes);  // a later block must not see these bytes
        ranges.push_back({a, a + bytes});
        used += bytes;
      }
    }
  }
  ExpectDisjoint(ranges);
  // used counts what was asked for; reserved is what came from the OS, in whole pages.
  EXPECT_EQ(arena.bytes_used(), used);
  EXPECT_GE(arena.bytes_reserved(), used);
  EXPECT_EQ(arena.bytes_reserved() % 4096, 0u);
}

TEST(Arena, SmallRequestsShareAChunk) {
  Arena arena;
  ASSERT_NE(arena.Alloc(64), nullptr);
  const size_t reserved = arena.bytes_reserved();
  EXPECT_GT(reserved, 0u);
  // Metadata is tiny; one chunk serves many objects instead of one mmap each.
  for (int i = 0; i < 100; ++i) ASSERT_NE(arena.Alloc(64), nullptr);
  EXPECT_EQ(arena.bytes_reserved(), reserved);
  EXPECT_EQ(arena.bytes_used(), 101u * 64);
}

TEST(Arena, LargeRequestsBiggerThanAChunk) {
  Arena arena;
  void* small = arena.Alloc(32);
  ASSERT_NE(small, nullptr);
  const size_t reserved = arena.bytes_reserved();
  for (size_t bytes : {size_t{300} * 1024, size_t{2} << 20}) {
    const size_t before = arena.bytes_reserved();
    char* p = static_cast<char*>(arena.Alloc(bytes, 4096));
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
    EXPECT_TRUE(AllZero(p, bytes));
    memset(p, 1, bytes);  // the whole block is mapped
    EXPECT_GE(arena.bytes_reserved() - before, bytes);
  }
  EXPECT_GT(arena.bytes_reserved(), reserved);
  EXPECT_EQ(arena.bytes_used(), 32u + 300 * 1024 + (2u << 20));
  // Still usable for small requests afterwards.
  void* after = arena.Alloc(32);
  ASSERT_NE(after, nullptr);
  EXPECT_TRUE(AllZero(after, 32));
}

// A block of 16 KiB or more (a transfer cache's array, a slab, a pagemap node) is a mapping
// of its own whose record lives elsewhere, so none of its pages is resident before it is
// written. With the record at the start of each block's chunk, every such array kept one
// page resident from start-up on (~20 at start-up: 80 KiB of the baseline RSS).
TEST(Arena, LargeBlocksStayUntouchedUntilWritten) {
  Arena arena;
  ASSERT_NE(arena.Alloc(64), nullptr);
  constexpr size_t kBytes = 64 * 1024;
  for (int i = 0; i < 20; ++i) {
    const uintptr_t block = reinterpret_cast<uintptr_t>(arena.Alloc(kBytes, 64));
    ASSERT_NE(block, 0u);
    const uintptr_t first = block & ~uintptr_t{4095};
    const uintptr_t last = (block + kBytes + 4095) & ~uintptr_t{4095};
    std::vector<unsigned char> resident((last - first) / 4096);
    ASSERT_EQ(mincore(reinterpret_cast<void*>(first), last - first, resident.data()), 0);
    for (size_t k = 0; k < resident.size(); ++k) EXPECT_EQ(resident[k] & 1, 0) << "block " << i << " page " << k;
  }
}

// The heap checker leaves metadata out of its roots by these ranges: every block handed
// out lies in one of them, and together they are what was reserved.
TEST(Arena, ChunksCoverEveryBlockAndAddUpToWhatWasReserved) {
  Arena arena;
  std::vector<std::pair<uintptr_t, uintptr_t>> blocks;
  for (size_t bytes : {size_t{64}, size_t{100} * 1024, size_t{300} * 1024, size_t{48}, size_t{4096}}) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(arena.Alloc(bytes, bytes == 4096 ? 4096 : 16));
    ASSERT_NE(p, 0u);
    blocks.push_back({p, p + bytes});
  }
  std::vector<std::pair<uintptr_t, uintptr_t>> chunks;
  arena.ForEachChunk(
      [](uintptr_t lo, uintptr_t hi, void* ctx) {
        static_cast<std::vector<std::pair<uintptr_t, uintptr_t>>*>(ctx)->push_back({lo, hi});
      },
      &chunks);
  size_t total = 0;
  for (const auto& c : chunks) total += c.second - c.first;
  EXPECT_EQ(total, arena.bytes_reserved());
  for (const auto& b : blocks) {
    bool inside = false;
    for (const auto& c : chunks) inside |= c.first <= b.first && b.second <= c.second;
    EXPECT_TRUE(inside) << "block at " << b.first << " in no chunk";
  }
  ExpectDisjoint(chunks);
}

TEST(Arena, ConcurrentAllocationsAreDisjoint) {
  Arena arena;
  constexpr int kThreads = 4, kPerThread = 2000;
  std::vector<std::vector<std::pair<uintptr_t, uintptr_t>>> per(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&arena, &per, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const size_t bytes = 16 + static_cast<size_t>(i % 7) * 40;
        void* p = arena.Alloc(bytes, 16);
        if (p == nullptr) return;
        memset(p, t + 1, bytes);
        const uintptr_t a = reinterpret_cast<uintptr_t>(p);
        per[t].push_back({a, a + bytes});
      }
    });
  }
  for (auto& th : threads) th.join();
  std::vector<std::pair<uintptr_t, uintptr_t>> all;
  for (auto& v : per) {
    EXPECT_EQ(v.size(), static_cast<size_t>(kPerThread));
    all.insert(all.end(), v.begin(), v.end());
  }
  ExpectDisjoint(all);
}

struct Meta {
  uint64_t a;
  uint64_t b[5];
};

TEST(MetadataFreeList, RecyclesZeroedStorage) {
  Arena arena;
  MetadataFreeList<Meta> list;
  Meta* x = list.New(&arena);
  Meta* y = list.New(&arena);
  ASSERT_TRUE(x && y);
  EXPECT_NE(x, y);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(x) % alignof(Meta), 0u);
  EXPECT_TRUE(AllZero(x, sizeof(Meta)));
  EXPECT_EQ(list.in_use(), 2u);
  EXPECT_EQ(list.free_count(), 0u);

  x->a = 42;
  x->b[4] = 7;
  list.Delete(x);
  EXPECT_EQ(list.in_use(), 1u);
  EXPECT_EQ(list.free_count(), 1u);
  const size_t used = arena.bytes_used();
  // The freed object is reused (no new arena memory) and comes back zeroed, although the
  // free list stored its link in it.
  Meta* z = list.New(&arena);
  EXPECT_EQ(z, x);
  EXPECT_TRUE(AllZero(z, sizeof(Meta)));
  EXPECT_EQ(arena.bytes_used(), used);
  EXPECT_EQ(list.in_use(), 2u);
  EXPECT_EQ(list.free_count(), 0u);
}

}  // namespace
}  // namespace tcm
