// CentralFreeList: batches of objects of one class, carved from page-heap spans and
// returned to the page heap when every object of a span is back. Runs over a private heap
// so the heap's span count shows exactly what the central list holds.
#include "core/central_freelist.h"

#include <gtest/gtest.h>

#include "core/freelist_link.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "core/size_classes.h"
#include "platform/rseq.h"
#include "test_heap.h"
#include "test_links.h"

namespace tcm {
namespace {

using testing::NextOf;
using testing::RawWord;

class CentralFreeListTest : public ::testing::Test {
 protected:
  // kept_spans: the budget its emptied spans may be kept against (nullptr: none kept).
  void Init(size_t cl, ByteBudget* kept_spans = nullptr) {
    cl_ = cl;
    // CentralFreeList holds a lock and list heads: not assignable, so make a fresh one.
    central_ = std::make_unique<CentralFreeList>();
    central_->Init(static_cast<uint8_t>(cl), &t_->heap, &t_->pagemap, true, kept_spans);
  }

  // Takes up to n objects; checks the chain start..end holds `got` objects and appends them
  // to out.
  int Remove(int n, std::vector<void*>* out) {
    void* start = nullptr;
    void* end = nullptr;
    const int got = central_->RemoveRange(&start, &end, n);
    void* obj = start;
    for (int i = 0; i < got; ++i) {
      EXPECT_NE(obj, nullptr);
      out->push_back(obj);
      if (i + 1 < got) obj = NextOf(obj);
    }
    EXPECT_EQ(obj, end);  // (end's next word is unspecified by the contract)
    return got;
  }

  // Takes n objects (a multiple of the transfer batch) from fresh spans a batch at a time,
  // as a per-CPU refill would, and returns them in address order.
  std::vector<void*> RemoveSorted(size_t n) {
    const int batch = central_->transfer_cache()->batch();
    std::vector<void*> objs(n);
    for (size_t i = 0; i < n; i += static_cast<size_t>(batch))
      EXPECT_EQ(central_->RemoveBatch(objs.data() + i, batch), batch);
    std::sort(objs.begin(), objs.end());
    return objs;
  }

  // Takes up to n more objects and drops them: for death tests whose crash is in the taking.
  void RemoveMore(int n) {
    std::vector<void*> more;
    Remove(n, &more);
  }

  // The 8-byte class (whose spans keep lists): eight objects taken from a fresh span, the
  // last seven given back, so objs[1..7] are on the span's list and objs[0] keeps it.
  std::vector<void*> EightByteSpanWithSevenOnItsList() {
    Init(SizeMap::ClassIndex(8));
    std::vector<void*> objs;
    EXPECT_EQ(Remove(8, &objs), 8);
    if (objs.size() == 8) Insert(objs, 1, 8);
    return objs;
  }

  // Links objs[from, to) into a chain and gives it back in one call.
  void Insert(const std::vector<void*>& objs, size_t from, size_t to) {
    if (from == to) return;
    for (size_t i = from; i + 1 < to; ++i) NextOf(objs[i]) = objs[i + 1];
    NextOf(objs[to - 1]) = nullptr;
    central_->InsertRange(objs[from], static_cast<int>(to - from));
  }

  // Every object lies inside a span registered to the class, at an object boundary, with
  // the alignment malloc promises, and no object is handed out twice.
  void CheckObjects(const std::vector<void*>& objs) {
    const size_t size = SizeMap::ClassSize(cl_);
    std::set<void*> seen;
    for (void* o : objs) {
      ASSERT_TRUE(seen.insert(o).second) << "object " << o << " handed out twice";
      const uintptr_t a = reinterpret_cast<uintptr_t>(o);
      EXPECT_EQ(a % std::min<size_t>(size, 16), 0u) << o;
      EXPECT_EQ(t_->pagemap.ClassOf(a), cl_) << o;
      Span* s = t_->pagemap.GetSpan(PageId::FromPtr(o));
      ASSERT_NE(s, nullptr) << o;
      EXPECT_EQ(s->sizeclass, cl_);
      EXPECT_EQ(s->location, Span::kInUse);
      EXPECT_EQ((a - s->start_addr()) % size, 0u) << o;
      EXPECT_LE(a + size, s->end().addr()) << o;
    }
  }

  size_t HeapSpans() {
    SpinLockHolder h(t_->heap.lock());
    return t_->heap.stats().in_use_spans;
  }
  void VerifyHeap() {
    SpinLockHolder h(t_->heap.lock());
    t_->heap.Verify();
  }

