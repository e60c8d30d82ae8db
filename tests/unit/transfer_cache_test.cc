// TransferCache: whole batches in and out, last in first out, within the byte and object
// bounds; a maintenance drain of what sat below the low-water mark, oldest first; an empty
// cache that answers without its lock.
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

// A cache of `object_size` bytes and batches of `batch`, with its own storage.
struct Cache {
  Cache(size_t object_size, int batch) : storage(static_cast<size_t>(TransferCache::capacity_for(object_size, batch))) {
    tc.Init(object_size, batch, storage.data());
  }
  std::vector<void*> storage;
  TransferCache tc;
};

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
  Cache c(4096, 4);
  TransferCache& tc = c.tc;
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
  Cache c(65536, 2);
  TransferCache& tc = c.tc;
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

// Batches a CPU freed of a class it allocates too park one batch for big objects, and the
// whole capacity for anything on its way to other CPUs; small objects use it all either way.
TEST(TransferCache, LocalBatchesOfBigObjectsParkOneBatch) {
  Cache big(32768, 2);
  ASSERT_GT(big.tc.capacity(), 2);
  EXPECT_EQ(big.tc.local_capacity(), 2);
  ASSERT_TRUE(big.tc.TryInsert(Batch(2, 0).data(), /*local=*/true));
  EXPECT_TRUE(big.tc.LooksFull(true));
  EXPECT_FALSE(big.tc.TryInsert(Batch(2, 2).data(), true));
  EXPECT_FALSE(big.tc.LooksFull());
  ASSERT_TRUE(big.tc.TryInsert(Batch(2, 2).data()));  // crossing CPUs: the whole capacity
  EXPECT_EQ(big.tc.free_objects(), 4u);
  Cache small(4096, 16);
  EXPECT_EQ(small.tc.local_capacity(), small.tc.capacity());
  for (int i = 0; i < small.tc.capacity() / 16; ++i)
    ASSERT_TRUE(small.tc.TryInsert(Batch(16, static_cast<uintptr_t>(16 * i)).data(), true));
}

TEST(TransferCache, NoStorageMeansNoRoom) {
  TransferCache tc;
  tc.Init(64, 32, nullptr);
  EXPECT_EQ(tc.capacity(), 0);
  EXPECT_FALSE(tc.TryInsert(Batch(32, 0).data()));
  void* out[32];
  EXPECT_FALSE(tc.TryRemove(out));
  EXPECT_EQ(tc.DrainBelowLowWater([](void* const*, int) {}), 0);
  tc.Drain([](void* const*, int) { ADD_FAILURE() << "nothing to drain"; });
}

// Refills that find the cache empty (a working set bigger than the cache) do not wait for
// its lock: here another thread holds it, and the empty answer still comes at once.
TEST(TransferCache, AnEmptyCacheAnswersWithoutItsLock) {
  Cache c(64, 32);
  TransferCache& tc = c.tc;
  void* out[32];
  tc.lock()->Lock();
  auto removed = std::async(std::launch::async, [&] { return tc.TryRemove(out); });
  const bool answered = removed.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  tc.lock()->Unlock();
  EXPECT_TRUE(answered) << "TryRemove waited for the lock of an empty cache";
  EXPECT_FALSE(removed.get());
}

// The maintenance drain gives back what sat unused for a whole interval: nothing that
// arrived since the previous tick, everything once an interval passes without a remove.
TEST(TransferCache, AnIdleCacheDrainsAfterAWholeInterval) {
  Cache c(64, 32);
  TransferCache& tc = c.tc;
  ASSERT_TRUE(tc.TryInsert(Batch(32, 0).data()));
  ASSERT_TRUE(tc.TryInsert(Batch(32, 32).data()));
  size_t drained = 0;
  auto count = [&](void* const*, int n) { drained += static_cast<size_t>(n); };
  EXPECT_EQ(tc.DrainBelowLowWater(count), 0);  // arrived in this interval: kept
  EXPECT_EQ(tc.free_objects(), 64u);
  EXPECT_EQ(tc.DrainBelowLowWater(count), 64);  // a whole interval unused: drained
  EXPECT_EQ(drained, 64u);
  EXPECT_EQ(tc.free_objects(), 0u);
  // A refill that found it empty, then an insert: new objects wait one interval.
  void* out[32];
  EXPECT_FALSE(tc.TryRemove(out));
  ASSERT_TRUE(tc.TryInsert(Batch(32, 64).data()));
  EXPECT_EQ(tc.DrainBelowLowWater(count), 0);
  EXPECT_EQ(tc.DrainBelowLowWater(count), 32);
  EXPECT_EQ(drained, 96u);
}

