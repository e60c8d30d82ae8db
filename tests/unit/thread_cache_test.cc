// ThreadCache: the slow-start list sizing, garbage collection and budget stealing of the
// design, checked step by step against the design's pseudo-code. Everything runs on one
// thread over private central lists and a private page heap, so every number is exact.
//
// The malloc fast path (PopFromCache in allocation.h) runs on the calling thread's global
// cache; Pop() below does exactly what it does to a list, on our own cache.
#include "core/thread_cache.h"

#include <gtest/gtest.h>

#include "core/freelist_link.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "core/central_freelist.h"
#include "core/size_classes.h"
#include "test_heap.h"
#include "test_links.h"

namespace tcm {
namespace {

using testing::NextOf;

// The design's list state, evolved by its pseudo-code.
struct Model {
  uint32_t length = 0;
  uint32_t max_length = 1;
  uint32_t overages = 0;

  // "if freelist empty: fetch min(max_length, batch); grow max_length". Returns the number
  // of objects fetched (one of them goes to the caller).
  uint32_t Fetch(uint32_t batch) {
    const uint32_t want = std::min(max_length, batch);
    length += want - 1;
    max_length = max_length < batch ? max_length + 1 : std::min(max_length + batch, kMaxListLength);
    return want;
  }
  // "if length > max_length: release min(max_length, batch); adjust max_length".
  void Push(uint32_t batch) {
    ++length;
    if (length <= max_length) return;
    length -= std::min(max_length, batch);
    if (max_length < batch) {
      ++max_length;
    } else if (max_length > batch && ++overages > kMaxOverages) {
      max_length -= batch;
      overages = 0;
    }
  }
};

class ThreadCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (size_t cl = 1; cl < kNumClasses; ++cl)
      central_[cl].Init(static_cast<uint8_t>(cl), &t_->heap, &t_->pagemap);
  }

  ThreadCache* NewCache() {
    ThreadCache* tc = registry_->Create(&t_->arena, central_.get());
    EXPECT_NE(tc, nullptr);
    return tc;
  }

  // What malloc's fast path does on a hit: pop and count (no byte accounting: frees and
  // refills use up room_, and CheckSize() makes it exact; no low-water mark: frees keep it).
  static void* Pop(ThreadCache* tc, size_t cl) {
    ThreadCache::FreeList l = tc->list(cl);
    void* r = l.head;
    if (r == nullptr) return nullptr;
    l.head = NextOf(r);
    l.set_length(l.length() - 1);
    return r;
  }
  // malloc's view: pop, or refill on a miss.
  static void* Malloc(ThreadCache* tc, size_t cl) {
    void* r = Pop(tc, cl);
    return r != nullptr ? r : tc->FetchFromCentral(cl);
  }
  // free's view: the fast path's push and byte accounting and its size check once the
  // room ran out, or the slow path when the list is full (or has no room at all).
  static void Free(ThreadCache* tc, size_t cl, void* p) {
    ThreadCache::FreeList l = tc->list(cl);
    if (l.length() >= l.max_length()) {
      tc->PushSlow(p, cl);
      return;
    }
    if (l.length() < l.recorded_lowater()) l.set_lowater(l.length());
    NextOf(p) = l.head;
    l.head = p;
    l.set_length(l.length() + 1);
    tc->room_ -= static_cast<intptr_t>(SizeMap::ClassSize(cl));
    if (tc->room_ < 0) tc->CheckSize(SizeMap::ClassSize(cl));
  }
  // Empties the list into *held as a program allocating everything would.
  static void Drain(ThreadCache* tc, size_t cl, std::vector<void*>* held) {
    while (void* p = Pop(tc, cl)) held->push_back(p);
  }
  // Objects straight from the central list, for a thread that only frees.
  std::vector<void*> TakeFromCentral(size_t cl, size_t n) {
    std::vector<void*> out;
    while (out.size() < n) {
      void* start;
      void* end;
      int got = central_[cl].RemoveRange(&start, &end, 1);
      EXPECT_EQ(got, 1);
      out.push_back(start);
    }
    return out;
  }
  // size() is the bytes held in the lists.
  static void ExpectSizeMatchesLists(const ThreadCache* tc) {
    size_t held = 0;
    for (size_t cl = 1; cl < kNumClasses; ++cl)
      held += tc->Length(cl) * SizeMap::ClassSize(cl);
    EXPECT_EQ(tc->size(), held);
  }