  std::unique_ptr<testing::TestHeap> t_ = testing::TestHeap::Make();
  std::unique_ptr<CentralFreeList> central_;
  size_t cl_ = 0;
};

TEST_F(CentralFreeListTest, BatchesAreDistinctObjectsOfTheClass) {
  Init(1);  // 8-byte objects, many per span
  const int batch = static_cast<int>(SizeMap::NumToMove(1));
  std::vector<void*> objs;
  for (int i = 0; i < 10; ++i) ASSERT_EQ(Remove(batch, &objs), batch);
  CheckObjects(objs);
  central_->Verify();
  // 320 of 1024 objects of one span: one span, the rest free in it.
  EXPECT_EQ(central_->num_spans(), 1u);
  EXPECT_EQ(HeapSpans(), 1u);
  EXPECT_EQ(central_->free_objects(), SizeMap::ObjectsPerSpan(1) - objs.size());

  Insert(objs, 0, objs.size());
  central_->Verify();
  EXPECT_EQ(central_->num_spans(), 0u);
  EXPECT_EQ(central_->free_objects(), 0u);
  EXPECT_EQ(HeapSpans(), 0u);
  VerifyHeap();
}

TEST_F(CentralFreeListTest, EveryClassRoundTripsThroughThePageHeap) {
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    SCOPED_TRACE(::testing::Message() << "class " << cl << " size " << SizeMap::ClassSize(cl));
    Init(cl);
    const size_t per_span = SizeMap::ObjectsPerSpan(cl);
    const int batch = static_cast<int>(SizeMap::NumToMove(cl));
    // Enough batches to need more than one span.
    std::vector<void*> objs;
    while (objs.size() <= per_span) ASSERT_EQ(Remove(batch, &objs), batch);
    CheckObjects(objs);
    central_->Verify();
    const size_t spans = (objs.size() + per_span - 1) / per_span;
    EXPECT_EQ(central_->num_spans(), spans);
    EXPECT_EQ(HeapSpans(), spans);
    EXPECT_EQ(central_->free_objects(), spans * per_span - objs.size());
    // Returned in a different order than handed out, in several chains.
    std::reverse(objs.begin(), objs.end());
    const size_t half = objs.size() / 2;
    Insert(objs, 0, half);
    Insert(objs, half, objs.size());
    central_->Verify();
    ASSERT_EQ(central_->num_spans(), 0u);
    ASSERT_EQ(central_->free_objects(), 0u);
    ASSERT_EQ(HeapSpans(), 0u);
  }
  VerifyHeap();
}

TEST_F(CentralFreeListTest, PartialReturnsKeepTheSpan) {
  const size_t cl = SizeMap::ClassIndex(1024);
  Init(cl);
  const size_t per_span = SizeMap::ObjectsPerSpan(cl);
  std::vector<void*> objs;
  ASSERT_EQ(Remove(static_cast<int>(per_span), &objs), static_cast<int>(per_span));
  EXPECT_EQ(central_->num_spans(), 1u);
  EXPECT_EQ(central_->free_objects(), 0u);  // the span is fully handed out
  central_->Verify();

  // All but one back: the span stays (one object is still out).
  Insert(objs, 1, objs.size());
  EXPECT_EQ(central_->num_spans(), 1u);
  EXPECT_EQ(central_->free_objects(), per_span - 1);
  EXPECT_EQ(HeapSpans(), 1u);
  central_->Verify();

  // The next batch reuses the freed objects rather than a new span.
  std::vector<void*> again;
  ASSERT_EQ(Remove(3, &again), 3);
  EXPECT_EQ(central_->num_spans(), 1u);
  EXPECT_EQ(HeapSpans(), 1u);
  for (void* o : again) EXPECT_NE(std::find(objs.begin() + 1, objs.end(), o), objs.end());
  Insert(again, 0, again.size());
  central_->Verify();

  // The last object back releases the span to the page heap.
  Insert(objs, 0, 1);
  EXPECT_EQ(central_->num_spans(), 0u);
  EXPECT_EQ(central_->free_objects(), 0u);
  EXPECT_EQ(HeapSpans(), 0u);
  central_->Verify();
  VerifyHeap();
}

TEST_F(CentralFreeListTest, LargestClassHasOneObjectPerSpan) {
  const size_t cl = kNumClasses - 1;
  Init(cl);
  ASSERT_EQ(SizeMap::ObjectsPerSpan(cl), 1u);
  std::vector<void*> objs;
  ASSERT_EQ(Remove(2, &objs), 2);
  CheckObjects(objs);
  EXPECT_EQ(central_->num_spans(), 2u);
  EXPECT_EQ(central_->free_objects(), 0u);
  Insert(objs, 0, 1);
  EXPECT_EQ(central_->num_spans(), 1u);
  EXPECT_EQ(HeapSpans(), 1u);
  Insert(objs, 1, 2);
  EXPECT_EQ(HeapSpans(), 0u);
  central_->Verify();
  VerifyHeap();
}

TEST_F(CentralFreeListTest, RemoveRangeReturnsWhatItCanWhenMemoryRunsOut) {
  // A 1 MiB heap limit leaves room for sixteen 64 KiB spans of 16 KiB objects.
  const size_t cl = SizeMap::ClassIndex(16 * 1024);
  ASSERT_EQ(SizeMap::ClassPages(cl) * kPageSize, 64u * 1024);
  const size_t per_span = SizeMap::ObjectsPerSpan(cl);
  const size_t capacity = 16 * per_span;
  {
    SpinLockHolder h(t_->heap.lock());
    t_->heap.set_limit(kMinSystemAlloc);
  }
  Init(cl);
  std::vector<void*> objs;
  while (objs.size() + 3 <= capacity) ASSERT_EQ(Remove(3, &objs), 3);
  // Fewer than asked for is fine; the list stays consistent.
  const int last = Remove(3, &objs);
  EXPECT_EQ(static_cast<size_t>(last), capacity % 3);
  EXPECT_EQ(objs.size(), capacity);
  EXPECT_EQ(Remove(3, &objs), 0);  // out of memory: 0, nothing taken
  CheckObjects(objs);
  central_->Verify();
  EXPECT_EQ(central_->num_spans(), 16u);
  Insert(objs, 0, objs.size());
  EXPECT_EQ(HeapSpans(), 0u);
  central_->Verify();
  VerifyHeap();
}

// RemoveBatch and InsertBatch (the per-CPU front end's refill and flush) move arrays, from
// and to the spans and the transfer cache alike, and never read or write an object: a
// fresh span's objects come out as the page was (zero), and what a program left in a
// block it freed is what the next owner finds (no link was stored into it).
TEST_F(CentralFreeListTest, BatchesMoveAsArraysWithoutTouchingObjects) {
  Init(SizeMap::ClassIndex(48));
  const int batch = static_cast<int>(SizeMap::NumToMove(cl_));
  std::vector<void*> objs(static_cast<size_t>(batch));
  ASSERT_EQ(central_->RemoveBatch(objs.data(), batch), batch);  // from a fresh span
  for (void* o : objs) EXPECT_EQ(RawWord(o), nullptr) << o;
  CheckObjects(objs);
  std::vector<void*> few(3);
  EXPECT_EQ(central_->RemoveBatch(few.data(), 3), 3);  // fewer than a batch: spans too
  for (void* o : few) EXPECT_EQ(RawWord(o), nullptr) << o;
  // Park a whole batch, each block holding a word of the program's, and take it back.
  static char marker;
  for (void* o : objs) RawWord(o) = &marker;
  central_->InsertBatch(objs.data(), batch);
  ASSERT_EQ(central_->transfer_objects(), static_cast<size_t>(batch));
  std::vector<void*> again(static_cast<size_t>(batch));
  ASSERT_EQ(central_->RemoveBatch(again.data(), batch), batch);
  EXPECT_EQ(central_->transfer_objects(), 0u);
  EXPECT_EQ(again, objs) << "in the order parked";
  for (void* o : again) EXPECT_EQ(RawWord(o), static_cast<void*>(&marker)) << o;
  // Fewer than a batch go to the spans, untouched too.
  central_->InsertBatch(few.data(), 3);
  for (void* o : few) EXPECT_EQ(RawWord(o), nullptr) << o;
  central_->InsertToSpans(again.data(), batch);
  for (void* o : again) EXPECT_EQ(RawWord(o), static_cast<void*>(&marker)) << o;
  EXPECT_EQ(central_->transfer_objects(), 0u);
  EXPECT_EQ(central_->num_spans(), 0u);  // every object is back: the span went to the heap
  central_->Verify();
}

// Whole batches given back with InsertList(start, n, false) park in the transfer cache and
// come out again in O(1); the spans only see them when the transfer cache is full or
// flushed. Flushing must return every span to the page heap.
TEST_F(CentralFreeListTest, WholeBatchesParkInTheTransferCache) {
  Init(1);
  const int batch = static_cast<int>(SizeMap::NumToMove(1));
  const int slots = central_->transfer_cache()->capacity() / batch;
  ASSERT_GE(slots, 1);
  std::vector<void*> objs;
  for (int i = 0; i <= slots; ++i) ASSERT_EQ(Remove(batch, &objs), batch);
  const size_t spans = central_->num_spans();
  const size_t span_free = central_->free_objects();

  auto insert_batch = [&](size_t first) {
    for (size_t i = first; i + 1 < first + batch; ++i) NextOf(objs[i]) = objs[i + 1];
    (void)central_->InsertList(objs[first], batch, false);
  };
  insert_batch(0);
  EXPECT_EQ(central_->transfer_objects(), static_cast<size_t>(batch));
  EXPECT_EQ(central_->free_objects(), span_free);  // the spans did not see it
  // A request for exactly one batch gets that chain back.
  std::vector<void*> again;
  ASSERT_EQ(Remove(batch, &again), batch);
  EXPECT_EQ(central_->transfer_objects(), 0u);
  std::vector<void*> first(objs.begin(), objs.begin() + batch);
  std::sort(first.begin(), first.end());
  std::sort(again.begin(), again.end());
  EXPECT_EQ(again, first);

  // Fill every slot; the batch after that goes to the spans.
  for (int i = 0; i < slots; ++i) insert_batch(static_cast<size_t>(i) * batch);
  EXPECT_EQ(central_->transfer_objects(), static_cast<size_t>(slots) * batch);
  EXPECT_EQ(central_->free_objects(), span_free);
  EXPECT_EQ(central_->num_spans(), spans);
  insert_batch(static_cast<size_t>(slots) * batch);
  EXPECT_EQ(central_->transfer_objects(), static_cast<size_t>(slots) * batch);
  // Every object is back: each is either on its span or parked (a span that got all of
  // its objects back directly has gone to the page heap).
  EXPECT_EQ(central_->num_spans() * SizeMap::ObjectsPerSpan(1),
            central_->free_objects() + central_->transfer_objects());
  EXPECT_EQ(HeapSpans(), central_->num_spans());
  central_->Verify();

  central_->FlushTransferCache();
  EXPECT_EQ(central_->transfer_objects(), 0u);
  EXPECT_EQ(central_->num_spans(), 0u);
  EXPECT_EQ(central_->free_objects(), 0u);
  EXPECT_EQ(HeapSpans(), 0u);
  central_->Verify();
  VerifyHeap();
}

// A batch of the largest size (TCMALLOC_TRANSFER_NUM_OBJ=1024) of distinct neighbours is
// checked without exact scans: the duplicate filter grows with the batch (a fixed 256 bits
// filled up and sent most pointers of a batch of 512 to the scan, O(n^2)), and neighbours
// have consecutive numbers in it (a hash of the page made the two pages' blocks collide:
// 56 scans here).
TEST_F(CentralFreeListTest, LargeBatchesAreCheckedWithoutExactScans) {
  SizeMap::SetMaxBatch(1024);
  Init(SizeMap::ClassIndex(16));
  const int batch = central_->transfer_cache()->batch();
  ASSERT_EQ(batch, 1024);
  std::vector<void*> objs(static_cast<size_t>(batch));
  ASSERT_EQ(central_->RemoveBatch(objs.data(), batch), batch);
  central_->InsertBatch(objs.data(), batch);
  ASSERT_EQ(central_->transfer_objects(), static_cast<size_t>(batch));
  EXPECT_EQ(central_->exact_scans(), 0u);
  ASSERT_EQ(central_->RemoveBatch(objs.data(), batch), batch);
  central_->InsertToSpans(objs.data(), batch);
  central_->Verify();
  SizeMap::SetMaxBatch(32);
}

// A consumer frees a producer's blocks in an order that scatters each batch over many
// spans (xmalloc). Their numbers then collide in the duplicate filter at random, and each
// collision scans the batch so far: with 8 filter bits an object a batch of 128 averaged
// ~8 scans (260 in the 40 batches here), with 64 bits ~1.
TEST_F(CentralFreeListTest, ScatteredBatchesRarelyNeedAnExactScan) {
  SizeMap::SetMaxBatch(128);
  const size_t cl = SizeMap::ClassIndex(64);
  Init(cl);
  const int batch = central_->transfer_cache()->batch();
  ASSERT_EQ(batch, 128);
  std::vector<void*> all(64 * SizeMap::ObjectsPerSpan(cl));
  for (size_t i = 0; i < all.size(); i += static_cast<size_t>(batch))
    ASSERT_EQ(central_->RemoveBatch(all.data() + i, batch), batch);
  uint64_t state = 12345;  // a fixed shuffle (Fisher-Yates with an LCG): repeatable
  for (size_t i = all.size() - 1; i > 0; --i) {
    state = state * 6364136223846793005u + 1442695040888963407u;
    std::swap(all[i], all[(state >> 33) % (i + 1)]);
  }
  const size_t scans = central_->exact_scans();
  constexpr int kBatches = 40;
  std::vector<void*> back(static_cast<size_t>(batch));
  for (int b = 0; b < kBatches; ++b) {
    central_->InsertBatch(all.data() + b * batch, batch);
    ASSERT_EQ(central_->transfer_objects(), static_cast<size_t>(batch));  // checked and parked
    ASSERT_EQ(central_->RemoveBatch(back.data(), batch), batch);
  }
  EXPECT_LE(central_->exact_scans() - scans, static_cast<size_t>(3 * kBatches));
  central_->InsertToSpans(all.data(), static_cast<int>(all.size()));
  central_->Verify();
  SizeMap::SetMaxBatch(32);
}

// Kept spans (central_freelist.h): with a budget, a one-page span whose objects all came
// back stays on the list, bitmap ready, and the next allocation takes the same objects
// again without the page heap; when the budget is spent, empty spans go back as before.
TEST_F(CentralFreeListTest, EmptySpansAreKeptWithinTheBudgetAndReused) {
  const size_t cl = SizeMap::ClassIndex(64);
  ByteBudget budget;
  budget.Init(2 * kPageSize);
  Init(cl, &budget);
  const int per_span = static_cast<int>(SizeMap::ObjectsPerSpan(cl));
  std::vector<void*> objs(static_cast<size_t>(3 * per_span));
  ASSERT_EQ(central_->RemoveBatch(objs.data(), 3 * per_span), 3 * per_span);
  ASSERT_EQ(HeapSpans(), 3u);
  central_->InsertToSpans(objs.data(), 3 * per_span);
  EXPECT_EQ(central_->kept_spans(), 2u);  // the budget's two pages
  EXPECT_EQ(budget.used(), 2 * kPageSize);
  EXPECT_EQ(HeapSpans(), 2u) << "the third empty span goes back to the page heap";
  EXPECT_EQ(central_->free_objects(), static_cast<size_t>(2 * per_span));
  central_->Verify();
  std::vector<void*> again(static_cast<size_t>(2 * per_span));
  ASSERT_EQ(central_->RemoveBatch(again.data(), 2 * per_span), 2 * per_span);
  EXPECT_EQ(HeapSpans(), 2u) << "taken from the kept spans, not from the page heap";
  EXPECT_EQ(central_->kept_spans(), 0u);
  EXPECT_EQ(budget.used(), 0u);
  std::set<void*> before(objs.begin(), objs.end());
  for (void* p : again) EXPECT_TRUE(before.count(p)) << p << " is not one of the kept spans' objects";
  CheckObjects(again);
  central_->InsertToSpans(again.data(), 2 * per_span);
  EXPECT_EQ(central_->kept_spans(), 2u);
  EXPECT_EQ(central_->ReleaseKeptSpans(), 2 * kPageSize);
  EXPECT_EQ(HeapSpans(), 0u);
  EXPECT_EQ(budget.used(), 0u);
  central_->Verify();
  VerifyHeap();
}

// Spans of kKeptSpanMinObjects objects or more are kept (every one-page span, and e.g. the
// 4 KiB class's 16 objects in 8 pages); a span of a few big objects is not: its pages
// serve every class better from the page heap. The maintenance pass keeps no more of them
// than the list's allocations took back since its previous call: light work that takes
// a few objects an interval (issue 12's cache-hits-only program after a big free) keeps
// one span, not the budget.
TEST_F(CentralFreeListTest, KeptSpansHoldManyObjectsAndOnlyAsManyAsWereReused) {
  ByteBudget budget;
  budget.Init(64 * kPageSize);
  const size_t big = SizeMap::ClassIndex(16384);
  ASSERT_GT(SizeMap::ClassPages(big), 1u);
  ASSERT_LT(SizeMap::ObjectsPerSpan(big), CentralFreeList::kKeptSpanMinObjects);
  Init(big, &budget);
  std::vector<void*> objs(SizeMap::ObjectsPerSpan(big));
  int n = static_cast<int>(objs.size());
  ASSERT_EQ(central_->RemoveBatch(objs.data(), n), n);
  central_->InsertToSpans(objs.data(), n);
  EXPECT_EQ(central_->kept_spans(), 0u);
  EXPECT_EQ(HeapSpans(), 0u);

  // A multi-page span of many objects is kept, and counts its whole length.
  const size_t page_sized = SizeMap::ClassIndex(4096);
  ASSERT_GT(SizeMap::ClassPages(page_sized), 1u);
  ASSERT_GE(SizeMap::ObjectsPerSpan(page_sized), CentralFreeList::kKeptSpanMinObjects);
  Init(page_sized, &budget);
  objs.resize(SizeMap::ObjectsPerSpan(page_sized));
  n = static_cast<int>(objs.size());
  ASSERT_EQ(central_->RemoveBatch(objs.data(), n), n);
  central_->InsertToSpans(objs.data(), n);
  EXPECT_EQ(central_->kept_spans(), 1u);
  EXPECT_EQ(HeapSpans(), 1u);
  EXPECT_EQ(budget.used(), SizeMap::ClassPages(page_sized) * kPageSize);
  ASSERT_EQ(central_->RemoveBatch(objs.data(), n), n);
  EXPECT_EQ(HeapSpans(), 1u) << "taken back from the kept span";
  central_->InsertToSpans(objs.data(), n);
  EXPECT_EQ(central_->ReleaseKeptSpans(), SizeMap::ClassPages(page_sized) * kPageSize);
  EXPECT_EQ(HeapSpans(), 0u);
  EXPECT_EQ(budget.used(), 0u);

  Init(SizeMap::ClassIndex(256), &budget);
  const int per_span = static_cast<int>(SizeMap::ObjectsPerSpan(cl_));
  objs.resize(static_cast<size_t>(4 * per_span));
  ASSERT_EQ(central_->RemoveBatch(objs.data(), 4 * per_span), 4 * per_span);
  central_->InsertToSpans(objs.data(), 4 * per_span);
  ASSERT_EQ(central_->kept_spans(), 4u);
  // A program that emptied a big heap and goes on lightly: a few objects an interval.
  void* few[3];
  ASSERT_EQ(central_->RemoveBatch(few, 3), 3);
  EXPECT_EQ(central_->kept_spans(), 3u);  // the one they came from is in use again
  EXPECT_EQ(central_->ReleaseKeptSpansBeyondDemand(), 2 * kPageSize) << "one span was taken back: one stays";
  EXPECT_EQ(central_->kept_spans(), 1u);
  EXPECT_EQ(HeapSpans(), 2u);
  central_->InsertToSpans(few, 3);  // that span is empty again: kept
  EXPECT_EQ(central_->kept_spans(), 2u);
  EXPECT_EQ(central_->ReleaseKeptSpansBeyondDemand(), 2 * kPageSize) << "nothing taken back since: none stays";
  EXPECT_EQ(central_->kept_spans(), 0u);
  EXPECT_EQ(HeapSpans(), 0u);
  EXPECT_EQ(budget.used(), 0u);
  central_->Verify();

  // A list that cycles through its kept spans (trees built and freed) keeps them all.
  ASSERT_EQ(central_->RemoveBatch(objs.data(), 2 * per_span), 2 * per_span);
  central_->InsertToSpans(objs.data(), 2 * per_span);
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(central_->RemoveBatch(objs.data(), 2 * per_span), 2 * per_span);
    EXPECT_EQ(HeapSpans(), 2u) << "taken from the kept spans";
    central_->InsertToSpans(objs.data(), 2 * per_span);
    EXPECT_EQ(central_->ReleaseKeptSpansBeyondDemand(), 0u);
    EXPECT_EQ(central_->kept_spans(), 2u);
  }
  EXPECT_EQ(central_->ReleaseKeptSpans(), 2 * kPageSize);
  central_->Verify();
  VerifyHeap();
}

