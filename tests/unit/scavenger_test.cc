// Scavenger: the maintenance pass over a private heap and private central lists, driven
// with synthetic times, so what a pass releases (and when) is exactly what the idle-time
// rule says.
#include "core/scavenger.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/size_classes.h"
#include "test_heap.h"

namespace tcm {
namespace {

constexpr uint64_t kSecond = 1'000'000'000;

// The front end's neighbour: records the passes it was called from.
uint64_t g_front_end_calls = 0;
uint64_t g_front_end_last_now = 0;
size_t g_front_end_returns = 0;  // bytes the front end says it gave back
size_t CountingShrinker(uint64_t now_ns) {
  ++g_front_end_calls;
  g_front_end_last_now = now_ns;
  return g_front_end_returns;
}

class ScavengerTest : public ::testing::Test {
 protected:
  ScavengerTest() {
    g_front_end_calls = 0;
    g_front_end_returns = 0;
    for (size_t cl = 1; cl < kNumClasses; ++cl)
      central_[cl].Init(static_cast<uint8_t>(cl), &t_->heap, &t_->pagemap);
    scavenger_->Init(&t_->heap, central_.get(), kNumClasses, &CountingShrinker);
  }
  Span* New(uintptr_t pages) {
    SpinLockHolder h(t_->heap.lock());
    return t_->heap.New(Length{pages});
  }
  void Delete(Span* s) {
    SpinLockHolder h(t_->heap.lock());
    t_->heap.Delete(s);
  }
  PageHeapStats Stats() {
    SpinLockHolder h(t_->heap.lock());
    return t_->heap.stats();
  }