  std::unique_ptr<testing::TestHeap> t_ = testing::TestHeap::Make();
  std::unique_ptr<CentralFreeList[]> central_{new CentralFreeList[kNumClasses]};
  std::unique_ptr<ThreadCacheRegistry> registry_ = std::make_unique<ThreadCacheRegistry>();
};

TEST_F(ThreadCacheTest, NewCacheStartsSmall) {
  ThreadCache* tc = NewCache();
  EXPECT_EQ(tc->max_size(), kStartCacheSize);
  EXPECT_EQ(tc->size(), 0u);
  EXPECT_EQ(registry_->count(), 1u);
  EXPECT_EQ(tc->list(0).max_length(), 0u);  // class 0 never caches: frees go slow
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    EXPECT_EQ(tc->list(cl).max_length(), 1u) << cl;
    EXPECT_EQ(tc->list(cl).length(), 0u) << cl;
    EXPECT_EQ(tc->list(cl).head, nullptr) << cl;
  }
}

TEST_F(ThreadCacheTest, RefillsFollowTheSlowStartTrajectory) {
  ThreadCache* tc = NewCache();
  const size_t cl = 1;  // 8 bytes: the budget never interferes
  const uint32_t batch = static_cast<uint32_t>(SizeMap::NumToMove(cl));
  ASSERT_EQ(batch, 32u);
  Model m;
  std::vector<void*> held;
  // Enough misses to reach the kMaxListLength cap: 31 slow-start steps, then 256 batches.
  for (int miss = 0; miss < 300; ++miss) {
    ASSERT_EQ(tc->list(cl).length(), 0u);
    void* p = tc->FetchFromCentral(cl);
    ASSERT_NE(p, nullptr);
    held.push_back(p);
    m.Fetch(batch);
    ASSERT_EQ(tc->list(cl).length(), m.length) << "miss " << miss;
    ASSERT_EQ(tc->list(cl).max_length(), m.max_length) << "miss " << miss;
    ExpectSizeMatchesLists(tc);
    Drain(tc, cl, &held);
    m.length = 0;
  }
  EXPECT_EQ(tc->list(cl).max_length(), kMaxListLength);
  // No object was handed out twice.
  std::sort(held.begin(), held.end());
  EXPECT_EQ(std::adjacent_find(held.begin(), held.end()), held.end());
  EXPECT_EQ(tc->LowWater(cl), 0u);
}

TEST_F(ThreadCacheTest, OverflowReleasesABatchAndShrinksPersistentOverflow) {
  ThreadCache* tc = NewCache();
  const size_t cl = 1;
  const uint32_t batch = static_cast<uint32_t>(SizeMap::NumToMove(cl));
  Model m;
  std::vector<void*> held;
  // Grow max_length to 3 batches by allocating: 31 slow-start misses, then 2 batch misses.
  while (m.max_length < 3 * batch) {
    held.push_back(tc->FetchFromCentral(cl));
    m.Fetch(batch);
    Drain(tc, cl, &held);
    m.length = 0;
  }
  ASSERT_EQ(tc->list(cl).max_length(), 3 * batch);

  // Now only free. Each time the list goes past max_length a batch goes back; after
  // kMaxOverages+1 such overflows max_length drops by a batch, down to one batch.
  ASSERT_GT(held.size(), 7 * batch);
  uint32_t overflows = 0;
  for (size_t i = 0; i < held.size(); ++i) {
    const uint32_t before = m.length;
    tc->PushSlow(held[i], cl);
    m.Push(batch);
    if (m.length <= before) ++overflows;
    ASSERT_EQ(tc->list(cl).length(), m.length) << "push " << i;
    ASSERT_EQ(tc->list(cl).max_length(), m.max_length) << "push " << i;
    ASSERT_EQ(tc->list(cl).overages, m.overages) << "push " << i;
  }
  EXPECT_GE(overflows, 2 * (kMaxOverages + 1));
  EXPECT_EQ(tc->list(cl).max_length(), batch);
  ExpectSizeMatchesLists(tc);
}