// When spans a list gives back make the page heap's surplus rule release memory, the
// installed SurplusReleased hook runs (the composition root's gives back every list's kept
// spans: one kept span keeps its huge page from being released whole); spans given back
// below the rule's trigger do not call it.
static int g_surplus_hook_calls = 0;
TEST_F(CentralFreeListTest, SpansThatMakeTheSurplusRuleFireCallTheHook) {
  SetSurplusReleased([] { ++g_surplus_hook_calls; });
  {
    SpinLockHolder h(t_->heap.lock());
    t_->heap.set_surplus_release(true);
  }
  Init(SizeMap::ClassIndex(65536));
  const int per_span = static_cast<int>(SizeMap::ObjectsPerSpan(cl_));
  // Far beyond twice the reserve (16 MiB and half of what is in use) once all is free.
  const int n = static_cast<int>((size_t{64} << 20) / SizeMap::ClassSize(cl_));
  std::vector<void*> objs(static_cast<size_t>(n));
  ASSERT_EQ(central_->RemoveBatch(objs.data(), n), n);
  g_surplus_hook_calls = 0;
  central_->InsertToSpans(objs.data(), per_span);  // one span back: far under the trigger
  EXPECT_EQ(g_surplus_hook_calls, 0);
  central_->InsertToSpans(objs.data() + per_span, n - per_span);
  EXPECT_GE(g_surplus_hook_calls, 1) << "the rule fired, the hook was not called";
  {
    SpinLockHolder h(t_->heap.lock());
    EXPECT_GE(t_->heap.stats().surplus_releases, 1u);
    EXPECT_FALSE(t_->heap.TakeSurplusReleased()) << "the list took the news, no one else may act on it again";
  }
  SetSurplusReleased(nullptr);
  {
    SpinLockHolder h(t_->heap.lock());
    t_->heap.set_surplus_release(false);
  }
  central_->Verify();
  VerifyHeap();
}

// A Populate whose span is memory the process does not hold yet calls the installed
// NewMemoryCarved hook (the composition root's gives back every list's kept spans, so they
// are reused before the heap grows resident); one that reuses pages freed before does not.
static int g_new_memory_hook_calls = 0;
TEST_F(CentralFreeListTest, APopulateOfNewMemoryCallsTheHook) {
  SetNewMemoryCarved([] { ++g_new_memory_hook_calls; });
  Init(SizeMap::ClassIndex(4096));
  const int per_span = static_cast<int>(SizeMap::ObjectsPerSpan(cl_));
  std::vector<void*> objs(static_cast<size_t>(per_span));
  g_new_memory_hook_calls = 0;
  ASSERT_EQ(central_->RemoveBatch(objs.data(), per_span), per_span);
  EXPECT_EQ(g_new_memory_hook_calls, 1) << "a fresh heap's first span is new memory";
  for (void* p : objs) static_cast<char*>(p)[0] = 1;
  central_->InsertToSpans(objs.data(), per_span);  // no kept budget here: back to the heap
  EXPECT_EQ(HeapSpans(), 0u);
  ASSERT_EQ(central_->RemoveBatch(objs.data(), per_span), per_span);
  EXPECT_EQ(g_new_memory_hook_calls, 1) << "the same pages again: resident already";
  central_->InsertToSpans(objs.data(), per_span);
  SetNewMemoryCarved(nullptr);
  central_->Verify();
  VerifyHeap();
}

// Two distinct blocks whose numbers are a filter's width apart share a filter bit: the
// second sends the batch to the exact scan, which finds no duplicate, and the batch is
// parked as usual. (The rest of the batch is two runs over one range, so the check's
// proof without the filter fails and the filter is used.)
TEST_F(CentralFreeListTest, FilterCollisionOfDistinctBlocksIsNotADoubleFree) {
  const size_t cl = SizeMap::ClassIndex(16);
  Init(cl);
  const int batch = central_->transfer_cache()->batch();
  const size_t filter_bits = CentralFreeList::DuplicateFilterBits(batch);
  const size_t per_span = SizeMap::ObjectsPerSpan(cl);
  // Enough blocks that two of them are filter_bits apart.
  const size_t wanted = 2 * filter_bits + per_span;
  std::vector<void*> all((wanted + static_cast<size_t>(batch) - 1) / static_cast<size_t>(batch) * static_cast<size_t>(batch));
  for (size_t i = 0; i < all.size(); i += static_cast<size_t>(batch))
    ASSERT_EQ(central_->RemoveBatch(all.data() + i, batch), batch);
  auto number = [&](void* p) {
    Span* span = t_->pagemap.GetSpan(PageId::FromPtr(p));
    const size_t index = (static_cast<char*>(p) - static_cast<char*>(span->start_ptr())) / SizeMap::ClassSize(cl);
    return span->start.index * per_span + index;
  };
  void* a = all[0];
  void* b = nullptr;
  for (void* p : all)
    if (p != a && (number(p) - number(a)) % filter_bits == 0) b = p;
  ASSERT_NE(b, nullptr);
  std::vector<void*> others;
  for (void* p : all)
    if (others.size() + 2 < static_cast<size_t>(batch) && p != a && p != b) others.push_back(p);
  std::sort(others.begin(), others.end());
  // The rest as two rising runs over the same range (even blocks, then odd ones): their
  // ranges overlap, so the batch goes through the filter.
  std::vector<void*> objs{a, b};
  for (size_t i = 0; i < others.size(); i += 2) objs.push_back(others[i]);
  for (size_t i = 1; i < others.size(); i += 2) objs.push_back(others[i]);
  ASSERT_EQ(objs.size(), static_cast<size_t>(batch));
  const size_t scans = central_->exact_scans();
  const size_t filtered = central_->filtered_batches();
  central_->InsertBatch(objs.data(), batch);
  EXPECT_EQ(central_->filtered_batches(), filtered + 1);
  EXPECT_GE(central_->exact_scans(), scans + 1);
  EXPECT_EQ(central_->transfer_objects(), static_cast<size_t>(batch));
  std::vector<void*> rest;
  for (void* p : all)
    if (std::find(objs.begin(), objs.end(), p) == objs.end()) rest.push_back(p);
  central_->InsertToSpans(rest.data(), static_cast<int>(rest.size()));
  central_->FlushTransferCache();
  EXPECT_EQ(central_->num_spans(), 0u);
  central_->Verify();
}

// The batch check proves a batch free of duplicates without the filter when its runs of
// rising or falling addresses cover ranges that do not overlap (objects in the order a
// slab or span handed them out, or reversed); runs that overlap, or more than kMaxRuns
// of them, go through the filter. Either way a batch of distinct blocks is parked.
TEST_F(CentralFreeListTest, BatchesOfDisjointRunsNeedNoFilter) {
  SizeMap::SetMaxBatch(64);
  const size_t cl = SizeMap::ClassIndex(64);
  Init(cl);
  const size_t batch = static_cast<size_t>(central_->transfer_cache()->batch());
  ASSERT_EQ(batch, 64u);
  const std::vector<void*> fresh = RemoveSorted(4 * batch);
  std::vector<void*> back(batch);
  auto park = [&](std::vector<void*> objs) {
    ASSERT_EQ(objs.size(), batch);
    std::set<void*> distinct(objs.begin(), objs.end());
    ASSERT_EQ(distinct.size(), batch);
    central_->InsertBatch(objs.data(), static_cast<int>(batch));
    ASSERT_EQ(central_->transfer_objects(), batch);  // checked and parked
    ASSERT_EQ(central_->RemoveBatch(back.data(), static_cast<int>(batch)), static_cast<int>(batch));
  };
  const size_t filtered = central_->filtered_batches();
  // Rising, falling, a rising run followed by a falling one above it (across spans), and
  // every other block (not neighbours, still a run).
  park(std::vector<void*>(fresh.begin(), fresh.begin() + static_cast<long>(batch)));
  park(std::vector<void*>(fresh.rbegin(), fresh.rbegin() + static_cast<long>(batch)));
  std::vector<void*> two(fresh.begin(), fresh.begin() + static_cast<long>(batch / 2));
  for (size_t i = 0; two.size() < batch; ++i) two.push_back(fresh[fresh.size() - 1 - i]);
  park(two);
  std::vector<void*> sparse;
  for (size_t i = 0; i < batch; ++i) sparse.push_back(fresh[2 * i]);
  park(sparse);
  // kMaxRuns / 2 pairs (high, low), each above the one before, then a rising rest.
  std::vector<void*> pairs;
  for (size_t i = 0; i < CentralFreeList::kMaxRuns / 2; ++i) {
    pairs.push_back(fresh[2 * i + 1]);
    pairs.push_back(fresh[2 * i]);
  }
  for (size_t i = pairs.size(); pairs.size() < batch; ++i) pairs.push_back(fresh[i]);
  park(pairs);
  // Segments of 8 blocks, more than kRunJump blocks apart, in no order of their own and
  // either way up (the runs' ranges are sorted to be compared).
  static_assert(32 - 8 > CentralFreeList::kRunJump);
  std::vector<void*> shuffled;
  for (size_t seg : {size_t{5}, size_t{1}, size_t{7}, size_t{0}, size_t{3}, size_t{6}, size_t{2}, size_t{4}})
    for (size_t i = 0; i < 8; ++i) shuffled.push_back(fresh[32 * seg + (seg % 2 == 0 ? i : 7 - i)]);
  park(shuffled);
  // A rising run, a jump up, and falling blocks back into the gap: 0-53, 63, 62-54. The
  // object after the jump starts the falling run (else the rising run's range would
  // reach 63 and hold the falling one).
  std::vector<void*> jump(fresh.begin(), fresh.begin() + 54);
  for (size_t i = 63; i >= 54; --i) jump.push_back(fresh[i]);
  park(jump);
  // A rising run with a jump of more than kRunJump blocks in it, and a falling run in the
  // gap: 0-9, 40-49, 30-20. Split at the jump, the runs do not overlap.
  std::vector<void*> gap;
  for (size_t i = 0; i < 10; ++i) gap.push_back(fresh[i]);
  for (size_t i = 40; i < 50; ++i) gap.push_back(fresh[i]);
  for (size_t i = 30; i >= 20; --i) gap.push_back(fresh[i]);
  for (size_t i = 100; gap.size() < batch; ++i) gap.push_back(fresh[i]);
  park(gap);
  EXPECT_EQ(central_->filtered_batches(), filtered);
  EXPECT_EQ(central_->exact_scans(), 0u);
  // Two rising runs over the same range (interleaved halves): the filter decides.
  std::vector<void*> interleaved;
  for (size_t i = 0; i < batch; i += 2) interleaved.push_back(fresh[i]);
  for (size_t i = 1; i < batch; i += 2) interleaved.push_back(fresh[i]);
  park(interleaved);
  EXPECT_EQ(central_->filtered_batches(), filtered + 1);
  // Triples 1 0 2, 4 3 5, ... all the way: two disjoint runs a triple ([0, 1] and [2],
  // [3, 4] and [5], ...), more than kMaxRuns in all.
  static_assert(CentralFreeList::kMaxRuns < 64 * 2 / 3);
  std::vector<void*> zigzag;
  for (size_t i = 0; zigzag.size() < batch; ++i)
    for (size_t j : {size_t{1}, size_t{0}, size_t{2}})
      if (zigzag.size() < batch) zigzag.push_back(fresh[3 * i + j]);
  park(zigzag);
  EXPECT_EQ(central_->filtered_batches(), filtered + 2);
  central_->InsertToSpans(fresh.data(), static_cast<int>(fresh.size()));
  central_->Verify();
  SizeMap::SetMaxBatch(32);
}

