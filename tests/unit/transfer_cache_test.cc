// TransferCache: whole batches in and out, last in first out, within the byte and object
// bounds; a drain that waits for an idle interval; an empty cache that answers without its
// lock.
#include "core/transfer_cache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <vector>

namespace tcm {
namespace {

// Fake objects: the cache stores pointers and never touches what they point to.
void* Obj(uintptr_t i) { return reinterpret_cast<void*>(0x10000 + 16 * i); }

std::vector<void*> Batch(int n, uintptr_t first) {
  std::vector<void*> b;
  for (int i = 0; i < n; ++i) b.push_back(Obj(first + static_cast<uintptr_t>(i)));
  return b;
}

TEST(TransferCache, CapacityIsWholeBatchesWithinTheBounds) {
  // 512 KiB of 16-byte objects would be 32768 objects: the object bound.
  EXPECT_EQ(TransferCache::capacity_for(16, 32), static_cast<int>(TransferCache::kMaxObjects));
  EXPECT_EQ(TransferCache::capacity_for(4096, 16), 128);  // 512 KiB
  EXPECT_EQ(TransferCache::capacity_for(48, 32) % 32, 0);
  EXPECT_LE(TransferCache::capacity_for(48, 32) * 48, static_cast<int>(TransferCache::kMaxBytesPerClass));
  EXPECT_EQ(TransferCache::capacity_for(1 << 20, 2), 2);  // at least one batch
  EXPECT_EQ(TransferCache::capacity_for(16, 0), 0);
}

TEST(TransferCache, BatchesComeBackLastInFirstOutInTheirOrder) {
  std::vector<void*> storage(static_cast<size_t>(TransferCache::capacity_for(4096, 4)));
  TransferCache tc;
  tc.Init(4096, 4, storage.data());
  const std::vector<void*> a = Batch(4, 0), b = Batch(4, 100);
  ASSERT_TRUE(tc.TryInsert(a.data()));
  ASSERT_TRUE(tc.TryInsert(b.data()));
  EXPECT_EQ(tc.free_objects(), 8u);
  void* out[4];
  ASSERT_TRUE(tc.TryRemove(out));
  EXPECT_EQ(std::vector<void*>(out, out + 4), b);
  ASSERT_TRUE(tc.TryRemove(out));
  EXPECT_EQ(std::vector<void*>(out, out + 4), a);
  EXPECT_FALSE(tc.TryRemove(out));
  EXPECT_EQ(tc.free_objects(), 0u);
}

TEST(TransferCache, AFullCacheRefusesAndSaysSo) {
  std::vector<void*> storage(static_cast<size_t>(TransferCache::capacity_for(65536, 2)));
  TransferCache tc;
  tc.Init(65536, 2, storage.data());
  const int batches = tc.capacity() / 2;
  ASSERT_GE(batches, 1);
  for (int i = 0; i < batches; ++i) {
    EXPECT_FALSE(tc.LooksFull());
    ASSERT_TRUE(tc.TryInsert(Batch(2, static_cast<uintptr_t>(2 * i)).data()));
  }
  EXPECT_TRUE(tc.LooksFull());
  EXPECT_FALSE(tc.TryInsert(Batch(2, 1000).data()));
  EXPECT_EQ(tc.free_objects(), static_cast<size_t>(tc.capacity()));
}

TEST(TransferCache, NoStorageMeansNoRoom) {
  TransferCache tc;
  tc.Init(64, 32, nullptr);
  EXPECT_EQ(tc.capacity(), 0);
  EXPECT_FALSE(tc.TryInsert(Batch(32, 0).data()));
  void* out[32];
  EXPECT_FALSE(tc.TryRemove(out));
}

// Refills that find the cache empty (a working set bigger than the cache) do not wait for
// its lock: here another thread holds it, and the empty answer still comes at once.
TEST(TransferCache, AnEmptyCacheAnswersWithoutItsLock) {
  std::vector<void*> storage(static_cast<size_t>(TransferCache::capacity_for(64, 32)));
  TransferCache tc;
  tc.Init(64, 32, storage.data());
  void* out[32];
  tc.lock()->Lock();
  auto removed = std::async(std::launch::async, [&] { return tc.TryRemove(out); });
  const bool answered = removed.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  tc.lock()->Unlock();
  EXPECT_TRUE(answered) << "TryRemove waited for the lock of an empty cache";
  EXPECT_FALSE(removed.get());
}

// DrainIfIdle gives back what sat unused for a whole interval: not what was inserted since
// the previous call, and everything once an interval passes without use.
TEST(TransferCache, DrainIfIdleWaitsForAnIdleInterval) {
  std::vector<void*> storage(static_cast<size_t>(TransferCache::capacity_for(64, 32)));
  TransferCache tc;
  tc.Init(64, 32, storage.data());
  ASSERT_TRUE(tc.TryInsert(Batch(32, 0).data()));
  ASSERT_TRUE(tc.TryInsert(Batch(32, 32).data()));
  size_t drained = 0;
  auto count = [&](void* const*, int n) { drained += static_cast<size_t>(n); };
  tc.DrainIfIdle(count);  // used since the last tick: kept
  EXPECT_EQ(drained, 0u);
  EXPECT_EQ(tc.free_objects(), 64u);
  tc.DrainIfIdle(count);  // a whole interval unused: drained
  EXPECT_EQ(drained, 64u);
  EXPECT_EQ(tc.free_objects(), 0u);
  // Once more after a refill found it empty: an insert is use, so one interval keeps it.
  void* out[32];
  EXPECT_FALSE(tc.TryRemove(out));
  ASSERT_TRUE(tc.TryInsert(Batch(32, 64).data()));
  tc.DrainIfIdle(count);
  EXPECT_EQ(drained, 64u);  // the insert counts as use
  tc.DrainIfIdle(count);
  EXPECT_EQ(drained, 96u);
}

}  // namespace
}  // namespace tcm