  std::unique_ptr<testing::TestHeap> t_ = testing::TestHeap::Make();
  std::unique_ptr<CentralFreeList[]> central_ = std::make_unique<CentralFreeList[]>(kNumClasses);
  std::unique_ptr<Scavenger> scavenger_ = std::make_unique<Scavenger>();
};

TEST_F(ScavengerTest, ReleasesOnlyRunsIdleLongerThanTheIdleTime) {
  const uint64_t t0 = 10 * kSecond;
  EXPECT_EQ(scavenger_->Maintain(t0), 0u);  // stamps the heap's clock with t0
  Span* s = New(64);
  ASSERT_NE(s, nullptr);
  Delete(s);  // free since t0 (with the rest of the 1 MiB chunk)
  ASSERT_EQ(scavenger_->idle_time(), Scavenger::kBaseIdleTime);
  EXPECT_EQ(scavenger_->Maintain(t0 + Scavenger::kBaseIdleTime / 2), 0u) << "released memory idle for half the idle time";
  EXPECT_EQ(Stats().unmapped_bytes, 0u);
  const size_t released = scavenger_->Maintain(t0 + Scavenger::kBaseIdleTime + 1);
  EXPECT_EQ(released, kMinSystemAlloc);
  EXPECT_EQ(Stats().unmapped_bytes, kMinSystemAlloc);
  EXPECT_EQ(Stats().free_bytes, 0u);
  EXPECT_EQ(scavenger_->released_bytes(), kMinSystemAlloc);
}

TEST_F(ScavengerTest, HigherReleaseRateShortensTheIdleTime) {
  scavenger_->set_release_rate(10);
  EXPECT_EQ(scavenger_->idle_time(), Scavenger::kBaseIdleTime / 10);
  const uint64_t t0 = 10 * kSecond;
  scavenger_->Maintain(t0);
  Delete(New(8));
  EXPECT_EQ(scavenger_->Maintain(t0 + Scavenger::kBaseIdleTime / 5), kMinSystemAlloc);
}

TEST_F(ScavengerTest, RateZeroNeverReleasesAndTurnsTheSurplusRuleOff) {
  scavenger_->set_release_rate(1);
  {
    SpinLockHolder h(t_->heap.lock());
    EXPECT_TRUE(t_->heap.surplus_release());
  }
  scavenger_->set_release_rate(0);
  EXPECT_EQ(scavenger_->idle_time(), 0u);
  {
    SpinLockHolder h(t_->heap.lock());
    EXPECT_FALSE(t_->heap.surplus_release());
  }
  scavenger_->Maintain(10 * kSecond);
  Delete(New(8));
  EXPECT_EQ(scavenger_->Maintain(1000 * kSecond), 0u);
  EXPECT_EQ(Stats().unmapped_bytes, 0u);
  scavenger_->set_release_rate(-3);  // bad input: treated as 0
  EXPECT_EQ(scavenger_->release_rate(), 0.0);
}

// What the front end gave back sat in an idle cache: the spans it emptied are stamped free
// now, yet as many bytes go to the OS in the same pass, not an idle time later: from runs
// free for more than kRecentRunAge, not from one the program freed just before the pass
// (a block it takes back at its next call).
TEST_F(ScavengerTest, WhatTheFrontEndGaveBackIsReleasedInTheSamePass) {
  const uint64_t t0 = 10 * kSecond;
  scavenger_->Maintain(t0);
  Delete(New(8));  // free since t0: not idle (kBaseIdleTime) at the passes below
  g_front_end_returns = 8 * kPageSize;
  EXPECT_EQ(scavenger_->Maintain(t0 + 1), 0u) << "a run freed just before the pass";
  EXPECT_EQ(Stats().unmapped_bytes, 0u);
  g_front_end_returns = 8 * kPageSize;
  EXPECT_EQ(scavenger_->Maintain(t0 + Scavenger::kRecentRunAge), 0u) << "a run free for kRecentRunAge exactly";
  g_front_end_returns = 8 * kPageSize;
  EXPECT_GE(scavenger_->Maintain(t0 + Scavenger::kRecentRunAge + Scavenger::kTickInterval), 8 * kPageSize);
  EXPECT_GE(Stats().unmapped_bytes, 8 * kPageSize);
}

TEST_F(ScavengerTest, WhatTheFrontEndGaveBackStaysWhenReleaseIsOff) {
  scavenger_->set_release_rate(0);
  const uint64_t t0 = 10 * kSecond;
  scavenger_->Maintain(t0);
  Delete(New(8));
  g_front_end_returns = 8 * kPageSize;
  EXPECT_EQ(scavenger_->Maintain(t0 + 1), 0u);
  EXPECT_EQ(Stats().unmapped_bytes, 0u);
}

TEST_F(ScavengerTest, EveryPassGivesTheFrontEndItsTurnWithThePassTime) {
  scavenger_->Maintain(5 * kSecond);
  scavenger_->Maintain(6 * kSecond);
  EXPECT_EQ(g_front_end_calls, 2u);
  EXPECT_EQ(g_front_end_last_now, 6 * kSecond);
  EXPECT_EQ(scavenger_->passes(), 2u);
}

TEST_F(ScavengerTest, IdleTransferCacheChainsGoBackToTheirSpans) {
  const size_t cl = SizeMap::ClassIndex(64);
  CentralFreeList& c = central_[cl];
  const int batch = c.transfer_cache()->batch();
  void* start;
  void* end;
  ASSERT_EQ(c.RemoveRange(&start, &end, batch), batch);
  (void)c.InsertList(start, batch, false);  // a whole batch: parked in the transfer cache
  ASSERT_EQ(c.transfer_objects(), static_cast<size_t>(batch));
  ASSERT_EQ(c.num_spans(), 1u);
  scavenger_->Maintain(1 * kSecond);  // the cache was used since the last pass: kept
  EXPECT_EQ(c.transfer_objects(), static_cast<size_t>(batch));
  scavenger_->Maintain(2 * kSecond);  // unused for a whole pass: drained
  EXPECT_EQ(c.transfer_objects(), 0u);
  EXPECT_EQ(c.num_spans(), 0u) << "the span whose objects all came back stayed with the class";
  EXPECT_EQ(Stats().in_use_spans, 0u);
}

// A class in light use (a batch taken and given back between passes) keeps parked only
// what that use reaches: the batches below the low-water mark go back to their spans, and
// spans whose objects are all back leave the class. Before, any use between two passes
// kept the whole cache, and a lightly used class held its 512 KiB of parked objects (and
// their spans) for good.
TEST_F(ScavengerTest, LightlyUsedTransferCacheKeepsOnlyWhatItsUseReaches) {
  const size_t cl = SizeMap::ClassIndex(4096);
  CentralFreeList& c = central_[cl];
  TransferCache& tc = *c.transfer_cache();
  const int batch = tc.batch();
  const int batches = tc.capacity() / batch;
  ASSERT_GE(batches, 4);
  std::vector<void*> objs(static_cast<size_t>(batch * batches));
  for (int b = 0; b < batches; ++b) ASSERT_EQ(c.RemoveBatch(objs.data() + b * batch, batch), batch);
  const size_t spans = c.num_spans();
  for (int b = 0; b < batches; ++b) c.InsertBatch(objs.data() + b * batch, batch);
  ASSERT_EQ(c.transfer_objects(), objs.size());
  std::vector<void*> one(static_cast<size_t>(batch));
  for (uint64_t pass = 1; pass <= 3; ++pass) {
    scavenger_->Maintain(pass * kSecond);
    ASSERT_EQ(c.RemoveBatch(one.data(), batch), batch);  // light use: one batch out and back
    c.InsertBatch(one.data(), batch);
  }
  EXPECT_EQ(c.transfer_objects(), static_cast<size_t>(batch));
  EXPECT_LT(c.num_spans(), spans) << "the drained batches' spans stayed with the class";
  c.FlushTransferCache();
  EXPECT_EQ(c.num_spans(), 0u);
}

// An empty span a list kept for its next allocations goes back to the page heap at the
// first pass in whose interval no allocation took it back, and from there to the OS once
// idle.
TEST_F(ScavengerTest, KeptSpansOfAnIdleListGoBackAndOut) {
  ByteBudget budget;
  budget.Init(1 << 20);
  const size_t cl = SizeMap::ClassIndex(64);
  CentralFreeList& c = central_[cl];
  c.Init(static_cast<uint8_t>(cl), &t_->heap, &t_->pagemap, true, &budget);
  const int n = static_cast<int>(SizeMap::ObjectsPerSpan(cl));
  std::vector<void*> objs(static_cast<size_t>(n));
  ASSERT_EQ(c.RemoveBatch(objs.data(), n), n);
  c.InsertToSpans(objs.data(), n);
  ASSERT_EQ(c.kept_spans(), 1u);
  ASSERT_EQ(Stats().in_use_spans, 1u);
  ASSERT_EQ(c.RemoveBatch(objs.data(), n), n);  // taken back in this interval
  c.InsertToSpans(objs.data(), n);
  scavenger_->Maintain(1 * kSecond);  // reused since the last pass: kept
  EXPECT_EQ(c.kept_spans(), 1u);
  const PageHeapStats before = Stats();
  scavenger_->Maintain(2 * kSecond);  // not taken back for a whole interval: given back
  EXPECT_EQ(c.kept_spans(), 0u);
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_EQ(Stats().in_use_spans, 0u);
  EXPECT_EQ(Stats().free_bytes + Stats().unmapped_bytes, before.free_bytes + before.unmapped_bytes + kPageSize);
  // From there the page heap's idle release takes it to the OS like any free run.
  scavenger_->Maintain(2 * kSecond + scavenger_->idle_time() + kSecond);
  EXPECT_GE(Stats().unmapped_bytes, before.unmapped_bytes + kPageSize) << "the kept span's page stayed resident";
  c.Verify();
}

// The front end's idle objects free whole spans whose other objects were already free in
// the central list: the pass releases the runs that became free, not only as many bytes
// as the objects themselves (which left all but one of those runs for another idle period).
std::vector<void*>* g_front_end_objects = nullptr;
CentralFreeList* g_front_end_central = nullptr;
size_t ReturningShrinker(uint64_t) {
  g_front_end_central->InsertToSpans(g_front_end_objects->data(), static_cast<int>(g_front_end_objects->size()));
  const size_t bytes = g_front_end_objects->size() * SizeMap::ClassSize(SizeMap::ClassIndex(64));
  g_front_end_objects->clear();
  return bytes;
}

TEST_F(ScavengerTest, RunsFreedByTheFrontEndsObjectsGoInTheSamePass) {
  const size_t cl = SizeMap::ClassIndex(64);
  CentralFreeList& c = central_[cl];
  const size_t per_span = SizeMap::ObjectsPerSpan(cl);
  ASSERT_EQ(SizeMap::ClassPages(cl), 1u);
  const uint64_t t0 = 10 * kSecond;
  scavenger_->Maintain(t0);
  // Eight one-page spans, all objects out; then every other span back but one object each
  // (the "front end" keeps it), the others stay out, so the spans freed later are not
  // neighbours and do not merge into one run.
  constexpr size_t kSpans = 8;
  std::vector<void*> objs(kSpans * per_span);
  for (size_t i = 0; i < objs.size(); i += per_span)
    ASSERT_EQ(c.RemoveBatch(objs.data() + i, static_cast<int>(per_span)), static_cast<int>(per_span));
  Span* rest = New(Stats().free_bytes / kPageSize);  // the rest of the heap's chunk, in use
  ASSERT_NE(rest, nullptr);
  ASSERT_EQ(Stats().free_bytes, 0u);
  std::vector<void*> kept;
  for (size_t sp = 0; sp < kSpans; sp += 2) {
    void** first = objs.data() + sp * per_span;
    c.InsertToSpans(first + 1, static_cast<int>(per_span) - 1);
    kept.push_back(first[0]);
  }
  ASSERT_EQ(Stats().free_bytes, 0u);
  g_front_end_objects = &kept;
  g_front_end_central = &c;
  Scavenger s;
  s.Init(&t_->heap, central_.get(), kNumClasses, &ReturningShrinker);
  s.Maintain(t0 + 1);  // nothing idle by time: only what the front end freed goes
  EXPECT_EQ(Stats().free_bytes, 0u) << "runs freed by the front end's objects were kept";
  EXPECT_GE(Stats().unmapped_bytes, kSpans / 2 * kPageSize);
  for (size_t sp = 1; sp < kSpans; sp += 2)
    c.InsertToSpans(objs.data() + sp * per_span, static_cast<int>(per_span));
  Delete(rest);
}

TEST_F(ScavengerTest, APassBeforeInitDoesNothing) {
  Scavenger fresh;
  EXPECT_EQ(fresh.Maintain(kSecond), 0u);
  EXPECT_EQ(fresh.passes(), 0u);
}

TEST_F(ScavengerTest, TickRunsAPassAtMostOncePerTickInterval) {
  // The real clock: the first tick runs a pass (the last one was "at time 0"); ticks in a
  // burst right after it find the pass too recent. (No timing assertion: a burst of three
  // calls cannot span kTickInterval.)
  scavenger_->Tick();
  const uint64_t after_first = scavenger_->passes();
  EXPECT_EQ(after_first, 1u);
  scavenger_->Tick();
  scavenger_->Tick();
  EXPECT_LE(scavenger_->passes(), after_first + 1);
}

}  // namespace
}  // namespace tcm