TEST_F(ThreadCacheTest, FreeOnlyListGrowsToOneBatchAndNoFurther) {
  // A consumer thread that frees objects it never allocated: the list grows by one per
  // overflow up to a batch, so whole batches can move to the central list at once.
  ThreadCache* tc = NewCache();
  const size_t cl = SizeMap::ClassIndex(100);
  const uint32_t batch = static_cast<uint32_t>(SizeMap::NumToMove(cl));
  Model m;
  // Reaching max_length == batch takes 1 + 2 + ... + (batch-1) overflowing objects.
  std::vector<void*> objs = TakeFromCentral(cl, 20 * batch);
  for (size_t i = 0; i < objs.size(); ++i) {
    tc->PushSlow(objs[i], cl);
    m.Push(batch);
    ASSERT_EQ(tc->list(cl).length(), m.length) << "push " << i;
    ASSERT_EQ(tc->list(cl).max_length(), m.max_length) << "push " << i;
  }
  EXPECT_EQ(tc->list(cl).max_length(), batch);
  EXPECT_EQ(tc->list(cl).overages, 0u);
  ExpectSizeMatchesLists(tc);
}

TEST_F(ThreadCacheTest, ScavengeMovesHalfTheLowWaterMark) {
  ThreadCache* tc = NewCache();
  const size_t cl = 1;
  const uint32_t batch = static_cast<uint32_t>(SizeMap::NumToMove(cl));
  Model m;
  std::vector<void*> held;
  while (m.max_length < 3 * batch) {
    held.push_back(tc->FetchFromCentral(cl));
    m.Fetch(batch);
    Drain(tc, cl, &held);
    m.length = 0;
  }
  // 80 objects in the list, below max_length (96): no overflow.
  for (int i = 0; i < 80; ++i) tc->PushSlow(held[static_cast<size_t>(i)], cl);
  ASSERT_EQ(tc->list(cl).length(), 80u);
  // The list was empty since the last collection (low-water mark 0): nothing moves, and
  // max_length is kept (the list was fully used).
  tc->Scavenge();
  EXPECT_EQ(tc->list(cl).length(), 80u);
  EXPECT_EQ(tc->list(cl).max_length(), 3 * batch);
  EXPECT_EQ(tc->LowWater(cl), 80u);

  // 30 allocations, 10 frees: the list never went below 50 since that collection.
  std::vector<void*> popped;
  for (int i = 0; i < 30; ++i) popped.push_back(Pop(tc, cl));
  for (int i = 0; i < 10; ++i) tc->PushSlow(popped[static_cast<size_t>(i)], cl);
  ASSERT_EQ(tc->list(cl).length(), 60u);
  ASSERT_EQ(tc->LowWater(cl), 50u);
  tc->Scavenge();
  EXPECT_EQ(tc->list(cl).length(), 60u - 25u);              // L/2 = 25 objects moved
  EXPECT_EQ(tc->list(cl).max_length(), 2 * batch);          // shrunk by a batch
  EXPECT_EQ(tc->LowWater(cl), 35u);                   // reset to the length
  ExpectSizeMatchesLists(tc);

  // An idle list keeps halving, max_length converges on one batch, and it ends empty.
  tc->Scavenge();
  EXPECT_EQ(tc->list(cl).length(), 35u - 17u);
  EXPECT_EQ(tc->list(cl).max_length(), batch);
  tc->Scavenge();
  EXPECT_EQ(tc->list(cl).length(), 18u - 9u);
  EXPECT_EQ(tc->list(cl).max_length(), batch);  // never below a batch
  for (int i = 0; i < 10 && tc->list(cl).length() > 0; ++i) tc->Scavenge();
  EXPECT_EQ(tc->list(cl).length(), 0u);
  EXPECT_EQ(tc->list(cl).head, nullptr);
  ExpectSizeMatchesLists(tc);
}