// GetStats counts batches by the runs they split into (1, 2, 3, 4, 5 or more), the same
// with the vector step on or off: a batch in address order is one run; one falling run,
// another below it after a jump, and a rising one between them are three; eight segments
// of four are more than four.
TEST_F(CentralFreeListTest, BatchesAreCountedByTheirRuns) {
  const size_t cl = SizeMap::ClassIndex(64);
  Init(cl);
  const size_t batch = static_cast<size_t>(central_->transfer_cache()->batch());
  ASSERT_EQ(batch, 32u);
  const std::vector<void*> fresh = RemoveSorted(8 * batch);
  std::vector<void*> rising(fresh.begin(), fresh.begin() + static_cast<long>(batch));
  std::vector<void*> three;
  for (size_t i = 50; i >= 40; --i) three.push_back(fresh[i]);
  for (size_t i = 11; i-- > 0;) three.push_back(fresh[i]);
  for (size_t i = 20; i < 30; ++i) three.push_back(fresh[i]);
  std::vector<void*> eight;
  for (size_t seg = 0; seg < 8; ++seg)
    for (size_t i = 0; i < 4; ++i) eight.push_back(fresh[32 * seg + i]);
  ASSERT_EQ(three.size(), batch);
  ASSERT_EQ(eight.size(), batch);
  std::vector<void*> back(batch);
  for (bool vector : {false, true}) {
    SCOPED_TRACE(vector);
    central_->SetVectorCheck(vector);
    size_t before[CentralFreeList::kRunsCounted];
    for (int i = 0; i < CentralFreeList::kRunsCounted; ++i) before[i] = central_->batches_with_runs(i);
    for (const std::vector<void*>* objs : {&rising, &three, &eight}) {
      central_->InsertBatch(objs->data(), static_cast<int>(batch));
      ASSERT_EQ(central_->RemoveBatch(back.data(), static_cast<int>(batch)), static_cast<int>(batch));
    }
    EXPECT_EQ(central_->batches_with_runs(0), before[0] + 1);
    EXPECT_EQ(central_->batches_with_runs(1), before[1]);
    EXPECT_EQ(central_->batches_with_runs(2), before[2] + 1);
    EXPECT_EQ(central_->batches_with_runs(3), before[3]);
    EXPECT_EQ(central_->batches_with_runs(4), before[4] + 1);
  }
  central_->InsertToSpans(fresh.data(), static_cast<int>(fresh.size()));
  central_->Verify();
}

using CentralFreeListDeathTest = CentralFreeListTest;

TEST_F(CentralFreeListDeathTest, DoubleFreeOfAReleasedSpanCrashes) {
  Init(1);
  std::vector<void*> objs;
  ASSERT_EQ(Remove(1, &objs), 1);
  Insert(objs, 0, 1);  // refcount 0: the span went back to the page heap
  ASSERT_EQ(HeapSpans(), 0u);
  EXPECT_DEATH(Insert(objs, 0, 1), "invalid pointer");
}

TEST_F(CentralFreeListDeathTest, DoubleFreeInOneChainCrashes) {
  Init(1);
  std::vector<void*> objs;
  ASSERT_EQ(Remove(1, &objs), 1);
  // The same object twice in one chain: the second sees its span with refcount 0.
  EXPECT_DEATH(
      {
        NextOf(objs[0]) = objs[0];
        central_->InsertRange(objs[0], 2);
      },
      "invalid pointer");
}

TEST_F(CentralFreeListDeathTest, ForeignPointerCrashes) {
  Init(1);
  std::vector<void*> objs;
  ASSERT_EQ(Remove(1, &objs), 1);
  static void* not_ours[2] = {nullptr, nullptr};
  EXPECT_DEATH(central_->InsertRange(&not_ours[0], 1), "invalid pointer");
}

// ---- hardening: every batch is checked where it arrives ----

// Links objs[from, from+n) into a chain; returns its tail.
void* Chain(const std::vector<void*>& objs, size_t from, size_t n) {
  for (size_t i = from; i + 1 < from + n; ++i) NextOf(objs[i]) = objs[i + 1];
  NextOf(objs[from + n - 1]) = nullptr;
  return objs[from + n - 1];
}

TEST_F(CentralFreeListDeathTest, InteriorPointerInATransferBatchCrashes) {
  const size_t cl = SizeMap::ClassIndex(100);
  Init(cl);
  const int batch = central_->transfer_cache()->batch();
  std::vector<void*> objs;
  ASSERT_EQ(Remove(batch, &objs), batch);
  objs[3] = static_cast<char*>(objs[3]) + 16;
  Chain(objs, 0, static_cast<size_t>(batch));
  EXPECT_DEATH((void)central_->InsertList(objs[0], batch, false),
               "free\\(\\) \\(batch from a thread cache into the transfer cache\\): invalid pointer 0x[0-9a-f]+ "
               "\\(16 bytes into a block of size class [0-9]+, 112 bytes\\)");
}

TEST_F(CentralFreeListDeathTest, InteriorPointerReturningToItsSpanCrashes) {
  const size_t cl = SizeMap::ClassIndex(1000);
  Init(cl);
  std::vector<void*> objs;
  ASSERT_EQ(Remove(4, &objs), 4);
  // 8 bytes in: the chain's link is stored there, so it must stay aligned (UBSan).
  objs[2] = static_cast<char*>(objs[2]) + 8;
  EXPECT_DEATH(Insert(objs, 0, 4), "returning to their spans\\): invalid pointer 0x[0-9a-f]+ \\(8 bytes into");
}

TEST_F(CentralFreeListDeathTest, PointerIntoTheSpansTailWasteCrashes) {
  // A class whose spans have tail waste: the offset is a multiple of the size, but past the
  // last object.
  size_t cl = 1;
  while (cl < kNumClasses &&
         SizeMap::ClassPages(cl) * kPageSize - SizeMap::ObjectsPerSpan(cl) * SizeMap::ClassSize(cl) <
             SizeMap::ClassSize(cl) / 2)
    ++cl;
  ASSERT_LT(cl, kNumClasses);
  Init(cl);
  std::vector<void*> objs;
  ASSERT_EQ(Remove(1, &objs), 1);
  Span* span = t_->pagemap.GetSpan(PageId::FromPtr(objs[0]));
  objs[0] = static_cast<char*>(span->start_ptr()) + SizeMap::ObjectsPerSpan(cl) * SizeMap::ClassSize(cl);
  EXPECT_DEATH(Insert(objs, 0, 1), "invalid pointer");
}

TEST_F(CentralFreeListDeathTest, SameObjectTwiceInATransferBatchCrashes) {
  Init(SizeMap::ClassIndex(64));
  const int batch = central_->transfer_cache()->batch();
  std::vector<void*> objs;
  ASSERT_EQ(Remove(batch, &objs), batch);
  objs[batch - 1] = objs[5];  // freed twice, other frees in between
  void* tail = Chain(objs, 0, static_cast<size_t>(batch) - 1);
  NextOf(tail) = objs[5];
  EXPECT_DEATH((void)central_->InsertList(objs[0], batch, false), "invalid pointer 0x[0-9a-f]+ \\(double free");
}

TEST_F(CentralFreeListDeathTest, ChainShorterThanItsCountCrashesNamingItsLastBlock) {
  // A thread cache's count says a batch, the chain ends 10 blocks early (a block freed
  // twice cut it short): the message names the block whose link is null.
  Init(SizeMap::ClassIndex(64));
  const int batch = central_->transfer_cache()->batch();
  std::vector<void*> objs;
  ASSERT_EQ(Remove(batch, &objs), batch);
  const size_t short_by = 10;
  void* tail = Chain(objs, 0, static_cast<size_t>(batch) - short_by);
  char expected[160];
  snprintf(expected, sizeof expected, "invalid pointer %p \\(a chain of %d blocks of size class [0-9]+ ends after %d",
           tail, batch, batch - static_cast<int>(short_by));
  EXPECT_DEATH((void)central_->InsertList(objs[0], batch, false), expected);
}

// The same, from a per-CPU cache: an array batch naming one block twice, and an array
// holding an interior pointer.
TEST_F(CentralFreeListDeathTest, SameObjectTwiceInAnArrayBatchCrashes) {
  Init(SizeMap::ClassIndex(64));
  const int batch = central_->transfer_cache()->batch();
  std::vector<void*> objs(static_cast<size_t>(batch));
  ASSERT_EQ(central_->RemoveBatch(objs.data(), batch), batch);
  objs[static_cast<size_t>(batch) - 1] = objs[5];
  EXPECT_DEATH(central_->InsertBatch(objs.data(), batch),
               "invalid pointer 0x[0-9a-f]+ \\(double free: the block is in the same batch twice");
  objs[static_cast<size_t>(batch) - 1] = static_cast<char*>(objs[6]) + 8;
  EXPECT_DEATH(central_->InsertBatch(objs.data(), batch), "invalid pointer 0x[0-9a-f]+ \\(8 bytes into a block");
}

// A block twice in a row, and a block twice in a batch of pairs that zig-zag (runs of two
// whose ranges overlap only where the duplicate is).
TEST_F(CentralFreeListDeathTest, SameObjectTwiceInARowOrAmongManyRunsCrashes) {
  Init(SizeMap::ClassIndex(64));
  const size_t batch = static_cast<size_t>(central_->transfer_cache()->batch());
  std::vector<void*> objs(batch);
  ASSERT_EQ(central_->RemoveBatch(objs.data(), static_cast<int>(batch)), static_cast<int>(batch));
  std::sort(objs.begin(), objs.end());
  std::vector<void*> twice = objs;
  twice[6] = twice[5];
  EXPECT_DEATH(central_->InsertBatch(twice.data(), static_cast<int>(batch)),
               "invalid pointer 0x[0-9a-f]+ \\(double free: the block is in the same batch twice");
  std::vector<void*> zigzag;
  for (size_t i = 0; zigzag.size() < batch; ++i) {
    zigzag.push_back(objs[2 * i + 1]);
    zigzag.push_back(objs[2 * i]);
  }
  zigzag[batch - 1] = zigzag[0];
  EXPECT_DEATH(central_->InsertBatch(zigzag.data(), static_cast<int>(batch)),
               "invalid pointer 0x[0-9a-f]+ \\(double free: the block is in the same batch twice");
}

