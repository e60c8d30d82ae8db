// api/introspection.h: the profiler's and the checker's view of the allocator, checked
// against blocks this test allocates through the allocator's own entry points.
#include "api/introspection.h"

#include <gtest/gtest.h>

#include <vector>

#include "api/allocation.h"

namespace tcm::introspection {
namespace {

TEST(Introspection, OptionsAreTheParsedTable) {
  const Options& o = AllocatorOptions();
  EXPECT_EQ(&o, &AllocatorOptions()) << "one table for the process";
  // Nothing in this test's environment sets them: gperftools' defaults.
  EXPECT_EQ(o.heap_checker.max_pointer_offset, 1024);
  EXPECT_EQ(o.heap_profiler.inuse_interval, int64_t{100} << 20);
}

TEST(Introspection, BlocksAreFoundFromAnyOfTheirBytes) {
  void* small = tcm::Allocate(100);
  // A page run comes from the slow path anyway; calling it directly also keeps gcc from
  // inlining the fast path's class look-up for a constant it knows is out of range.
  void* large = tcm::AllocateSlow(1 << 20);
  ASSERT_NE(small, nullptr);
  ASSERT_NE(large, nullptr);
  const auto s = reinterpret_cast<uintptr_t>(small);
  const auto l = reinterpret_cast<uintptr_t>(large);

  HeapBlock b = FindHeapBlock(s + 50);
  EXPECT_EQ(b.start, s);
  EXPECT_GE(b.size, 100u);
  b = FindHeapBlock(l + (1 << 20) - 1);
  EXPECT_EQ(b.start, l);
  EXPECT_GE(b.size, size_t{1} << 20);
  int local = 0;
  EXPECT_EQ(FindHeapBlock(reinterpret_cast<uintptr_t>(&local)).start, 0u);
  EXPECT_TRUE(IsHeapMemory(s));
  EXPECT_TRUE(IsHeapMemory(l));
  EXPECT_FALSE(IsHeapMemory(reinterpret_cast<uintptr_t>(&local)));

  LockAllocator();
  const HeapBlock locked = FindHeapBlockWhileLocked(l);
  struct Runs {
    std::vector<std::pair<uintptr_t, uintptr_t>>* out;
  };
  // Collected into memory reserved before the lock: nothing may malloc while it is held.
  std::vector<std::pair<uintptr_t, uintptr_t>> runs;
  UnlockAllocator();
  runs.reserve(1 << 16);
  LockAllocator();
  Runs ctx{&runs};
  ForEachHeapRun(
      [](uintptr_t lo, uintptr_t hi, void* arg) {
        auto* r = static_cast<Runs*>(arg);
        if (r->out->size() < r->out->capacity()) r->out->emplace_back(lo, hi);
      },
      &ctx);
  UnlockAllocator();
  EXPECT_EQ(locked.start, l);
  bool small_covered = false, large_covered = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    ASSERT_LT(runs[i].first, runs[i].second);
    if (i > 0) {
      EXPECT_LE(runs[i - 1].second, runs[i].first) << "in address order, not overlapping";
    }
    small_covered |= runs[i].first <= s && s < runs[i].second;
    large_covered |= runs[i].first <= l && l + (1 << 20) <= runs[i].second;
  }
  EXPECT_TRUE(small_covered);
  EXPECT_TRUE(large_covered);

  tcm::Deallocate(large);
  tcm::Deallocate(small);
  EXPECT_EQ(FindHeapBlock(l).start, 0u) << "a freed page run is no block";
}

TEST(Introspection, AllocatorStaticsAreNotHeapBlocks) {
  std::vector<std::pair<uintptr_t, uintptr_t>> statics;
  statics.reserve(64);
  ForEachAllocatorStatic(
      [](uintptr_t lo, uintptr_t hi, void* arg) {
        static_cast<std::vector<std::pair<uintptr_t, uintptr_t>>*>(arg)->emplace_back(lo, hi);
      },
      &statics);
  ASSERT_GE(statics.size(), 5u);
  for (const auto& [lo, hi] : statics) {
    EXPECT_LT(lo, hi);
    EXPECT_FALSE(IsHeapMemory(lo)) << "static data, not heap pages";
  }
}

TEST(Introspection, UserStackHasTheCaller) {
  void* pcs[64];
  const int depth = CaptureUserStack(pcs, 64);
  EXPECT_GT(depth, 0);
  EXPECT_LE(depth, 64);
  EXPECT_LE(CaptureUserStack(pcs, 2), 2);
}

}  // namespace
}  // namespace tcm::introspection