TEST_F(ThreadCacheTest, ExhaustedBudgetTriggersCollectionOnFree) {
  // Nothing unclaimed beyond this cache's start: the checks before the budget is exhausted
  // would take it for room (kRoomBlocks). Growth at collection: the test after this one.
  registry_->SetMaxTotal(kStartCacheSize);
  ThreadCache* tc = NewCache();
  const size_t cl = SizeMap::ClassIndex(16 * 1024);
  ASSERT_EQ(SizeMap::ClassSize(cl), 16u * 1024);
  const uint32_t batch = static_cast<uint32_t>(SizeMap::NumToMove(cl));
  ASSERT_EQ(batch, 4u);
  std::vector<void*> held;
  while (tc->list(cl).max_length() < 2 * batch) {  // 1, 2, 3, 4 -> 8
    held.push_back(tc->FetchFromCentral(cl));
    Drain(tc, cl, &held);
  }
  ASSERT_EQ(held.size(), 10u);
  // Four frees fill the 64 KiB budget; the fifth overdraws it and collects.
  for (int i = 0; i < 4; ++i) tc->PushSlow(held[static_cast<size_t>(i)], cl);
  EXPECT_EQ(tc->max_size(), kStartCacheSize);
  tc->PushSlow(held[4], cl);
  // Collection: nothing to move (low-water mark 0); no budget to grow by.
  EXPECT_EQ(tc->list(cl).length(), 5u);
  EXPECT_EQ(tc->LowWater(cl), 5u);
  EXPECT_EQ(tc->max_size(), kStartCacheSize);
  ExpectSizeMatchesLists(tc);
}

  // free's fast path on a cache (the list has room): push, use up room_, check when gone.
  static void FastFree(ThreadCache* tc, size_t cl, void* p) {
    ThreadCache::FreeList l = tc->list(cl);
    if (l.length() >= l.max_length()) return tc->PushSlow(p, cl);
    if (l.length() < l.recorded_lowater()) l.set_lowater(l.length());
    NextOf(p) = l.head;
    l.head = p;
    l.set_length(l.length() + 1);
    tc->room_ -= static_cast<intptr_t>(l.object_size());
    if (tc->room_ < 0) tc->CheckSize(l.object_size());
  }

TEST_F(ThreadCacheTest, ReusingABlockAsLargeAsTheBudgetChecksRarely) {
  // malloc does no byte accounting, so a loop that frees and reallocates one 64 KiB block
  // used up the 64 KiB budget's room on every free and walked every list each time. The
  // first check grows the budget until kRoomBlocks such blocks fit.
  ThreadCache* tc = NewCache();
  const size_t cl = SizeMap::ClassIndex(64 * 1024);
  ASSERT_EQ(SizeMap::ClassSize(cl), 64u * 1024);
  for (int i = 0; i < 1000; ++i) FastFree(tc, cl, Malloc(tc, cl));
  EXPECT_LE(tc->size_checks(), 1000u / kRoomBlocks + 2);
  EXPECT_GE(tc->max_size(), kRoomBlocks * 64 * 1024);
  ExpectSizeMatchesLists(tc);
  EXPECT_LE(tc->size(), 64u * 1024);
}

TEST_F(ThreadCacheTest, OnlyBlocksOfKMinRoomAndMoreGrowTheBudgetBetweenCollections) {
  // A cache holding 56 KiB of its 64 KiB budget: a check after a free of a 1 KiB block
  // leaves the budget alone (blocks under kMinRoom are checked every few frees at worst
  // already; growing for them gave the first of 1000 threads budgets they filled), a check
  // after a free of a 4 KiB block asks for room for kRoomBlocks of them.
  ThreadCache* tc = NewCache();
  const size_t cl = SizeMap::ClassIndex(1024);
  ThreadCache::FreeList l = tc->list(cl);
  for (void* p : TakeFromCentral(cl, 56)) {
    NextOf(p) = l.head;
    l.head = p;
    l.set_length(l.length() + 1);
  }
  tc->CheckSize(1024);
  EXPECT_EQ(tc->max_size(), kStartCacheSize);
  tc->CheckSize(4096);
  EXPECT_GE(tc->max_size(), 56 * 1024 + kRoomBlocks * 4096);
  ExpectSizeMatchesLists(tc);
}