// A block twice with a run of another span between the copies: the runs of the two spans
// do not overlap, but the second copy's run (one block) lies inside the first span's.
TEST_F(CentralFreeListDeathTest, SameObjectTwiceAcrossSpansCrashes) {
  const size_t cl = SizeMap::ClassIndex(64);
  Init(cl);
  const size_t batch = static_cast<size_t>(central_->transfer_cache()->batch());
  const size_t per_span = SizeMap::ObjectsPerSpan(cl);
  const std::vector<void*> fresh = RemoveSorted((2 * per_span + batch - 1) / batch * batch);
  std::vector<void*> objs(fresh.begin(), fresh.begin() + static_cast<long>(batch / 2));  // span 1
  for (size_t i = per_span; objs.size() + 1 < batch; ++i) objs.push_back(fresh[i]);     // span 2
  objs.push_back(objs[5]);
  ASSERT_NE(t_->pagemap.GetSpan(PageId::FromPtr(objs[0])), t_->pagemap.GetSpan(PageId::FromPtr(objs[batch - 2])));
  EXPECT_DEATH(central_->InsertBatch(objs.data(), static_cast<int>(batch)),
               "invalid pointer 0x[0-9a-f]+ \\(double free: the block is in the same batch twice");
}

// The filter keeps the word it is filling in a register: a duplicate whose first copy
// lies in a word left behind (other blocks in between fell in another word) is still seen.
TEST_F(CentralFreeListDeathTest, SameObjectTwiceAcrossFilterWordsCrashes) {
  Init(SizeMap::ClassIndex(64));
  const size_t batch = static_cast<size_t>(central_->transfer_cache()->batch());
  const std::vector<void*> fresh = RemoveSorted(4 * batch);
  // In address order, fresh[i] is block i of the first span,
  // so the second half of the batch is at least `batch` blocks (filter bits) further on.
  std::vector<void*> objs;
  for (size_t i = 0; i < batch / 2; ++i) objs.push_back(fresh[i]);
  for (size_t i = 0; objs.size() + 1 < batch; ++i) objs.push_back(fresh[2 * batch + i]);
  objs.push_back(fresh[3]);
  EXPECT_DEATH(central_->InsertBatch(objs.data(), static_cast<int>(batch)),
               "invalid pointer 0x[0-9a-f]+ \\(double free: the block is in the same batch twice");
}

// A run of one span's blocks that crosses bitmap words (InsertChunk keeps the word it is
// setting in a register): every bit lands, so counts and bits agree and a block of the
// word left behind is known to be free.
TEST_F(CentralFreeListDeathTest, RunAcrossBitmapWordsSetsEveryBit) {
  const size_t cl = SizeMap::ClassIndex(64);
  Init(cl);
  const size_t per_span = SizeMap::ObjectsPerSpan(cl);
  ASSERT_GT(per_span, 100u);
  std::vector<void*> objs(100);
  ASSERT_EQ(central_->RemoveBatch(objs.data(), 100), 100);  // blocks 0..99 of one span
  central_->InsertToSpans(objs.data() + 32, 64);  // bits 32..95 (two words), in one chunk
  EXPECT_EQ(central_->free_objects(), per_span - 36);
  central_->Verify();
  EXPECT_DEATH(central_->InsertToSpans(objs.data() + 40, 1),
               "invalid pointer 0x[0-9a-f]+ \\(double free: the block is already free in its span");
}

// Objects of the list's own bitmap spans go back in one pass under the lock (InsertOwnRuns):
// all of them here, spans given back whole included, with counts and bits agreeing.
TEST_F(CentralFreeListTest, OwnObjectsGoBackInOnePass) {
  const size_t cl = SizeMap::ClassIndex(16);
  Init(cl);
  const size_t per_span = SizeMap::ObjectsPerSpan(cl);
  std::vector<void*> objs(2 * per_span + 100);
  for (size_t i = 0; i < objs.size(); i += 100) {
    const int n = static_cast<int>(std::min<size_t>(100, objs.size() - i));
    ASSERT_EQ(central_->RemoveBatch(objs.data() + i, n), n);
  }
  const size_t before = central_->own_run_objects();
  central_->InsertToSpans(objs.data() + 50, static_cast<int>(objs.size()) - 50);  // ends two spans
  EXPECT_EQ(central_->own_run_objects() - before, objs.size() - 50);
  EXPECT_EQ(central_->num_spans(), 1u);
  EXPECT_EQ(central_->free_objects(), per_span - 50);
  central_->Verify();
  central_->InsertToSpans(objs.data(), 50);
  EXPECT_EQ(central_->num_spans(), 0u);
  central_->Verify();
}

// The same with the spans' objects in falling address order: a run ends where the next
// object lies below its span (its offset wraps around) as well as above it.
TEST_F(CentralFreeListTest, OwnObjectsInFallingOrderGoBackInOnePass) {
  const size_t cl = SizeMap::ClassIndex(16);
  Init(cl);
  const size_t per_span = SizeMap::ObjectsPerSpan(cl);
  std::vector<void*> objs(3 * per_span);
  for (size_t i = 0; i < objs.size(); i += 128) ASSERT_EQ(central_->RemoveBatch(objs.data() + i, 128), 128);
  std::sort(objs.begin(), objs.end(), std::greater<>());
  const size_t before = central_->own_run_objects();
  central_->InsertToSpans(objs.data(), static_cast<int>(objs.size()));
  EXPECT_EQ(central_->own_run_objects() - before, objs.size());
  EXPECT_EQ(central_->num_spans(), 0u);
  central_->Verify();
}

// An array into a list span (8-byte objects) with a bad block in the middle: a block never
// carved (free already) and an interior pointer are named, as at a run's start.
TEST_F(CentralFreeListDeathTest, ListSpanRunRefusesUncarvedAndInteriorBlocks) {
  Init(SizeMap::ClassIndex(8));
  std::vector<void*> objs(20);
  ASSERT_EQ(central_->RemoveBatch(objs.data(), 20), 20);  // the first 20 blocks of a fresh span
  std::vector<void*> bad = objs;
  bad[10] = static_cast<char*>(objs[19]) + 8 * 100;  // same span, never carved
  EXPECT_DEATH(central_->InsertToSpans(bad.data(), 20),
               "invalid pointer 0x[0-9a-f]+ \\(double free: the block is already free in its span");
  bad = objs;
  bad[10] = static_cast<char*>(objs[10]) + 4;
  EXPECT_DEATH(central_->InsertToSpans(bad.data(), 20), "invalid pointer 0x[0-9a-f]+ \\(4 bytes into a block");
  central_->InsertToSpans(objs.data(), 20);  // the real ones are accepted
  EXPECT_EQ(central_->num_spans(), 0u);
}

// A block already free in its span in the middle of a run of InsertToSpans (a drained cache
// holding a block the program freed twice): the bit test inside the run finds it, whether
// it went back earlier or earlier in the same run.
TEST_F(CentralFreeListDeathTest, DoubleFreeInsideAnOwnRunCrashes) {
  const size_t cl = SizeMap::ClassIndex(64);
  Init(cl);
  std::vector<void*> objs(20);
  ASSERT_EQ(central_->RemoveBatch(objs.data(), 20), 20);  // blocks of one span
  central_->InsertToSpans(objs.data() + 10, 1);           // block 10 is free again
  std::vector<void*> earlier(objs.begin() + 5, objs.begin() + 15);  // 5..14: 10 in the middle
  EXPECT_DEATH(central_->InsertToSpans(earlier.data(), static_cast<int>(earlier.size())),
               "invalid pointer 0x[0-9a-f]+ \\(double free: the block is already free in its span");
  std::vector<void*> twice(objs.begin(), objs.begin() + 8);
  twice[6] = twice[2];  // the same block twice, four apart
  EXPECT_DEATH(central_->InsertToSpans(twice.data(), static_cast<int>(twice.size())),
               "invalid pointer 0x[0-9a-f]+ \\(double free: the block is already free in its span");
}

// A pointer into a span's tail waste (a multiple of the size past the last object) anywhere
// in a run of that span's objects: the run ends there and the general path names it.
TEST_F(CentralFreeListDeathTest, TailWasteInAnOwnRunCrashes) {
  const size_t cl = SizeMap::ClassIndex(48);
  ASSERT_EQ(SizeMap::ClassPages(cl), 1u);
  ASSERT_GT(kPageSize - SizeMap::ObjectsPerSpan(cl) * 48, 0u);  // 32 bytes past the last object
  Init(cl);
  std::vector<void*> objs(20);
  ASSERT_EQ(central_->RemoveBatch(objs.data(), 20), 20);
  Span* span = t_->pagemap.GetSpan(PageId::FromPtr(objs[0]));
  void* const tail_waste = static_cast<char*>(span->start_ptr()) + SizeMap::ObjectsPerSpan(cl) * 48;
  for (size_t k : {size_t{0}, size_t{10}, size_t{19}}) {
    SCOPED_TRACE(k);
    std::vector<void*> bad = objs;
    bad[k] = tail_waste;
    EXPECT_DEATH(central_->InsertToSpans(bad.data(), static_cast<int>(bad.size())),
                 "invalid pointer 0x[0-9a-f]+ \\(past the last block of its span, size class");
  }
}

// A block of a span whose blocks all came back earlier in the same call: named as a double
// free, as the two-pass path names it.
TEST_F(CentralFreeListDeathTest, BlockOfASpanGivenBackInTheSameCallCrashes) {
  const size_t cl = SizeMap::ClassIndex(64);
  Init(cl);
  const size_t per_span = SizeMap::ObjectsPerSpan(cl);
  std::vector<void*> objs(per_span + 1);
  ASSERT_EQ(central_->RemoveBatch(objs.data(), static_cast<int>(per_span)), static_cast<int>(per_span));
  objs[per_span] = objs[7];
  EXPECT_DEATH(central_->InsertToSpans(objs.data(), static_cast<int>(objs.size())),
               "invalid pointer 0x[0-9a-f]+ \\(double free: its span has no blocks out");
}

TEST_F(CentralFreeListDeathTest, ObjectAlreadyFreeInItsSpanCrashes) {
  Init(SizeMap::ClassIndex(64));
  std::vector<void*> objs;
  ASSERT_EQ(Remove(8, &objs), 8);
  Insert(objs, 3, 4);  // objs[3] is back on its span's list; the span still has 7 out
  EXPECT_DEATH(Insert(objs, 3, 4), "invalid pointer 0x[0-9a-f]+ \\(double free: the block is already free in its span");
}

// One object twice in a run of one span's objects (InsertChunk links a run in locals and
// stores it once): the second sees its bit set by the first.
TEST_F(CentralFreeListDeathTest, SameObjectTwiceInOneRunCrashes) {
  Init(SizeMap::ClassIndex(64));
  std::vector<void*> objs;
  ASSERT_EQ(Remove(8, &objs), 8);
  EXPECT_DEATH(
      {
        NextOf(objs[3]) = objs[3];
        central_->InsertRange(objs[3], 2);
      },
      "invalid pointer 0x[0-9a-f]+ \\(double free: the block is already free in its span");
}

// InsertRange(start, n) looks objects up in chunks before taking the lock: a block that is
// already free, deep in a long chain (after the first chunk went in), is still caught.
TEST_F(CentralFreeListDeathTest, DoubleFreeInALaterChunkCrashes) {
  Init(SizeMap::ClassIndex(64));
  std::vector<void*> objs;
  ASSERT_EQ(Remove(200, &objs), 200);
  Insert(objs, 150, 151);  // objs[150] is free in its span again
  std::vector<void*> chain(objs.begin() + 60, objs.begin() + 160);  // holds objs[150] at 90
  EXPECT_DEATH(Insert(chain, 0, chain.size()),
               "invalid pointer 0x[0-9a-f]+ \\(double free: the block is already free in its span");
}

// The 8-byte class's spans keep lists (a bitmap would cost it 1.6%): links are encoded and
// every decoded one is checked as objects leave the span.
TEST_F(CentralFreeListDeathTest, ForgedLinkOnASpanListCrashesOnRemoval) {
  const std::vector<void*> objs = EightByteSpanWithSevenOnItsList();
  ASSERT_EQ(objs.size(), 8u);
  static char target[4096];
  // A use-after-free write of an address of the writer's choice into every free block.
  for (size_t i = 1; i < 8; ++i) RawWord(objs[i]) = target;
  EXPECT_DEATH(RemoveMore(16),
               "corrupted free list of size class [0-9]+ \\(8 bytes\\): the free block 0x[0-9a-f]+ links to 0x[0-9a-f]+");
}