// A class in light use (a batch taken and given back each interval) keeps only what that
// use reaches: the batches below it sat unused and go back, the oldest first. A drain
// that waited for an interval without any use kept such a cache full for good.
TEST(TransferCache, LightUseKeepsOnlyWhatItReaches) {
  Cache c(64, 32);
  TransferCache& tc = c.tc;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(tc.TryInsert(Batch(32, static_cast<uintptr_t>(32 * i)).data()));
  std::vector<void*> drained;
  auto collect = [&](void* const* objs, int n) { drained.insert(drained.end(), objs, objs + n); };
  EXPECT_EQ(tc.DrainBelowLowWater(collect), 0);  // the first interval: all arrived in it
  void* out[32];
  for (int tick = 0; tick < 3; ++tick) {
    ASSERT_TRUE(tc.TryRemove(out));
    ASSERT_TRUE(tc.TryInsert(out));
    tc.DrainBelowLowWater(collect);
  }
  // The first tick after light use returned the three batches below it, in their order.
  EXPECT_EQ(tc.free_objects(), 32u);
  std::vector<void*> oldest;
  for (int i = 0; i < 3; ++i) {
    const std::vector<void*> b = Batch(32, static_cast<uintptr_t>(32 * i));
    oldest.insert(oldest.end(), b.begin(), b.end());
  }
  EXPECT_EQ(drained, oldest);
  // The batch in use stays while it is used, whole.
  ASSERT_TRUE(tc.TryRemove(out));
  EXPECT_EQ(std::vector<void*>(out, out + 32), Batch(32, 96));
}

// After a drain from the bottom the cache fills to its capacity again (the room below is
// reused), and its batches come out whole and last in first out.
TEST(TransferCache, RoomADrainLeftBelowIsUsedAgain) {
  Cache c(65536, 2);
  TransferCache& tc = c.tc;
  const int batches = tc.capacity() / 2;
  ASSERT_GE(batches, 3);
  for (int i = 0; i < batches; ++i) ASSERT_TRUE(tc.TryInsert(Batch(2, static_cast<uintptr_t>(2 * i)).data()));
  auto none = [](void* const*, int) {};
  tc.DrainBelowLowWater(none);
  void* out[2];
  ASSERT_TRUE(tc.TryRemove(out));  // the low-water mark: all but one batch
  ASSERT_TRUE(tc.TryInsert(out));
  EXPECT_EQ(tc.DrainBelowLowWater(none), 2 * (batches - 1));
  for (int i = 0; i < batches - 1; ++i) ASSERT_TRUE(tc.TryInsert(Batch(2, static_cast<uintptr_t>(1000 + 2 * i)).data())) << i;
  EXPECT_TRUE(tc.LooksFull());
  EXPECT_FALSE(tc.TryInsert(Batch(2, 5000).data()));
  for (int i = batches - 2; i >= 0; --i) {
    ASSERT_TRUE(tc.TryRemove(out));
    EXPECT_EQ(std::vector<void*>(out, out + 2), Batch(2, static_cast<uintptr_t>(1000 + 2 * i))) << i;
  }
  ASSERT_TRUE(tc.TryRemove(out));
  EXPECT_EQ(std::vector<void*>(out, out + 2), Batch(2, static_cast<uintptr_t>(2 * (batches - 1))));
  EXPECT_FALSE(tc.TryRemove(out));
}

// A refill during a drain (between its pieces, when the lock is free) takes a whole batch
// from the top; the drain hands on objects from the bottom, and no object goes out twice.
TEST(TransferCache, ADrainAndRefillsShareNoObject) {
  Cache c(16, 128);  // 32768 objects: a drain of many pieces
  TransferCache& tc = c.tc;
  const int total = tc.capacity();
  for (int i = 0; i < total; i += 128) ASSERT_TRUE(tc.TryInsert(Batch(128, static_cast<uintptr_t>(i)).data()));
  auto none = [](void* const*, int) {};
  tc.DrainBelowLowWater(none);  // starts an interval with everything below the mark
  std::vector<int> seen(static_cast<size_t>(total), 0);
  auto see = [&](void* const* objs, int n) {
    for (int i = 0; i < n; ++i) ++seen[(reinterpret_cast<uintptr_t>(objs[i]) - 0x10000) / 16];
  };
  int refills = 0;
  auto drain_piece = [&](void* const* objs, int n) {
    see(objs, n);
    void* out[128];
    if (tc.TryRemove(out)) {  // another CPU's refill, mid-drain
      see(out, 128);
      EXPECT_EQ(std::vector<void*>(out, out + 128), Batch(128, static_cast<uintptr_t>(total - 128 * ++refills)));
    }
  };
  tc.DrainBelowLowWater(drain_piece);
  EXPECT_GT(refills, 0);
  EXPECT_EQ(tc.free_objects(), 0u);
  for (int i = 0; i < total; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)], 1) << i;
}

}  // namespace
}  // namespace tcm