TEST_F(ThreadCacheTest, RoomGrowsOnlyFromTheUnclaimedTotal) {
  // The defeating pattern: with the whole total claimed, the within-budget growth takes
  // nothing (it never steals: the cache is within its budget); the check runs as often as
  // before and the cache still keeps to its budget.
  registry_->SetMaxTotal(2 * kStartCacheSize);
  ThreadCache* other = NewCache();
  ThreadCache* tc = NewCache();
  EXPECT_EQ(tc->max_size(), kStartCacheSize);
  const size_t cl = SizeMap::ClassIndex(64 * 1024);
  for (int i = 0; i < 100; ++i) FastFree(tc, cl, Malloc(tc, cl));
  EXPECT_EQ(other->max_size(), kStartCacheSize);
  EXPECT_EQ(tc->max_size(), kStartCacheSize);
  EXPECT_GT(tc->size_checks(), 50u);
  // Frees of many blocks at once: the cache sheds what exceeds its budget plus the slack.
  std::vector<void*> blocks;
  for (int i = 0; i < 40; ++i) blocks.push_back(Malloc(tc, cl));
  for (void* p : blocks) FastFree(tc, cl, p);
  ExpectSizeMatchesLists(tc);
  EXPECT_LE(tc->size(), tc->max_size() + kOverBudgetSlack + 64 * 1024);
}

TEST_F(ThreadCacheTest, BudgetGrowsFromUnclaimedThenStealsRoundRobin) {
  registry_->SetMaxTotal(4 * kStealAmount);  // 256 KiB for every cache together
  ThreadCache* a = NewCache();
  EXPECT_EQ(a->max_size(), kStartCacheSize);
  // Each collection grows the budget while unclaimed space lasts: 64K -> 256K.
  for (int i = 1; i <= 3; ++i) {
    a->Scavenge();
    EXPECT_EQ(a->max_size(), kStartCacheSize + static_cast<size_t>(i) * kStealAmount);
  }
  // Nothing left and nobody to steal from (a cache never steals from itself).
  a->Scavenge();
  EXPECT_EQ(a->max_size(), 4 * kStealAmount);

  // A second cache starts with what is left unclaimed (nothing: the total is a promise for
  // every thread) and grows by taking from `a`, which is left with at least kMinCacheSize.
  // Stealing moves budget, it never creates any.
  ThreadCache* b = NewCache();
  EXPECT_EQ(b->max_size(), 0u);
  const size_t total = registry_->TotalMaxSize();
  EXPECT_EQ(total, a->max_size() + b->max_size());
  for (int i = 1; i <= 3; ++i) {
    b->Scavenge();
    EXPECT_EQ(b->max_size(), static_cast<size_t>(i) * kStealAmount) << i;
    EXPECT_EQ(a->max_size(), 4 * kStealAmount - static_cast<size_t>(i) * kStealAmount) << i;
    EXPECT_EQ(registry_->TotalMaxSize(), total);
  }
  EXPECT_EQ(a->max_size(), kMinCacheSize);
  b->Scavenge();  // the victim is at the floor: no more stealing
  EXPECT_EQ(b->max_size(), 3 * kStealAmount);
  EXPECT_EQ(a->max_size(), kMinCacheSize);

  // The victim applies the theft to its own accounting at its next collection.
  a->Scavenge();
  ExpectSizeMatchesLists(a);
  EXPECT_EQ(a->size(), 0u);
  EXPECT_EQ(registry_->TotalMaxSize(), total);
}