// A use-after-free that forges an encoded link (the secret leaked, or a stale link copied)
// to a block of the span that was never handed out: that block would leave twice, once as
// the link and once when carving reaches it.
TEST_F(CentralFreeListDeathTest, SpanListLinkToAnUncarvedBlockCrashesOnRemoval) {
  const std::vector<void*> objs = EightByteSpanWithSevenOnItsList();  // from the 9th on never carved
  ASSERT_EQ(objs.size(), 8u);
  for (size_t i = 1; i < 8; ++i) SetSpanLink(objs[i], static_cast<char*>(objs[0]) + 8 * 100);
  EXPECT_DEATH(RemoveMore(16),
               "corrupted free list of size class [0-9]+ \\(8 bytes\\): the free block 0x[0-9a-f]+ links to 0x[0-9a-f]+");
}

// A free of a block of a list span that was never handed out (past the carved ones: an
// address computed from another block, or a block freed after its span went back and was
// reused) is a free of a free block, as a set bit says in a bitmap span. Accepted, the
// block would leave twice: from the list, and again when carving reaches it.
TEST_F(CentralFreeListDeathTest, FreeOfAnUncarvedSpanListBlockCrashes) {
  Init(SizeMap::ClassIndex(8));
  std::vector<void*> objs = RemoveSorted(static_cast<size_t>(central_->transfer_cache()->batch()));
  const std::vector<void*> never{static_cast<char*>(objs.back()) + 8 * 100};  // same span, not carved
  ASSERT_EQ(t_->pagemap.GetSpan(PageId::FromPtr(never[0])), t_->pagemap.GetSpan(PageId::FromPtr(objs[0])));
  EXPECT_DEATH(Insert(never, 0, 1), "invalid pointer 0x[0-9a-f]+ \\(double free: the block is already free in its span");
  Insert(objs, 0, 1);  // a carved one is accepted
}

// A list cut short (a link overwritten with an encoded null) loses the blocks after the cut;
// it is caught when the list ends before the count of blocks on it, not only once the
// span's uncarved tail cannot make up for them.
TEST_F(CentralFreeListDeathTest, SpanListCutShortCrashesOnRemoval) {
  const std::vector<void*> objs = EightByteSpanWithSevenOnItsList();
  ASSERT_EQ(objs.size(), 8u);
  for (size_t i = 1; i < 8; ++i) SetSpanLink(objs[i], nullptr);  // the list is its head alone
  EXPECT_DEATH(RemoveMore(4),
               "corrupted free list of size class [0-9]+ \\(8 bytes\\): the free block 0x[0-9a-f]+ links to \\(nil\\)");
}

TEST_F(CentralFreeListTest, SpanListLinksAreNotPlainPointers) {
  Init(SizeMap::ClassIndex(8));
  std::vector<void*> objs;
  ASSERT_EQ(Remove(3, &objs), 3);
  Insert(objs, 1, 3);  // objs[1] and objs[2] on the span's list, one linking to the other
  EXPECT_TRUE(GetSpanLink(objs[1]) == objs[2] || GetSpanLink(objs[2]) == objs[1]);
  // What is stored in the first word is not the plain address of the other object.
  EXPECT_NE(RawWord(objs[1]), objs[2]);
  EXPECT_NE(RawWord(objs[2]), objs[1]);
  central_->Verify();
}

// A span without a bitmap is not threaded through when it is carved: its objects leave in
// address order as they are taken, freed ones first, and the rest of its memory is not
// written. (Threading a new span wrote every object's first word, 1024 stores and both
// pages of an 8-byte span before the first object was used.)
TEST_F(CentralFreeListTest, ListSpansCarveObjectsAsTheyAreTaken) {
  Init(SizeMap::ClassIndex(8));
  const uint32_t per_span = static_cast<uint32_t>(SizeMap::ClassPages(cl_) * kPageSize / 8);
  std::vector<void*> first;
  ASSERT_EQ(Remove(1, &first), 1);
  Span* span = t_->pagemap.GetSpan(PageId::FromPtr(first[0]));
  ASSERT_NE(span, nullptr);
  char* const base = static_cast<char*>(span->start_ptr());
  EXPECT_EQ(first[0], base);
  // Give the span back with a pattern in its memory; the next span reuses its pages.
  Insert(first, 0, 1);
  ASSERT_EQ(central_->num_spans(), 0u);
  memset(base, 0xab, SizeMap::ClassPages(cl_) * kPageSize);
  std::vector<void*> objs;
  ASSERT_EQ(Remove(100, &objs), 100);
  ASSERT_EQ(objs[0], base) << "the page heap gave another run";
  for (size_t i = 0; i < objs.size(); ++i) EXPECT_EQ(objs[i], base + 8 * i) << "address order";
  for (uint32_t i = 100; i < per_span; ++i)
    ASSERT_EQ(RawWord(base + 8 * i), reinterpret_cast<void*>(~uintptr_t{0} / 0xff * 0xab)) << "object " << i << " written";
  central_->Verify();
  // Freed objects leave before fresh ones; then carving goes on where it stopped.
  Insert(objs, 10, 20);
  std::vector<void*> more;
  ASSERT_EQ(Remove(15, &more), 15);
  std::set<void*> freed(objs.begin() + 10, objs.begin() + 20);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(freed.count(more[i]), 1u) << i;
  for (size_t i = 10; i < 15; ++i) EXPECT_EQ(more[i], base + 8 * (100 + i - 10)) << i;
  central_->Verify();
  // The rest of the span, then a second span: every object once, the span full.
  std::vector<void*> rest;
  const int left = static_cast<int>(per_span - 105);
  while (static_cast<int>(rest.size()) < left + 1) ASSERT_GT(Remove(left + 1 - static_cast<int>(rest.size()), &rest), 0);
  std::vector<void*> all(objs.begin(), objs.begin() + 10);
  all.insert(all.end(), objs.begin() + 20, objs.end());
  all.insert(all.end(), more.begin(), more.end());
  all.insert(all.end(), rest.begin(), rest.end());
  CheckObjects(all);
  EXPECT_EQ(central_->num_spans(), 2u);
  central_->Verify();
  for (size_t i = 0; i < all.size(); ++i) Insert(all, i, i + 1);
  EXPECT_EQ(central_->num_spans(), 0u);
}

// Classes from 16 bytes keep a span's free objects as a bitmap: nothing is read from a
// free object, so a use-after-free write into free blocks cannot steer what is handed out.
// Objects leave a span lowest address first.
TEST_F(CentralFreeListTest, BitmapSpansIgnoreWritesIntoFreeBlocks) {
  Init(SizeMap::ClassIndex(48));
  std::vector<void*> objs;
  ASSERT_EQ(Remove(8, &objs), 8);
  for (size_t i = 1; i < 8; ++i)
    EXPECT_EQ(static_cast<char*>(objs[i]), static_cast<char*>(objs[i - 1]) + 48) << "address order";
  Insert(objs, 1, 8);  // objs[1..7] free in the span, objs[0] keeps the span
  static char target[4096];
  for (size_t i = 1; i < 8; ++i) RawWord(objs[i]) = target;
  std::vector<void*> more;
  ASSERT_EQ(Remove(7, &more), 7);
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(more[i], objs[i + 1]) << "lowest free first";
  central_->Verify();
  Insert(more, 0, 7);
  Insert(objs, 0, 1);
  EXPECT_EQ(central_->num_spans(), 0u);
}

TEST_F(CentralFreeListTest, UncheckedListAcceptsWhatTheCheckedOneRejects) {
  // TCMALLOC_HARDENED=0: no per-object checks, so the double free goes unnoticed here.
  central_ = std::make_unique<CentralFreeList>();
  central_->Init(static_cast<uint8_t>(SizeMap::ClassIndex(64)), &t_->heap, &t_->pagemap, /*checked=*/false);
  cl_ = SizeMap::ClassIndex(64);
  std::vector<void*> objs;
  ASSERT_EQ(Remove(8, &objs), 8);
  EXPECT_FALSE(central_->checked());
  Insert(objs, 0, 7);
}

// Shards: two lists of one class over one heap, as two CPUs' shards are. Objects carved by
// one and freed through the other go back to the spans of the one that carved them.
TEST_F(CentralFreeListTest, ObjectsFreedThroughAnotherShardReturnToTheirOwner) {
  Init(SizeMap::ClassIndex(64));
  CentralFreeList other;
  other.Init(static_cast<uint8_t>(cl_), &t_->heap, &t_->pagemap);
  std::vector<void*> objs;
  ASSERT_EQ(Remove(101, &objs), 101);
  void* const keep = objs.back();  // keeps its span with the owner
  objs.pop_back();
  const size_t owner_free = central_->free_objects();
  for (size_t i = 0; i + 1 < objs.size(); ++i) NextOf(objs[i]) = objs[i + 1];
  NextOf(objs.back()) = nullptr;
  other.InsertRange(objs[0], 100);  // straight to the spans: the owner's
  EXPECT_EQ(other.free_objects(), 0u);
  EXPECT_EQ(other.num_spans(), 0u);
  EXPECT_EQ(central_->free_objects(), owner_free + 100);
  central_->Verify();
  other.Verify();
  // A whole batch freed through the other shard parks in the owner's transfer cache,
  // where the owner's next RemoveBatch takes it without touching a span.
  objs.clear();
  const int batch = static_cast<int>(SizeMap::NumToMove(cl_));
  ASSERT_EQ(Remove(batch, &objs), batch);
  for (size_t i = 0; i + 1 < objs.size(); ++i) NextOf(objs[i]) = objs[i + 1];
  NextOf(objs.back()) = nullptr;
  const size_t before = central_->free_objects();
  (void)other.InsertList(objs.front(), batch, false);
  EXPECT_EQ(other.transfer_objects(), 0u);
  EXPECT_EQ(central_->transfer_objects(), static_cast<size_t>(batch));
  EXPECT_EQ(central_->free_objects(), before);
  std::vector<void*> back(static_cast<size_t>(batch));
  ASSERT_EQ(central_->RemoveBatch(back.data(), batch), batch);
  EXPECT_EQ(std::multiset<void*>(back.begin(), back.end()), std::multiset<void*>(objs.begin(), objs.end()));
  EXPECT_EQ(central_->free_objects(), before);  // none came from the spans
  // The same through an array; with the owner's transfer cache full, the batch parks in
  // the other shard's, and from there it still ends up at the owner's spans.
  central_->InsertBatch(back.data(), batch);
  // One at a time: a whole batch would be taken from the transfer cache.
  auto from_spans = [&] {
    std::vector<void*> got;
    for (int i = 0; i < batch; ++i) EXPECT_EQ(Remove(1, &got), 1);
    return got;
  };
  const int capacity = central_->transfer_cache()->capacity();
  while (static_cast<int>(central_->transfer_objects()) < capacity) {
    std::vector<void*> more = from_spans();
    central_->InsertBatch(more.data(), batch);
  }
  std::vector<void*> last = from_spans();
  const size_t before_last = central_->free_objects();
  other.InsertBatch(last.data(), batch);
  EXPECT_EQ(other.transfer_objects(), static_cast<size_t>(batch));
  other.FlushTransferCache();
  EXPECT_EQ(central_->free_objects(), before_last + static_cast<size_t>(batch));
  EXPECT_EQ(other.num_spans(), 0u);
  central_->FlushTransferCache();
  central_->Verify();
  other.Verify();
  NextOf(keep) = nullptr;
  central_->InsertRange(keep, 1);
}