TEST_F(ThreadCacheTest, OneCacheStopsGrowingAtThePerThreadLimit) {
  // The total would allow 16 MiB, one thread gets at most kMaxThreadCacheSize: a single
  // thread's cache is bounded like one CPU's (issue 12, t-test1 at 64 KiB blocks).
  registry_->SetMaxTotal(16 << 20);
  ThreadCache* a = NewCache();
  for (size_t i = 0; i < (16 << 20) / kStealAmount + 4; ++i) a->Scavenge();
  EXPECT_EQ(a->max_size(), kMaxThreadCacheSize);
  // What it could not take stays unclaimed for other threads.
  ThreadCache* b = NewCache();
  EXPECT_EQ(b->max_size(), kStartCacheSize);
  for (int i = 0; i < 3; ++i) b->Scavenge();
  EXPECT_EQ(b->max_size(), kStartCacheSize + 3 * kStealAmount);
  EXPECT_EQ(a->max_size(), kMaxThreadCacheSize);
}

TEST_F(ThreadCacheTest, DestroyedCacheReturnsItsBudgetNetOfThefts) {
  // Budget is conserved: the sum of the caches' max_size() plus the unclaimed part is
  // always the total. Destroying a cache that was stolen from must give back only what
  // it still had, or the survivor could grow past the total.
  const size_t total = 4 * kStealAmount;
  registry_->SetMaxTotal(total);
  ThreadCache* a = NewCache();
  for (int i = 0; i < 3; ++i) a->Scavenge();
  ASSERT_EQ(a->max_size(), total);
  ThreadCache* b = NewCache();  // nothing left unclaimed: starts with no budget at all
  EXPECT_EQ(b->max_size(), 0u);
  b->Scavenge();                // steals 64 KiB from a, not yet applied by a
  ASSERT_EQ(a->max_size(), total - kStealAmount);
  registry_->Destroy(a);
  for (int i = 0; i < 10; ++i) b->Scavenge();
  EXPECT_EQ(b->max_size(), total);
  EXPECT_EQ(registry_->TotalMaxSize(), total);
}

TEST_F(ThreadCacheTest, FailedRefillLeavesTheListAlone) {
  // No memory at all: the refill fails and slow start does not count it as a use.
  t_->sys.set_enabled(SystemAllocator::kMmap, false);
  t_->sys.set_enabled(SystemAllocator::kSbrk, false);
  ThreadCache* tc = NewCache();
  EXPECT_EQ(tc->FetchFromCentral(1), nullptr);
  EXPECT_EQ(tc->list(1).max_length(), 1u);
  EXPECT_EQ(tc->list(1).length(), 0u);
  EXPECT_EQ(tc->size(), 0u);
}

// A thread that allocates and frees big classes (t-test1's blocks of up to 64 KiB) parks
// one batch of each class's overflow in its transfer cache and sends the rest to the spans,
// where any class can reuse the pages; a thread that only frees a class (a consumer) may
// fill the transfer cache, which is what carries batches from one thread to another.
TEST_F(ThreadCacheTest, BigObjectsParkOneBatchUnlessTheThreadOnlyFreesThem) {
  ThreadCache* tc = NewCache();
  // A working set of big blocks of random classes from 16 to 64 KiB, allocated and freed
  // in random order as the fast paths would (Malloc, Free), so lists overflow,
  // budgets are checked and caches collected as in a program.
  const size_t first = SizeMap::ClassIndex(16384), last = SizeMap::ClassIndex(65536);
  struct Block {
    size_t cl;
    void* p;
  };
  std::vector<Block> slots(400, Block{0, nullptr});
  uint32_t rng = 12345;
  size_t most_over = 0;  // objects parked beyond one batch, at most over the classes
  for (int op = 0; op < 100000; ++op) {
    rng = rng * 1103515245u + 12345u;
    Block& slot = slots[(rng >> 8) % slots.size()];
    if (slot.p == nullptr) {
      slot.cl = first + (rng >> 20) % (last - first + 1);
      slot.p = Malloc(tc, slot.cl);
      ASSERT_NE(slot.p, nullptr);
      continue;
    }
    const size_t cl = slot.cl;
    Free(tc, cl, slot.p);
    slot.p = nullptr;
    const size_t parked = central_[cl].transfer_objects(), batch = SizeMap::NumToMove(cl);
    if (parked > batch) most_over = std::max(most_over, parked - batch);
  }
  EXPECT_EQ(most_over, 0u) << "objects parked beyond one batch of a class";
  for (Block& b : slots)
    if (b.p != nullptr) tc->PushSlow(b.p, b.cl);
  tc->ReleaseAll();

  // Allocated elsewhere (straight from the central list, as other threads' refills would)
  // and freed here only.
  const size_t cl = SizeMap::ClassIndex(32768);
  const size_t batch = SizeMap::NumToMove(cl);
  ASSERT_GT(static_cast<size_t>(central_[cl].transfer_cache()->capacity()), 4 * batch);
  ThreadCache* consumer = NewCache();
  for (void* p : TakeFromCentral(cl, 100)) consumer->PushSlow(p, cl);
  EXPECT_GT(central_[cl].transfer_objects(), 4 * batch);
  consumer->ReleaseAll();
  for (size_t c = first; c <= last; ++c) {
    central_[c].FlushTransferCache();
    central_[c].Verify();
  }
}