// A batch whose first and last objects were carved by different shards (a CPU's own
// objects mixed with ones it took before its class was sharded) stays in the transfer
// cache of the shard it was freed through, as an array and as a chain; one whose first and
// last objects the other shard carved parks there.
TEST_F(CentralFreeListTest, MixedBatchesStayWhereTheyWereFreed) {
  Init(SizeMap::ClassIndex(64));
  CentralFreeList other;
  other.Init(static_cast<uint8_t>(cl_), &t_->heap, &t_->pagemap);
  const int batch = static_cast<int>(SizeMap::NumToMove(cl_));
  std::vector<void*> mine;
  std::vector<void*> theirs(static_cast<size_t>(batch));
  ASSERT_EQ(Remove(batch, &mine), batch);  // carved by central_
  ASSERT_EQ(other.RemoveBatch(theirs.data(), batch), batch);  // carved by other
  // Through `other`: first object central_'s, last other's.
  std::vector<void*> mixed(mine.begin(), mine.begin() + batch / 2);
  mixed.insert(mixed.end(), theirs.begin() + batch / 2, theirs.end());
  other.InsertBatch(mixed.data(), batch);
  EXPECT_EQ(other.transfer_objects(), static_cast<size_t>(batch));
  EXPECT_EQ(central_->transfer_objects(), 0u);
  // The same as a chain (thread caches).
  std::vector<void*> chain(theirs.begin(), theirs.begin() + batch / 2);
  chain.insert(chain.begin(), mine.begin() + batch / 2, mine.end());
  ASSERT_EQ(chain.size(), static_cast<size_t>(batch));
  for (size_t i = 0; i + 1 < chain.size(); ++i) NextOf(chain[i]) = chain[i + 1];
  NextOf(chain.back()) = nullptr;
  (void)other.InsertList(chain.front(), batch, false);
  EXPECT_EQ(other.transfer_objects(), 2 * static_cast<size_t>(batch));
  EXPECT_EQ(central_->transfer_objects(), 0u);
  // Taken back through `other` and freed again, central_'s objects alone (first and last
  // both its own): parked with central_.
  std::vector<void*> back(static_cast<size_t>(batch));
  ASSERT_EQ(other.RemoveBatch(back.data(), batch), batch);
  ASSERT_EQ(other.RemoveBatch(back.data(), batch), batch);
  other.InsertBatch(mine.data(), batch);
  EXPECT_EQ(central_->transfer_objects(), static_cast<size_t>(batch));
  EXPECT_EQ(other.transfer_objects(), 0u);
  other.InsertBatch(theirs.data(), batch);  // other's own
  EXPECT_EQ(other.transfer_objects(), static_cast<size_t>(batch));
  other.FlushTransferCache();
  central_->FlushTransferCache();
  central_->Verify();
  other.Verify();
}

TEST_F(CentralFreeListDeathTest, DoubleFreeThroughAnotherShardCrashes) {
  Init(SizeMap::ClassIndex(64));
  static CentralFreeList other;
  other.Init(static_cast<uint8_t>(cl_), &t_->heap, &t_->pagemap);
  std::vector<void*> objs;
  ASSERT_EQ(Remove(8, &objs), 8);
  Insert(objs, 3, 4);  // objs[3] is free in its span (the owner's) again
  std::vector<void*> again(objs.begin() + 2, objs.begin() + 5);
  for (size_t i = 0; i + 1 < again.size(); ++i) NextOf(again[i]) = again[i + 1];
  NextOf(again.back()) = nullptr;
  EXPECT_DEATH(other.InsertRange(again[0], 3),
               "invalid pointer 0x[0-9a-f]+ \\(double free: the block is already free in its span");
}

// ---- the batch check of arrays, four objects a step (AVX2) and one at a time ----

// The vector step must accept exactly what the one-object loop accepts without a change of
// its state, so both decide every batch alike: random batches of segments of a span's
// blocks, rising or falling, over several spans, go through the duplicate filter in one
// mode exactly when they do in the other (and are parked in both).
TEST_F(CentralFreeListTest, VectorAndScalarBatchChecksDecideAlike) {
  for (size_t size : {size_t{48}, size_t{256}, size_t{1024}}) {
    const size_t cl = SizeMap::ClassIndex(size);
    Init(cl);
    if (!central_->vector_check()) GTEST_SKIP() << "the CPU has no AVX2: only the one-object loop runs";
    const size_t batch = static_cast<size_t>(central_->transfer_cache()->batch());
    std::vector<void*> fresh = RemoveSorted(16 * batch);
    // Blocks in order: all but the first pass four at a time, except a group that enters
    // another span (and the one to three at the end, should that group be taken alone).
    size_t span_changes = 0;
    for (size_t i = 1; i < batch; ++i)
      span_changes += t_->pagemap.GetSpan(PageId::FromPtr(fresh[i])) != t_->pagemap.GetSpan(PageId::FromPtr(fresh[i - 1]));
    const size_t vector_passed = central_->vector_checked_objects();
    central_->InsertBatch(fresh.data(), static_cast<int>(batch));
    ASSERT_EQ(central_->RemoveBatch(fresh.data(), static_cast<int>(batch)), static_cast<int>(batch));
    std::sort(fresh.begin(), fresh.end());
    EXPECT_GE(central_->vector_checked_objects(), vector_passed + batch - 1 - 4 * span_changes - 3) << size;
    std::mt19937 rng(static_cast<unsigned>(size));
    size_t filtered_batches[2] = {0, 0};
    for (int round = 0; round < 2000; ++round) {
      // Segments of 1-12 neighbouring blocks (from a random place, either way up), none
      // used twice.
      std::vector<char> used(fresh.size(), 0);
      std::vector<void*> objs;
      while (objs.size() < batch) {
        const size_t start = rng() % fresh.size();
        const size_t len = 1 + rng() % 12;
        const bool falling = rng() % 2 == 1;
        for (size_t j = 0; j < len && objs.size() < batch; ++j) {
          const size_t i = falling ? start - j : start + j;
          if (i >= fresh.size() || used[i]) break;
          used[i] = 1;
          objs.push_back(fresh[i]);
        }
      }
      bool filtered[2];
      for (int vector = 0; vector < 2; ++vector) {
        central_->SetVectorCheck(vector == 1);
        const size_t before = central_->filtered_batches();
        central_->InsertBatch(objs.data(), static_cast<int>(batch));
        ASSERT_EQ(central_->transfer_objects(), batch);
        std::vector<void*> back(batch);
        ASSERT_EQ(central_->RemoveBatch(back.data(), static_cast<int>(batch)), static_cast<int>(batch));
        filtered[vector] = central_->filtered_batches() != before;
        filtered_batches[vector] += filtered[vector];
      }
      ASSERT_EQ(filtered[0], filtered[1]) << "size " << size << ", round " << round;
    }
    // Both outcomes occurred (the batches are not all of one kind).
    EXPECT_GT(filtered_batches[0], 0u) << size;
    EXPECT_LT(filtered_batches[0], 2000u) << size;
    central_->InsertToSpans(fresh.data(), static_cast<int>(fresh.size()));
    central_->Verify();
  }
}

class BatchCheckModeDeathTest : public CentralFreeListTest, public ::testing::WithParamInterface<bool> {
 protected:
  // A batch of neighbouring blocks of class `size`, rising, in the mode under test.
  std::vector<void*> FreshBatch(size_t size) {
    Init(SizeMap::ClassIndex(size));
    central_->SetVectorCheck(GetParam());
    const size_t batch = static_cast<size_t>(central_->transfer_cache()->batch());
    std::vector<void*> objs(batch);
    EXPECT_EQ(central_->RemoveBatch(objs.data(), static_cast<int>(batch)), static_cast<int>(batch));
    std::sort(objs.begin(), objs.end());
    return objs;
  }
  void InsertExpectingDeath(std::vector<void*> objs, const char* message) {
    EXPECT_DEATH(central_->InsertBatch(objs.data(), static_cast<int>(objs.size())), message);
  }
};

// Each kind of bad pointer at every place of a batch: the first object (checked one at a
// time), every lane of the vector step's groups and the last group, which overlaps the one
// before when the batch is not a multiple of four. In address order, and in three runs
// (0-9 rising, 31-22 falling after a jump, 10-21 rising after a turn), where the vector
// step fails and resumes mid-batch: an object skipped at a resume would go unreported.
TEST_P(BatchCheckModeDeathTest, MisuseAtEveryPlaceOfAnArrayBatchCrashes) {
  if (GetParam() && !CentralFreeList::VectorCheckAvailable()) GTEST_SKIP() << "the CPU has no AVX2";
  const std::vector<void*> sorted = FreshBatch(48);
  const size_t cl = SizeMap::ClassIndex(48);
  ASSERT_EQ(central_->vector_check(), GetParam());
  ASSERT_EQ(sorted.size(), 32u);
  std::vector<void*> three(sorted.begin(), sorted.begin() + 10);
  for (size_t i = 31; i >= 22; --i) three.push_back(sorted[i]);
  for (size_t i = 10; i < 22; ++i) three.push_back(sorted[i]);
  Span* span = t_->pagemap.GetSpan(PageId::FromPtr(sorted[0]));
  void* const tail_waste = static_cast<char*>(span->start_ptr()) + SizeMap::ObjectsPerSpan(cl) * 48;
  static void* not_ours[2] = {nullptr, nullptr};
  const std::vector<void*>* const arrangements[] = {&sorted, &three};
  for (const std::vector<void*>* objs : arrangements) {
    SCOPED_TRACE(objs == &sorted ? "address order" : "three runs");
    for (size_t k = 0; k < objs->size(); ++k) {
      SCOPED_TRACE(k);
      std::vector<void*> bad = *objs;
      bad[k] = static_cast<char*>((*objs)[k]) + 16;
      InsertExpectingDeath(bad, "invalid pointer 0x[0-9a-f]+ \\(16 bytes into a block of size class");
      bad[k] = &not_ours[0];
      InsertExpectingDeath(bad, "invalid pointer 0x[0-9a-f]+ \\(not a block of size class");
      bad[k] = tail_waste;
      InsertExpectingDeath(bad, "invalid pointer 0x[0-9a-f]+ \\(past the last block of its span, size class");
      if (k >= 1) {
        bad[k] = (*objs)[k - 1];  // twice in a row
        InsertExpectingDeath(bad, "invalid pointer 0x[0-9a-f]+ \\(double free: the block is in the same batch twice");
      }
      if (k >= 2) {
        bad[k] = (*objs)[k - 2];  // twice with one between: a turn, then overlapping runs
        InsertExpectingDeath(bad, "invalid pointer 0x[0-9a-f]+ \\(double free: the block is in the same batch twice");
      }
    }
  }
  // The three-run batch itself is fine.
  central_->InsertBatch(three.data(), static_cast<int>(three.size()));
  EXPECT_EQ(central_->transfer_objects(), three.size());
}

INSTANTIATE_TEST_SUITE_P(VectorOrNot, BatchCheckModeDeathTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "FourAStep" : "OneAtATime";
                         });

TEST(CentralShards, APowerOfTwoUpToTheCpusAndTheLimit) {
  EXPECT_EQ(CentralShardsFor(0), 1);
  EXPECT_EQ(CentralShardsFor(1), 1);
  EXPECT_EQ(CentralShardsFor(2), 2);
  EXPECT_EQ(CentralShardsFor(3), 2);
  EXPECT_EQ(CentralShardsFor(6), 4);
  EXPECT_EQ(CentralShardsFor(64), kMaxCentralShards);
}

// Lists of shards other than 0 are set up on first use: CentralOf runs the installed
// set-up for a list that is not ready, once.
CentralFreeList g_lazy_lists[2 * kNumClasses];
testing::TestHeap* g_lazy_heap = nullptr;
int g_set_ups = 0;
void SetUpForTest(const CentralFreeList* list) {
  ++g_set_ups;
  const size_t i = static_cast<size_t>(list - g_lazy_lists);
  g_lazy_lists[i].Init(static_cast<uint8_t>(i % kNumClasses), &g_lazy_heap->heap, &g_lazy_heap->pagemap);
}

// g_lazy_lists over a fresh heap, set up on first use, two shards (no class sharded yet).
class LazyListsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_lazy_heap = heap_.get();
    SetCentralSetUp(&SetUpForTest);
    shards_.count = 2;
    g_set_ups = 0;
  }
  void TearDown() override { SetCentralSetUp(nullptr); }
  std::unique_ptr<testing::TestHeap> heap_ = testing::TestHeap::Make();
  CentralShards shards_;
};

TEST_F(LazyListsTest, AListIsSetUpOnFirstUseAndOnlyThen) {
  const size_t cl = SizeMap::ClassIndex(32);
  CentralShards& shards = shards_;
  shards.sharded[cl] = true;
  EXPECT_FALSE(g_lazy_lists[kNumClasses + cl].ready());
  CentralFreeList& list = CentralOf(g_lazy_lists, &shards, /*cpu=*/3, cl);  // CPU 3: shard 1
  EXPECT_EQ(&list, &g_lazy_lists[kNumClasses + cl]);
  EXPECT_TRUE(list.ready());
  EXPECT_EQ(g_set_ups, 1);
  EXPECT_EQ(&CentralOf(g_lazy_lists, &shards, 1, cl), &list);
  EXPECT_EQ(g_set_ups, 1);
  EXPECT_FALSE(g_lazy_lists[cl].ready());  // shard 0's list was never asked for
  void* start;
  void* end;
  ASSERT_EQ(list.RemoveRange(&start, &end, 1), 1);
  NextOf(start) = nullptr;
  list.InsertRange(start, 1);
  list.Verify();
}

TEST(CentralShardsDeathTest, AListUsedWithoutASetUpCrashes) {
  static CentralFreeList lists[kNumClasses];
  SetCentralSetUp(nullptr);
  EXPECT_DEATH(CentralOf(lists, nullptr, 0, 1), "a central list was used before it was set up");
}

// A class that is not sharded uses shard 0's list from every CPU (its other lists are not
// even set up); once sharded, each CPU its own shard's.
TEST_F(LazyListsTest, AClassUsesShardZeroUntilItIsSharded) {
  const size_t cl = SizeMap::ClassIndex(48);
  CentralShards& shards = shards_;
  for (int cpu : {-1, 0, 1, 2, 3}) EXPECT_EQ(&CentralOf(g_lazy_lists, &shards, cpu, cl), &g_lazy_lists[cl]) << cpu;
  EXPECT_FALSE(g_lazy_lists[kNumClasses + cl].ready());
  shards.sharded[cl] = true;
  EXPECT_EQ(&CentralOf(g_lazy_lists, &shards, 0, cl), &g_lazy_lists[cl]);
  EXPECT_EQ(&CentralOf(g_lazy_lists, &shards, 2, cl), &g_lazy_lists[cl]);
  EXPECT_EQ(&CentralOf(g_lazy_lists, &shards, 3, cl), &g_lazy_lists[kNumClasses + cl]);
  EXPECT_EQ(&CentralOf(g_lazy_lists, &shards, -1, cl), &g_lazy_lists[cl]);  // CPU not known
  // Only this class: another one stays on shard 0.
  EXPECT_EQ(&CentralOf(g_lazy_lists, &shards, 3, SizeMap::ClassIndex(64)), &g_lazy_lists[SizeMap::ClassIndex(64)]);
}

// The hand-off watch: calls to a shard-0 list from CPUs of different shards in turn, at
// kShardAfterHandoffs within kShardWindowNs, run the ShardClassHook (once); as many
// spread over a longer time do not, nor do calls from CPUs of one shard. Time is the
// test's clock (SetHandoffClock), which moves only when a test moves it: on the real
// clock, two pinned threads calling in turn beside other tests on the same two CPUs each
// waited out a scheduler slice (20815 hand-offs over 14 s in one CI run, never 1024 in a
// window), so these tests had to run alone and retry.
std::atomic<uint64_t> g_now{0};
uint64_t TestNow() { return g_now.load(); }
std::atomic<int> g_contended_calls{0};
std::atomic<size_t> g_contended_class{0};
void CountContended(size_t cl) {
  g_contended_calls.fetch_add(1);
  g_contended_class.store(cl);
}

// A front-end call (each notes its caller's shard): one object out and back.
void FrontEndCall(CentralFreeList& list) {
  void* obj;
  ASSERT_EQ(list.RemoveBatch(&obj, 1), 1);
  list.InsertBatch(&obj, 1);
}

// `calls` front-end calls from two threads pinned to CPUs 0 and 1, strictly in turn.
void CallsInTurnFromCpus0And1(CentralFreeList& list, int calls) {
  std::atomic<int> turn{0};
  auto side = [&](int me) {
    ASSERT_TRUE(os::PinToCpu(me));
    for (int i = me; i < calls; i += 2) {
      // Yield while waiting: on a loaded machine the other side may need this CPU's turn.
      while (turn.load(std::memory_order_acquire) != i) std::this_thread::yield();
      FrontEndCall(list);
      turn.store(i + 1, std::memory_order_release);
    }
  };
  std::thread a(side, 0);
  std::thread b(side, 1);
  a.join();
  b.join();
}

// Two CPUs that refill from one list in turn, in small and growing pieces (a per-CPU
// cache's slow start: 1, 2, 4, ... objects), carve spans of their own: no span, and so no
// cache line, holds objects of both. Taking from the front span alone, they got its
// objects in turn, and two threads on two CPUs then wrote into the same lines for as long
// as those objects circulated (stl_mix on two threads: 1.3x the CPU time of one thread's
// work twice).
TEST_F(CentralFreeListTest, CpusTakingInTurnCarveSpansOfTheirOwn) {
  if (os::AllowedCpuCount() < 2) GTEST_SKIP() << "needs CPUs 0 and 1";
  if (os::InitRseq(/*allow_own=*/false) == os::RseqSource::kNone) GTEST_SKIP() << "no rseq area: CPU not known";
  Init(SizeMap::ClassIndex(32));
  std::vector<void*> taken[2];
  std::atomic<int> turn{0};
  constexpr int kCalls = 40;
  auto side = [&](int me) {
    ASSERT_TRUE(os::PinToCpu(me));
    for (int i = me; i < kCalls; i += 2) {
      while (turn.load(std::memory_order_acquire) != i) std::this_thread::yield();
      void* objs[kMaxTransferBatch];
      const int want = 1 << ((i / 2) % 8);  // 1, 2, 4, ..., 128, then again
      const int got = central_->RemoveBatch(objs, want);
      EXPECT_EQ(got, want);
      for (int k = 0; k < got; ++k) taken[me].push_back(objs[k]);
      turn.store(i + 1, std::memory_order_release);
    }
  };
  std::thread a(side, 0);
  std::thread b(side, 1);
  a.join();
  b.join();
  std::set<Span*> spans[2];
  for (int me = 0; me < 2; ++me)
    for (void* o : taken[me]) spans[me].insert(t_->pagemap.GetSpan(PageId::FromPtr(o)));
  for (Span* s : spans[0]) EXPECT_EQ(spans[1].count(s), 0u) << "a span carved by both CPUs";
  std::vector<void*> all = taken[0];
  all.insert(all.end(), taken[1].begin(), taken[1].end());
  CheckObjects(all);
  // Each CPU's objects fill whole spans but its last: no span more than the two need.
  const size_t per_span = SizeMap::ObjectsPerSpan(cl_);
  for (int me = 0; me < 2; ++me) EXPECT_EQ(spans[me].size(), (taken[me].size() + per_span - 1) / per_span);
  for (size_t i = 0; i < all.size(); i += kMaxTransferBatch)
    central_->InsertBatch(all.data() + i, static_cast<int>(std::min<size_t>(kMaxTransferBatch, all.size() - i)));
  VerifyHeap();
}

// A span that goes back to the page heap whole is no CPU's cursor any more: the next
// refill carves a live span, not the released record.
TEST_F(CentralFreeListTest, ASpanGivenBackWholeIsNoLongerTakenFrom) {
  Init(SizeMap::ClassIndex(32));
  const int per_span = static_cast<int>(SizeMap::ObjectsPerSpan(cl_));
  for (int round = 0; round < 3; ++round) {
    std::vector<void*> objs;
    ASSERT_EQ(Remove(per_span / 2, &objs), per_span / 2);  // from the cursor span
    CheckObjects(objs);
    Insert(objs, 0, objs.size());  // every object back: the span leaves the list
    EXPECT_EQ(HeapSpans(), 0u) << "round " << round;
  }
  std::vector<void*> objs;
  ASSERT_EQ(Remove(8, &objs), 8);
  CheckObjects(objs);
  Insert(objs, 0, objs.size());
  VerifyHeap();
}

class HandoffWatchTest : public CentralFreeListTest {
 protected:
  void SetUp() override {
    if (os::AllowedCpuCount() < 2) GTEST_SKIP() << "needs CPUs 0 and 1";
    if (os::InitRseq(/*allow_own=*/false) == os::RseqSource::kNone) GTEST_SKIP() << "no rseq area: CPU not known";
    Init(SizeMap::ClassIndex(64));
    g_contended_calls = 0;
    g_now = 1'000'000'000;
    SetHandoffClock(&TestNow);
    SetShardClassHook(&CountContended);
  }
  void TearDown() override {
    SetShardClassHook(nullptr);
    SetHandoffClock(nullptr);
  }
};

TEST_F(HandoffWatchTest, HandoffsComingFastShardTheClassOnce) {
  central_->WatchHandoffs(2);
  EXPECT_TRUE(central_->watching_handoffs());
  CallsInTurnFromCpus0And1(*central_, 16);
  EXPECT_EQ(g_contended_calls, 0);
  CallsInTurnFromCpus0And1(*central_, CentralFreeList::kShardAfterHandoffs + 16);
  EXPECT_EQ(g_contended_calls, 1);
  EXPECT_EQ(g_contended_class, cl_);
  EXPECT_FALSE(central_->watching_handoffs());
  const uint32_t counted = central_->handoffs();
  CallsInTurnFromCpus0And1(*central_, 2 * CentralFreeList::kShardAfterHandoffs);
  EXPECT_EQ(g_contended_calls, 1);  // watching stopped
  EXPECT_EQ(central_->handoffs(), counted);
}

TEST_F(HandoffWatchTest, HandoffsComingSlowlyDoNotShard) {
  central_->WatchHandoffs(2);
  CallsInTurnFromCpus0And1(*central_, CentralFreeList::kShardAfterHandoffs / 2);
  g_now += CentralFreeList::kShardWindowNs + 1;
  // Enough hand-offs since watching began, but over more than the window: a new one starts.
  CallsInTurnFromCpus0And1(*central_, CentralFreeList::kShardAfterHandoffs / 2 + 16);
  EXPECT_GE(central_->handoffs(), CentralFreeList::kShardAfterHandoffs);
  EXPECT_EQ(g_contended_calls, 0);
  EXPECT_TRUE(central_->watching_handoffs());
  // The new window counts from where the old one ended; within it, the class shards.
  CallsInTurnFromCpus0And1(*central_, CentralFreeList::kShardAfterHandoffs);
  EXPECT_EQ(g_contended_calls, 1);
}

// The window's end is inclusive: hand-offs that took exactly kShardWindowNs shard.
TEST_F(HandoffWatchTest, HandoffsAtTheWindowsEndStillShard) {
  central_->WatchHandoffs(2);
  CallsInTurnFromCpus0And1(*central_, CentralFreeList::kShardAfterHandoffs / 2);
  g_now += CentralFreeList::kShardWindowNs;
  CallsInTurnFromCpus0And1(*central_, CentralFreeList::kShardAfterHandoffs / 2 + 16);
  EXPECT_EQ(g_contended_calls, 1);
}

TEST_F(HandoffWatchTest, CpusOfOneShardHandNothingOver) {
  central_->WatchHandoffs(1);  // one shard: CPUs 0 and 1 both use shard 0
  CallsInTurnFromCpus0And1(*central_, 2 * CentralFreeList::kShardAfterHandoffs);
  EXPECT_EQ(central_->handoffs(), 0u);
  EXPECT_EQ(g_contended_calls, 0);
}

TEST_F(HandoffWatchTest, AListNotWatchedCountsNothing) {
  CallsInTurnFromCpus0And1(*central_, 2 * CentralFreeList::kShardAfterHandoffs);
  EXPECT_EQ(central_->handoffs(), 0u);
  EXPECT_EQ(g_contended_calls, 0);
}

}  // namespace
}  // namespace tcm