TEST_F(ThreadCacheTest, ReleaseAllEmptiesEveryList) {
  ThreadCache* tc = NewCache();
  std::vector<std::pair<size_t, void*>> held;
  // Put a few objects in several lists, as a thread would by allocating and freeing.
  for (size_t cl = 1; cl < kNumClasses; cl += 7) {
    for (int miss = 0; miss < 4; ++miss) {
      void* p = Malloc(tc, cl);
      ASSERT_NE(p, nullptr);
      held.push_back({cl, p});
      std::vector<void*> rest;
      Drain(tc, cl, &rest);
      for (void* q : rest) held.push_back({cl, q});
    }
  }
  for (auto [cl, p] : held) tc->PushSlow(p, cl);
  size_t cached = 0;
  for (size_t cl = 1; cl < kNumClasses; ++cl) cached += tc->list(cl).length();
  ASSERT_GT(cached, 0u);
  tc->ReleaseAll();
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    EXPECT_EQ(tc->list(cl).length(), 0u) << cl;
    EXPECT_EQ(tc->list(cl).head, nullptr) << cl;
    EXPECT_EQ(tc->LowWater(cl), 0u) << cl;
  }
  EXPECT_EQ(tc->size(), 0u);
  for (size_t cl = 1; cl < kNumClasses; ++cl) central_[cl].Verify();

  // Destroy gives the budget back; the registry recycles the cache's memory.
  registry_->Destroy(tc);
  EXPECT_EQ(registry_->count(), 0u);
  EXPECT_EQ(registry_->TotalMaxSize(), 0u);
  ThreadCache* again = NewCache();
  EXPECT_EQ(again, tc);
  EXPECT_EQ(again->max_size(), kStartCacheSize);
}

}  // namespace
}  // namespace tcm

namespace tcm {
namespace {

// The promise of TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES for idle threads: many caches that
// each churned a few hundred blocks and then stopped hold, together, no more than the total
// plus kOverBudgetSlack (+ one object) per cache, however many there are.
TEST_F(ThreadCacheTest, ManyIdleCachesStayWithinTheTotal) {
  const size_t total = 1 << 20;
  registry_->SetMaxTotal(total);
  std::vector<ThreadCache*> caches;
  for (int t = 0; t < 200; ++t) {
    ThreadCache* tc = NewCache();
    caches.push_back(tc);
    std::vector<std::pair<size_t, void*>> blocks;
    for (int i = 0; i < 256; ++i) {
      const size_t cl = 1 + static_cast<size_t>((i * 37 + t) % 60);  // 8 B .. ~1 KiB classes
      blocks.emplace_back(cl, Malloc(tc, cl));
    }
    for (auto [cl, p] : blocks) Free(tc, cl, p);
  }
  size_t held = 0;
  for (ThreadCache* tc : caches) {
    ExpectSizeMatchesLists(tc);
    held += tc->size();
  }
  EXPECT_LE(held, total + caches.size() * (kOverBudgetSlack + 1024)) << "bytes held by idle caches";
  EXPECT_LE(registry_->TotalMaxSize(), total);
}

}  // namespace
}  // namespace tcm
