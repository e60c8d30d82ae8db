// PageHeap: runs of pages handed out and taken back. Each scenario runs on a private heap
// (test_heap.h) so the layout of free runs is known, and ends with Verify() plus the
// accounting identity  system_bytes == in-use pages + free_bytes + unmapped_bytes.
#include "core/page_heap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <random>
#include <vector>

#include "core/size_classes.h"
#include "test_heap.h"

namespace tcm {
namespace {

struct FreeRun {
  uintptr_t start;
  uintptr_t pages;
  Span::Location location;
  friend bool operator==(const FreeRun&, const FreeRun&) = default;
};

// Where three runs are after a pass's release (PageHeapTest::PassAfterFrees).
struct PassOutcome {
  Span::Location old_run, block, given_back;
};

class PageHeapTest : public ::testing::Test {
 protected:
  // Every PageHeap call needs the heap lock; these wrappers take it and keep the test's own
  // count of in-use pages for the accounting check.
  Span* New(uintptr_t n) {
    SpinLockHolder h(heap().lock());
    Span* s = heap().New(Length{n});
    if (s != nullptr) Track(s);
    return s;
  }
  Span* NewAligned(uintptr_t n, uintptr_t align) {
    SpinLockHolder h(heap().lock());
    Span* s = heap().NewAligned(Length{n}, Length{align});
    if (s != nullptr) Track(s);
    return s;
  }
  // Runs of the given lengths, each followed by a one-page span that keeps it from merging
  // with the next once freed: {run, separator, run, separator, ...}; empty if any failed.
  std::vector<Span*> NewSeparatedRuns(std::initializer_list<uintptr_t> lengths) {
    std::vector<Span*> spans;
    for (uintptr_t n : lengths) {
      spans.push_back(New(n));
      spans.push_back(New(1));
      if (spans[spans.size() - 2] == nullptr || spans.back() == nullptr) return {};
    }
    return spans;
  }
  void Delete(Span* s) {
    SpinLockHolder h(heap().lock());
    in_use_pages_ -= s->length.n;
    --in_use_spans_;
    heap().Delete(s);
  }
  uintptr_t Release(uintptr_t n) {
    SpinLockHolder h(heap().lock());
    return heap().ReleaseAtLeastNPages(Length{n}).n;
  }
  // The heap's clock (the stamp runs freed from now on get) and its idle release.
  void SetClock(uint64_t now) {
    SpinLockHolder h(heap().lock());
    heap().set_clock(now);
  }
  uintptr_t ReleaseIdle(uint64_t idle_since) {
    SpinLockHolder h(heap().lock());
    return heap().ReleaseIdle(idle_since).n;
  }
  PageHeapStats Stats() {
    SpinLockHolder h(heap().lock());
    return heap().stats();
  }
  // Free runs sorted by address.
  std::vector<FreeRun> FreeRuns() {
    std::vector<FreeRun> runs;
    SpinLockHolder h(heap().lock());
    heap().ForEachFreeSpan(
        [&](Span* s) { runs.push_back({s->start.index, s->length.n, s->location}); });
    std::sort(runs.begin(), runs.end(),
              [](const FreeRun& a, const FreeRun& b) { return a.start < b.start; });
    return runs;
  }
  // The scavenger's "as much as the front end gave back" (ReleaseAtLeastNPages with a
  // PassStart): three separated runs, one freed at old_at, one (the program's block) at
  // block_at, one during the pass, which starts at pass_at with min_age; where each is
  // afterwards.
  PassOutcome PassAfterFrees(uint64_t old_at, uint64_t block_at, uint64_t pass_at, uint64_t min_age) {
    SetClock(old_at);
    const std::vector<Span*> runs = NewSeparatedRuns({8, 64, 2});
    EXPECT_EQ(runs.size(), 6u);
    if (runs.size() != 6) return {};
    const uintptr_t old_start = runs[0]->start.index, block_start = runs[2]->start.index,
                    given_start = runs[4]->start.index;
    Delete(runs[0]);
    SetClock(block_at);
    Delete(runs[2]);
    SetClock(pass_at);
    PageHeap::PassStart pass;
    {
      SpinLockHolder h(heap().lock());
      pass = heap().pass_start(min_age);
    }
    Delete(runs[4]);  // during the pass
    {
      SpinLockHolder h(heap().lock());
      heap().ReleaseAtLeastNPages(Length{1000}, true, &pass);
    }
    auto location_at = [&](uintptr_t start) {
      for (const FreeRun& r : FreeRuns())
        if (r.start <= start && start < r.start + r.pages) return r.location;
      return Span::kInUse;
    };
    const PassOutcome outcome{location_at(old_start), location_at(block_start), location_at(given_start)};
    CheckHeap();
    for (Span* s : {runs[1], runs[3], runs[5]}) Delete(s);
    CheckHeap();
    return outcome;
  }
  // Verify() crashes on a broken invariant; the identity and span count are checked here.
  void CheckHeap() {
    SpinLockHolder h(heap().lock());
    heap().Verify();
    const PageHeapStats& st = heap().stats();
    EXPECT_EQ(st.system_bytes, in_use_pages_ * kPageSize + st.free_bytes + st.unmapped_bytes);
    EXPECT_EQ(st.in_use_spans, in_use_spans_);
  }

  void RandomOperations(uint32_t seed, size_t* moved);
  PageHeap& heap() { return t_->heap; }
  PageMap& pagemap() { return t_->pagemap; }

  std::unique_ptr<testing::TestHeap> t_ = testing::TestHeap::Make();
  size_t in_use_pages_ = 0;
  size_t in_use_spans_ = 0;

 private:
  void Track(Span* s) {
    in_use_pages_ += s->length.n;
    ++in_use_spans_;
  }
};

TEST_F(PageHeapTest, NewReturnsExactDisjointWritableRuns) {
  std::vector<Span*> spans;
  for (uintptr_t n = 1; n <= 300; ++n) {
    Span* s = New(n);
    ASSERT_NE(s, nullptr) << n;
    EXPECT_EQ(s->length.n, n);
    EXPECT_EQ(s->start_addr() % kPageSize, 0u);
    EXPECT_EQ(s->location, Span::kInUse);
    EXPECT_EQ(s->sizeclass, 0);
    // First and last page map to the span: free() and coalescing depend on it.
    EXPECT_EQ(pagemap().GetSpan(s->start), s);
    EXPECT_EQ(pagemap().GetSpan(s->last()), s);
    // Writable at both ends (touching every page would commit ~370 MB).
    char* p = static_cast<char*>(s->start_ptr());
    p[0] = 1;
    p[s->length.bytes() - 1] = 2;
    spans.push_back(s);
    if (n % 25 == 0) CheckHeap();
  }
  CheckHeap();
  std::vector<Span*> by_addr = spans;
  std::sort(by_addr.begin(), by_addr.end(),
            [](Span* a, Span* b) { return a->start < b->start; });
  for (size_t i = 1; i < by_addr.size(); ++i)
    ASSERT_LE(by_addr[i - 1]->end().index, by_addr[i]->start.index) << "overlap";
  // The bytes written are still there: no run was handed out twice.
  for (Span* s : spans) {
    char* p = static_cast<char*>(s->start_ptr());
    EXPECT_EQ(p[0], 1);
    EXPECT_EQ(p[s->length.bytes() - 1], 2);
  }

  // Give everything back in random order: all memory ends up free again.
  std::shuffle(spans.begin(), spans.end(), std::mt19937(7));
  for (size_t i = 0; i < spans.size(); ++i) {
    Delete(spans[i]);
    if (i % 25 == 0) CheckHeap();
  }
  CheckHeap();
  EXPECT_EQ(Stats().in_use_spans, 0u);
  EXPECT_EQ(Stats().free_bytes, Stats().system_bytes);
}

// New reports pages it hands out that the process does not hold yet (fresh from the OS,
// or released) once, and nothing when it reuses a run that was in use before: the central
// lists give back their kept empty spans on that news, before the heap grows resident.
TEST_F(PageHeapTest, NewTellsWhenItCarvesMemoryNotYetResident) {
  auto carved = [this] {
    SpinLockHolder h(heap().lock());
    return heap().TakeNewMemoryCarved();
  };
  EXPECT_FALSE(carved()) << "nothing carved yet";
  Span* a = New(4);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(carved()) << "a fresh heap's first run is new memory";
  EXPECT_FALSE(carved()) << "the news is taken once";
  static_cast<char*>(a->start_ptr())[0] = 1;
  Span* keep = New(1);  // keeps a from merging with the fresh rest once freed
  ASSERT_NE(keep, nullptr);
  carved();
  Delete(a);
  Span* b = New(4);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->start, a->start) << "the freed run is the best fit";
  EXPECT_FALSE(carved()) << "a run that was in use before is resident already";
  Delete(b);
  EXPECT_GE(Release(uintptr_t{1} << 20), 4u);  // every free run, b's too
  Span* c = New(4);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(carved()) << "a released run comes back as new memory";
  Delete(c);
  Delete(keep);
  CheckHeap();
}

TEST_F(PageHeapTest, CarvingKeepsTheRemainderFree) {
  Span* a = New(1);
  ASSERT_NE(a, nullptr);
  // The heap grows by at least kMinSystemAlloc; the rest of that chunk is one free run
  // right after `a`.
  const size_t chunk_pages = kMinSystemAlloc / kPageSize;
  EXPECT_EQ(Stats().system_bytes, kMinSystemAlloc);
  EXPECT_EQ(Stats().free_bytes, kMinSystemAlloc - kPageSize);
  EXPECT_EQ(FreeRuns(), (std::vector<FreeRun>{{a->end().index, chunk_pages - 1, Span::kNormal}}));
  // The next request is carved from the front of that remainder, without growing.
  Span* b = New(5);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->start, a->end());
  EXPECT_EQ(Stats().system_bytes, kMinSystemAlloc);
  EXPECT_EQ(Stats().free_bytes, kMinSystemAlloc - 6 * kPageSize);
  CheckHeap();
  Delete(a);
  Delete(b);
  CheckHeap();
  EXPECT_EQ(FreeRuns().size(), 1u);
}

TEST_F(PageHeapTest, DeleteCoalescesWithFreeNeighbours) {
  Span* a = New(3);
  Span* b = New(3);
  Span* c = New(3);
  ASSERT_TRUE(a && b && c);
  ASSERT_EQ(b->start, a->end());
  ASSERT_EQ(c->start, b->end());
  const PageId first = a->start;
  const size_t chunk_pages = kMinSystemAlloc / kPageSize;

  Delete(a);
  Delete(c);  // merges with the chunk's free remainder behind it
  CheckHeap();
  EXPECT_EQ(FreeRuns(), (std::vector<FreeRun>{{first.index, 3, Span::kNormal},
                                              {first.index + 6, chunk_pages - 6, Span::kNormal}}));
  Delete(b);  // bridges the two: one run covering the whole chunk
  CheckHeap();
  EXPECT_EQ(FreeRuns(), (std::vector<FreeRun>{{first.index, chunk_pages, Span::kNormal}}));
  Span* whole = pagemap().GetSpan(first);
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(pagemap().GetSpan(whole->last()), whole);
}

TEST_F(PageHeapTest, LargeRequestsTakeTheBestFittingRun) {
  // One system chunk of exactly 700 pages (>= kMinSystemAlloc), laid out as
  //   A(200) s1 B(150) s2 C(300) s3 rest(47)
  // so freeing A, B, C leaves three large runs separated by in-use pages.
  Span* all = New(700);
  ASSERT_NE(all, nullptr);
  ASSERT_EQ(Stats().system_bytes, 700 * kPageSize);
  Delete(all);
  const std::vector<Span*> runs = NewSeparatedRuns({200, 150, 300});
  ASSERT_EQ(runs.size(), 6u);
  Span *a = runs[0], *s1 = runs[1], *b = runs[2], *s2 = runs[3], *c = runs[4], *s3 = runs[5];
  ASSERT_EQ(c->end().index, s3->start.index);
  const PageId b_start = b->start;
  Delete(a);
  Delete(b);
  Delete(c);
  CheckHeap();

  Span* got = New(140);  // 150 is the smallest run that fits; 200 and 300 stay whole
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->start, b_start);
  EXPECT_EQ(got->length.n, 140u);
  EXPECT_EQ(Stats().system_bytes, 700 * kPageSize);
  CheckHeap();
  std::vector<uintptr_t> lengths;
  for (const FreeRun& r : FreeRuns()) lengths.push_back(r.pages);
  std::sort(lengths.begin(), lengths.end());
  EXPECT_EQ(lengths, (std::vector<uintptr_t>{10, 47, 200, 300}));

  Span* got2 = New(201);  // only the 300 run fits
  ASSERT_NE(got2, nullptr);
  EXPECT_EQ(got2->start, c->start);
  for (Span* s : {got, got2, s1, s2, s3}) Delete(s);
  CheckHeap();
}

TEST_F(PageHeapTest, SmallRequestsTakeTheShortestRunThatFitsAcrossTheLengthBitmapWords) {
  // The exact-length lists are found through two 64-bit words of "has a run" bits: runs of
  // 3, 63, 64, 65 and 127 pages (both words, both edges of the boundary), each request
  // must get the shortest run that fits, and the bits must follow the lists (Verify).
  Span* all = New(700);
  ASSERT_NE(all, nullptr);
  Delete(all);
  const std::vector<Span*> runs = NewSeparatedRuns({3, 63, 64, 65, 127});
  ASSERT_EQ(runs.size(), 10u);
  for (size_t i = 0; i < runs.size(); i += 2) Delete(runs[i]);
  CheckHeap();
  const struct {
    uintptr_t want;
    size_t run;  // index into runs of the run it must come from
  } steps[] = {{2, 0}, {60, 2}, {64, 4}, {64, 6}, {100, 8}};
  std::vector<Span*> got;
  for (const auto& step : steps) {
    Span* s = New(step.want);
    ASSERT_NE(s, nullptr) << step.want;
    EXPECT_EQ(s->start, runs[step.run]->start) << step.want;
    got.push_back(s);
    CheckHeap();
  }
  for (Span* s : got) Delete(s);
  for (size_t i = 1; i < runs.size(); i += 2) Delete(runs[i]);
  CheckHeap();
}

TEST_F(PageHeapTest, NewAlignedReturnsAlignedStarts) {
  std::vector<Span*> spans;
  for (uintptr_t align : {1, 2, 4, 8, 32, 128, 256}) {
    for (uintptr_t n : {1, 3, 130}) {
      Span* s = NewAligned(n, align);
      ASSERT_NE(s, nullptr) << "n=" << n << " align=" << align;
      EXPECT_EQ(s->length.n, n);
      EXPECT_EQ(s->start.index % align, 0u) << "n=" << n << " align=" << align;
      EXPECT_EQ(s->location, Span::kInUse);
      EXPECT_EQ(pagemap().GetSpan(s->start), s);
      EXPECT_EQ(pagemap().GetSpan(s->last()), s);
      static_cast<char*>(s->start_ptr())[0] = 1;
      spans.push_back(s);
      CheckHeap();  // the trimmed head and tail went back as free runs
    }
  }
  for (Span* s : spans) Delete(s);
  CheckHeap();
  EXPECT_EQ(Stats().free_bytes, Stats().system_bytes);
}

TEST_F(PageHeapTest, RegisterSizeClassMapsEveryPageAndDeleteClearsIt) {
  const uint8_t cl = 10;
  Span* s = New(5);
  ASSERT_NE(s, nullptr);
  {
    SpinLockHolder h(heap().lock());
    heap().RegisterSizeClass(s, cl);
  }
  EXPECT_EQ(s->sizeclass, cl);
  for (uintptr_t i = 0; i < 5; ++i) {
    const PageId p = s->start + Length{i};
    EXPECT_EQ(pagemap().GetSpan(p), s) << i;
    EXPECT_EQ(pagemap().ClassOf(p.addr()), cl) << i;
    EXPECT_EQ(pagemap().ClassOf(p.addr() + kPageSize - 8), cl) << i;
  }
  // Neighbouring pages are untouched.
  EXPECT_EQ(pagemap().ClassOf((s->start - Length{1}).addr()), 0);
  EXPECT_EQ(pagemap().ClassOf(s->end().addr()), 0);
  CheckHeap();
  const PageId start = s->start;
  Delete(s);
  for (uintptr_t i = 0; i < 5; ++i)
    EXPECT_EQ(pagemap().ClassOf((start + Length{i}).addr()), 0) << i;
  CheckHeap();
}

TEST_F(PageHeapTest, ReleasedRunsMergeOnlyWithReleasedRunsAndAreReused) {
  // One chunk of exactly kMinSystemAlloc, fully carved: A(10) B(10) C(10) D(rest).
  const uintptr_t chunk_pages = kMinSystemAlloc / kPageSize;
  Span* whole = New(chunk_pages);
  ASSERT_NE(whole, nullptr);
  Delete(whole);
  Span* a = New(10);
  Span* b = New(10);
  Span* c = New(10);
  Span* d = New(chunk_pages - 30);
  ASSERT_TRUE(a && b && c && d);
  const size_t system = Stats().system_bytes;
  const PageId a_start = a->start;
  for (Span* s : {a, b, c}) memset(s->start_ptr(), 0xAB, s->length.bytes());

  Delete(b);
  EXPECT_EQ(Release(1), 10u);  // a whole run goes, even if more than asked
  EXPECT_EQ(Stats().unmapped_bytes, 10 * kPageSize);
  EXPECT_EQ(Stats().free_bytes, 0u);
  EXPECT_EQ(Stats().released_bytes_total, 10 * kPageSize);
  CheckHeap();

  // A normal run next to a returned one stays separate: merging would either lose the
  // "released" state or pretend backed pages are released.
  Delete(a);
  Delete(c);
  CheckHeap();
  EXPECT_EQ(FreeRuns(), (std::vector<FreeRun>{{a_start.index, 10, Span::kNormal},
                                              {a_start.index + 10, 10, Span::kReturned},
                                              {a_start.index + 20, 10, Span::kNormal}}));

  // Releasing them merges all three into one returned run.
  EXPECT_EQ(Release(20), 20u);
  CheckHeap();
  EXPECT_EQ(FreeRuns(), (std::vector<FreeRun>{{a_start.index, 30, Span::kReturned}}));
  EXPECT_EQ(Stats().unmapped_bytes, 30 * kPageSize);
  EXPECT_EQ(Stats().free_bytes, 0u);
  EXPECT_EQ(Release(1), 0u);  // nothing normal left

  // The returned run is reused before the heap grows; the kernel gave the pages back
  // zero-filled, and the span says so (calloc relies on `fresh`).
  Span* again = New(30);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->start, a_start);
  EXPECT_TRUE(again->fresh);
  EXPECT_EQ(Stats().system_bytes, system);
  EXPECT_EQ(Stats().unmapped_bytes, 0u);
  const char* p = static_cast<const char*>(again->start_ptr());
  for (size_t i = 0; i < again->length.bytes(); i += 512) ASSERT_EQ(p[i], 0) << "offset " << i;
  CheckHeap();
  Delete(again);
  Delete(d);
  CheckHeap();
}

// Runs of the two kinds do not merge, but a request longer than each takes them together
// before the heap grows (PageHeap::JoinAcrossKinds): the released pages it covers become
// backed, the rest stay released.
TEST_F(PageHeapTest, ALargeRequestTakesAdjacentRunsOfBothKindsBeforeGrowing) {
  Span* whole = New(700);
  ASSERT_NE(whole, nullptr);
  Delete(whole);
  Span* a = New(200);
  Span* b = New(200);
  Span* c = New(200);
  Span* d = New(100);
  ASSERT_TRUE(a && b && c && d);
  const PageId a_start = a->start;
  const size_t system = Stats().system_bytes;
  Delete(b);
  EXPECT_EQ(Release(200), 200u);
  Delete(a);
  Delete(c);
  ASSERT_EQ(FreeRuns(), (std::vector<FreeRun>{{a_start.index, 200, Span::kNormal},
                                              {a_start.index + 200, 200, Span::kReturned},
                                              {a_start.index + 400, 200, Span::kNormal}}));
  {
    SpinLockHolder h(heap().lock());
    (void)heap().TakeNewMemoryCarved();
  }
  Span* x = New(500);
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->start, a_start);
  EXPECT_EQ(Stats().system_bytes, system);
  EXPECT_EQ(Stats().unmapped_bytes, 0u);
  EXPECT_FALSE(x->fresh);  // backed pages inside: calloc must clear them
  {
    SpinLockHolder h(heap().lock());
    EXPECT_TRUE(heap().TakeNewMemoryCarved());  // the released pages come back resident
  }
  memset(x->start_ptr(), 0x5A, x->length.bytes());
  EXPECT_EQ(FreeRuns(), (std::vector<FreeRun>{{a_start.index + 500, 100, Span::kNormal}}));
  CheckHeap();

  // Only the released pages the request covers turn backed: N(400) R(300), 500 asked.
  Delete(x);
  Delete(d);
  EXPECT_EQ(Release(1), 700u);
  Span* y = New(400);
  ASSERT_NE(y, nullptr);
  ASSERT_EQ(y->start, a_start);
  Delete(y);
  ASSERT_EQ(FreeRuns(), (std::vector<FreeRun>{{a_start.index, 400, Span::kNormal},
                                              {a_start.index + 400, 300, Span::kReturned}}));
  Span* z = New(500);
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(z->start, a_start);
  EXPECT_EQ(Stats().system_bytes, system);
  EXPECT_EQ(Stats().unmapped_bytes, 200 * kPageSize);
  EXPECT_EQ(FreeRuns(), (std::vector<FreeRun>{{a_start.index + 500, 200, Span::kReturned}}));
  CheckHeap();
  Delete(z);
  CheckHeap();
}

TEST_F(PageHeapTest, NormalRunsArePreferredOverReturnedOnes) {
  const uintptr_t chunk_pages = kMinSystemAlloc / kPageSize;
  Span* whole = New(chunk_pages);
  ASSERT_NE(whole, nullptr);
  Delete(whole);
  Span* a = New(10);
  Span* s1 = New(1);
  Span* b = New(10);
  Span* rest = New(chunk_pages - 21);
  ASSERT_TRUE(a && s1 && b && rest);
  const PageId a_start = a->start, b_start = b->start;
  Delete(a);
  EXPECT_EQ(Release(1), 10u);
  Delete(b);
  CheckHeap();
  // Same length, two kinds: backed memory first (no page faults to pay).
  Span* x = New(10);
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->start, b_start);
  // Then the returned run, still without growing.
  const size_t system = Stats().system_bytes;
  Span* y = New(10);
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->start, a_start);
  EXPECT_EQ(Stats().system_bytes, system);
  CheckHeap();
  for (Span* s : {x, y, s1, rest}) Delete(s);
  CheckHeap();
}

TEST_F(PageHeapTest, ReleaseTakesTheLargestRunsFirst) {
  Span* all = New(400);
  ASSERT_NE(all, nullptr);
  Delete(all);
  Span* small = New(10);
  Span* sep = New(1);
  Span* big = New(200);
  Span* tail = New(189);
  ASSERT_TRUE(small && sep && big && tail);
  const PageId big_start = big->start;
  Delete(small);
  Delete(big);
  EXPECT_EQ(Release(1), 200u);  // one syscall frees the most memory
  EXPECT_EQ(FreeRuns(), (std::vector<FreeRun>{{big_start.index - 11, 10, Span::kNormal},
                                              {big_start.index, 200, Span::kReturned}}));
  EXPECT_EQ(Release(1000), 10u);  // asks for more than there is: releases what there is
  CheckHeap();
  for (Span* s : {sep, tail}) Delete(s);
  CheckHeap();
}

TEST_F(PageHeapTest, NewFailsCleanlyWhenTheSystemRefuses) {
  Span* a = New(1);
  ASSERT_NE(a, nullptr);
  const PageHeapStats before = Stats();
  t_->sys.set_enabled(SystemAllocator::kMmap, false);
  t_->sys.set_enabled(SystemAllocator::kSbrk, false);
  EXPECT_EQ(New(kMinSystemAlloc / kPageSize), nullptr);  // needs growth
  EXPECT_EQ(NewAligned(1, 1024), nullptr);
  EXPECT_EQ(Stats().system_bytes, before.system_bytes);
  EXPECT_EQ(Stats().free_bytes, before.free_bytes);
  CheckHeap();
  // What is already free can still be handed out.
  Span* b = New(5);
  ASSERT_NE(b, nullptr);
  Delete(a);
  Delete(b);
  CheckHeap();
}

// A span marked `fresh` is promised to read as zeros: calloc of a large block skips its
// memset then (allocation.cc AllocateZeroedLarge). Released runs are marked fresh.
//
// BUG (page_heap.cc ReleaseSpan: `s->fresh = true`, with system_alloc.cc Release =
// madvise(MADV_DONTNEED)): for the memfs source, mapped MAP_SHARED by default, DONTNEED
// only drops the page-table entries; the tmpfs/hugetlbfs pages keep their contents (and
// their memory), so a released-then-reused run reads back the old bytes while `fresh`
// says zero. calloc() then returns dirty memory.
TEST_F(PageHeapTest, ReleasedFreshRunsReadAsZeroWithMemfs) {
  t_->sys.ConfigureMemfs("/dev/shm", 0, false, false, /*map_private=*/false);
  Span* a = New(20);
  ASSERT_NE(a, nullptr);
  if (t_->sys.bytes_from(SystemAllocator::kMemfs) == 0) GTEST_SKIP() << "no usable /dev/shm";
  Span* rest = New(kMinSystemAlloc / kPageSize - 20);  // keep the run exactly 20 pages
  ASSERT_NE(rest, nullptr);
  const PageId start = a->start;
  memset(a->start_ptr(), 0xAB, a->length.bytes());
  Delete(a);
  EXPECT_EQ(Release(20), 20u);
  Span* again = New(20);
  ASSERT_NE(again, nullptr);
  ASSERT_EQ(again->start, start);
  if (again->fresh) {
    const unsigned char* p = static_cast<const unsigned char*>(again->start_ptr());
    size_t dirty = 0;
    for (size_t i = 0; i < again->length.bytes(); ++i) dirty += p[i] != 0;
    EXPECT_EQ(dirty, 0u) << "span is marked fresh but holds old data";
  }
  Delete(again);
  Delete(rest);
  CheckHeap();
}

// ---- release policies: idle time, heap limit, aggressive decommit ----

TEST_F(PageHeapTest, ReleaseIdleTakesOnlyRunsFreeSinceBeforeTheCutoff) {
  const uintptr_t chunk_pages = kMinSystemAlloc / kPageSize;
  Span* whole = New(chunk_pages);
  ASSERT_NE(whole, nullptr);
  Delete(whole);
  Span* a = New(10);
  Span* sep = New(1);
  Span* c = New(10);
  Span* rest = New(chunk_pages - 21);
  ASSERT_TRUE(a && sep && c && rest);
  const PageId a_start = a->start, c_start = c->start;
  SetClock(10);
  Delete(a);  // free since 10
  SetClock(20);
  Delete(c);  // free since 20
  EXPECT_EQ(ReleaseIdle(15), 10u);
  EXPECT_EQ(FreeRuns(), (std::vector<FreeRun>{{a_start.index, 10, Span::kReturned},
                                              {c_start.index, 10, Span::kNormal}}));
  EXPECT_EQ(ReleaseIdle(20), 0u);  // c became free at 20, not before
  EXPECT_EQ(ReleaseIdle(21), 10u);
  EXPECT_EQ(ReleaseIdle(1000), 0u);  // nothing normal left
  CheckHeap();
  for (Span* s : {sep, rest}) Delete(s);
  CheckHeap();
}

// The heap limit bounds "mapped" memory: system_bytes - unmapped_bytes.
class PageHeapLimitTest : public PageHeapTest {
 protected:
  static constexpr size_t kLimit = 3 * kMinSystemAlloc;
  static constexpr uintptr_t kChunkPages = kMinSystemAlloc / kPageSize;  // 128

  size_t Mapped() { return Stats().system_bytes - Stats().unmapped_bytes; }

  // Leaves: b (1 MiB, in use), c (200 pages, in use), a's 128 pages released (1 MiB).
  void SetUpLayout() {
    {
      SpinLockHolder h(heap().lock());
      heap().set_limit(kLimit);
    }
    a_ = New(kChunkPages);
    b_ = New(kChunkPages);
    ASSERT_TRUE(a_ && b_);
    Delete(a_);  // 1 MiB free, but too small for the next request
    // 200 pages do not fit on top of the 2 MiB mapped: the free run is released first,
    // and then the growth fits.
    c_ = New(200);
    ASSERT_NE(c_, nullptr);
    ASSERT_EQ(Stats().unmapped_bytes, kMinSystemAlloc);
    ASSERT_LE(Mapped(), kLimit);
    CheckHeap();
  }
  Span* a_ = nullptr;
  Span* b_ = nullptr;
  Span* c_ = nullptr;
};

TEST_F(PageHeapLimitTest, GrowthReleasesFreeRunsFirstAndThenFails) {
  SetUpLayout();
  // 300 pages: nothing free fits and growing would pass the limit.
  EXPECT_EQ(New(300), nullptr);
  EXPECT_LE(Mapped(), kLimit);
  CheckHeap();
}

// BUG (page_heap.cc, PageHeap::New/SearchFreeAndLarge/Carve): the limit is only checked in
// GrowHeap. Carving a kReturned run re-commits its pages (they fault back in on use), so
// reusing released memory must respect the limit too; gperftools calls EnsureLimit(n)
// before carving a returned span in SearchFreeAndLargeLists and AllocLarge.
TEST_F(PageHeapLimitTest, ReusingReleasedRunsRespectsTheLimit) {
  SetUpLayout();
  // 2.5625 MiB mapped; the only fitting run is a's released 1 MiB. Taking it would make
  // 3.5625 MiB mapped, and no normal free run can be released to make room: must fail.
  Span* x = New(kChunkPages);
  EXPECT_LE(Mapped(), kLimit) << "reusing a released run went past the heap limit";
  EXPECT_EQ(x, nullptr);
  if (x != nullptr) Delete(x);
  CheckHeap();
}

// The join maps released pages again: under a limit it happens when they fit (no growth,
// the limit kept), and not when they do not (the heap's usual answer then: make room, grow
// or fail within the limit).
TEST_F(PageHeapTest, AJoinOfBothKindsMapsReleasedPagesOnlyWithinTheLimit) {
  // 4 MiB: the join's 400 pages (3.125 MiB) fit. 3 MiB: they do not, nor does growth.
  for (const size_t limit : {4 * kMinSystemAlloc, 3 * kMinSystemAlloc}) {
    t_ = testing::TestHeap::Make();
    in_use_pages_ = in_use_spans_ = 0;
    Span* whole = New(400);
    ASSERT_NE(whole, nullptr);
    Delete(whole);
    Span* a = New(200);
    Span* b = New(200);
    ASSERT_TRUE(a && b);
    const PageId a_start = a->start;
    Delete(b);
    EXPECT_EQ(Release(200), 200u);
    Delete(a);  // N(200) R(200): 1.56 MiB mapped
    {
      SpinLockHolder h(heap().lock());
      heap().set_limit(limit);
    }
    const size_t system = Stats().system_bytes;
    Span* x = New(400);
    EXPECT_LE(Stats().system_bytes - Stats().unmapped_bytes, limit) << limit;
    if (limit == 4 * kMinSystemAlloc) {
      // Without the join: a's backed run released to make room, the heap grown by 400.
      ASSERT_NE(x, nullptr);
      EXPECT_EQ(x->start, a_start);
      EXPECT_EQ(Stats().system_bytes, system);
    } else {
      EXPECT_EQ(x, nullptr);
    }
    if (x != nullptr) Delete(x);
    CheckHeap();
  }
}

TEST_F(PageHeapLimitTest, ReusingAReleasedRunReleasesNormalRunsToMakeRoom) {
  SetUpLayout();
  Delete(c_);  // 200 pages free (normal): mapped stays 2.5625 MiB
  // Best fit for 128 pages is a's released run; to take it within 3 MiB, c's normal run
  // has to be released first (gperftools: EnsureLimit(n) with release).
  Span* x = New(kChunkPages);
  ASSERT_NE(x, nullptr);
  EXPECT_LE(Mapped(), kLimit) << "reusing a released run went past the heap limit";
  CheckHeap();
  Delete(x);
  Delete(b_);
  CheckHeap();
}

TEST_F(PageHeapTest, AggressiveDecommitReleasesEveryFreedRun) {
  {
    SpinLockHolder h(heap().lock());
    heap().set_aggressive_decommit(true);
  }
  Span* a = New(3);
  Span* b = New(3);
  ASSERT_TRUE(a && b);
  const PageId first = a->start;
  Delete(a);
  EXPECT_EQ(FreeRuns().front(), (FreeRun{first.index, 3, Span::kReturned}));
  Delete(b);  // merges with `a` and with the chunk's remainder into one returned run
  CheckHeap();
  EXPECT_EQ(Stats().free_bytes, 0u);
  EXPECT_EQ(FreeRuns(), (std::vector<FreeRun>{
                            {first.index, kMinSystemAlloc / kPageSize, Span::kReturned}}));
  EXPECT_EQ(Stats().unmapped_bytes, Stats().system_bytes);
}

TEST_F(PageHeapTest, MergedRunsAverageTheirIdleStamps) {
  const uintptr_t chunk_pages = kMinSystemAlloc / kPageSize;
  Span* whole = New(chunk_pages);
  ASSERT_NE(whole, nullptr);
  Delete(whole);
  Span* big = New(99);
  Span* small = New(1);
  Span* rest = New(chunk_pages - 100);
  ASSERT_TRUE(big && small && rest);
  SetClock(1000);
  Delete(big);  // 99 pages free since 1000
  SetClock(2000);
  Delete(small);  // one page at 2000 merges into them: stamp (99 * 1000 + 2000) / 100 = 1010
  EXPECT_EQ(ReleaseIdle(1010), 0u);
  EXPECT_EQ(ReleaseIdle(1011), 100u) << "one fresh page restarted a long-idle run's clock";
  CheckHeap();
  Delete(rest);
  CheckHeap();
}

TEST_F(PageHeapTest, UntouchedPagesDoNotAgeARunFreedNextToThem) {
  SetClock(1000);
  Span* used = New(8);  // the heap grows: the rest of its first chunk (>= 120 pages) stays untouched
  ASSERT_NE(used, nullptr);
  ASSERT_EQ(FreeRuns().size(), 1u);
  SetClock(5000);
  Delete(used);  // merges with the untouched rest, free since 1000
  ASSERT_EQ(FreeRuns().size(), 1u);
  EXPECT_EQ(ReleaseIdle(4000), 0u) << "pages freed at 5000 released as idle since before 4000";
  EXPECT_GT(ReleaseIdle(5001), 0u);
  CheckHeap();
}

TEST_F(PageHeapTest, IdleReleaseLeavesUntouchedRuns) {
  // The untouched rest of a growth chunk holds no memory; releasing it broke the huge page
  // being filled at the heap's frontier.
  SetClock(1000);
  Span* s = New(8);
  ASSERT_NE(s, nullptr);
  SetClock(10000);
  EXPECT_EQ(ReleaseIdle(5000), 0u) << "untouched pages released";
  Delete(s);  // the merged run holds touched pages now: it goes once idle
  EXPECT_GT(ReleaseIdle(20000), 0u);
  CheckHeap();
}

TEST_F(PageHeapTest, APassLeavesARunFreedJustBeforeItButTakesWhatItFreed) {
  // Runs freed before the pass in the clock's last tick are a block the program frees and
  // takes back between calls.
  const PassOutcome o = PassAfterFrees(1000, 2000, 2000, 0);
  EXPECT_EQ(o.block, Span::kNormal) << "the block freed just before the pass was released";
  EXPECT_EQ(o.old_run, Span::kReturned);
  EXPECT_EQ(o.given_back, Span::kReturned) << "what the pass freed was kept";
}

TEST_F(PageHeapTest, APassLeavesRunsFreedWithinItsMinimumAge) {
  // A loaded machine preempts a program between its free and its next malloc: the coarse
  // clock ticks in between, and a block the program takes back at once looked old enough.
  // With min_age, only runs free for longer than that go (and what the pass itself frees).
  const PassOutcome o = PassAfterFrees(1000, 1400, 1500, 200);
  EXPECT_EQ(o.block, Span::kNormal) << "a run free for less than min_age was released";
  EXPECT_EQ(o.old_run, Span::kReturned);
  EXPECT_EQ(o.given_back, Span::kReturned) << "what the pass freed was kept";
}

TEST_F(PageHeapTest, SurplusBeyondTheReserveIsReleasedTheMomentItIsFreed) {
  constexpr uintptr_t kMiB = (1 << 20) / kPageSize;
  constexpr size_t kReserve = PageHeap::kSurplusReserve;
  {
    SpinLockHolder h(heap().lock());
    heap().set_surplus_release(true);
  }
  // Churn below the reserve: blocks are freed and reallocated, nothing goes to the OS.
  for (int i = 0; i < 50; ++i) Delete(New(4 * kMiB));
  EXPECT_EQ(Stats().release_calls, 0u) << "churn of 4 MiB blocks released memory";
  // 8 MiB in use, then 96 MiB freed at once: far more than the program uses.
  Span* kept = New(8 * kMiB);
  Span* big = New(96 * kMiB);
  ASSERT_TRUE(kept && big);
  EXPECT_EQ(Stats().release_calls, 0u);
  Delete(big);
  CheckHeap();
  const PageHeapStats st = Stats();
  EXPECT_EQ(st.surplus_releases, 1u);
  EXPECT_GE(st.unmapped_bytes, size_t{96 << 20} - kReserve - (4u << 20));
  {
    SpinLockHolder h(heap().lock());
    EXPECT_LE(st.free_bytes, heap().SurplusReserve());
    EXPECT_GE(heap().SurplusReserve(), kReserve + (4u << 20));  // half of the 8 MiB in use
  }
  Delete(kept);
  CheckHeap();
}

// A program that builds a 64 MiB structure and frees it, over and over. Every free leaves
// far more free than in use; releasing it each time would fault it all back in next cycle.
class SurplusCycleTest : public PageHeapTest {
 protected:
  static constexpr uintptr_t kMiB = (1 << 20) / kPageSize;
  void SetUp() override {
    SpinLockHolder h(heap().lock());
    heap().set_surplus_release(true);
  }
  // One cycle at time `ns`: 64 MiB in 1 MiB spans (so some come from released runs),
  // then all freed.
  void Cycle(uint64_t ns) {
    SetClock(ns);
    std::vector<Span*> spans;
    for (int i = 0; i < 64; ++i) spans.push_back(New(kMiB));
    for (Span* s : spans) Delete(s);
    CheckHeap();
  }
};

TEST_F(SurplusCycleTest, FastCyclesAreHeldBackAfterTheSecond) {
  for (int i = 0; i < 10; ++i) Cycle(1'000'000'000 + i * 30'000'000ull);  // every 30 ms
  const PageHeapStats st = Stats();
  // The first cycle releases (nothing known yet), the second too (once is two phases of a
  // program, not a cycle), the rest are held back.
  EXPECT_EQ(st.surplus_releases, 2u);
  EXPECT_EQ(st.surplus_skips, 8u);
  EXPECT_LE(st.released_bytes_total, size_t{2} * (64u << 20)) << "released and faulted in every cycle";
  // Held back, not kept forever: the runs are free and idle-stamped like any other, so the
  // scavenger's idle release takes them once the program stops cycling.
  SetClock(5'000'000'000ull);
  ReleaseIdle(4'000'000'000ull);
  EXPECT_EQ(Stats().free_bytes, 0u);
}

TEST_F(SurplusCycleTest, SlowCyclesAreReleasedEveryTime) {
  // Each cycle's surplus is at most 64 MiB: a window of at most 1.024 s.
  ASSERT_LE(PageHeap::SurplusCycleWindow(size_t{64} << 20), 1'100'000'000u);
  for (int i = 0; i < 6; ++i) Cycle(1'000'000'000 + i * 1'500'000'000ull);  // every 1.5 s
  EXPECT_GE(Stats().surplus_releases, 6u);  // a cycle's frees can pass the trigger twice
  EXPECT_EQ(Stats().surplus_skips, 0u);
}

TEST_F(SurplusCycleTest, TheWindowGrowsWithWhatWouldBeReleased) {
  // 48 MiB of surplus every 300 ms: refaulting it (~1 ms a MiB) would take a sixth of the
  // cycle. A fixed 100 ms window released it every time.
  EXPECT_EQ(PageHeap::SurplusCycleWindow(size_t{1} << 20), PageHeap::kSurplusCycle);
  EXPECT_EQ(PageHeap::SurplusCycleWindow(size_t{48} << 20), 48 * PageHeap::kSurplusCyclePerMiB);
  for (int i = 0; i < 6; ++i) Cycle(1'000'000'000 + i * 300'000'000ull);
  EXPECT_EQ(Stats().surplus_releases, 2u);
  EXPECT_EQ(Stats().surplus_skips, 4u);
}

TEST_F(SurplusCycleTest, ACycleThatSlowsDownIsReleasedAgain) {
  for (int i = 0; i < 5; ++i) Cycle(1'000'000'000 + i * 30'000'000ull);
  EXPECT_EQ(Stats().surplus_skips, 3u);
  Cycle(4'000'000'000);  // a pause of more than the window (at most 1.024 s for 64 MiB)
  EXPECT_EQ(Stats().surplus_releases, 3u);
  EXPECT_EQ(Stats().surplus_skips, 3u);
}

TEST_F(SurplusCycleTest, OneLongRunOfFreesReleasesAsItGoes) {
  // 256 MiB freed in one go (a thread exiting): the trigger fires again and again within
  // kSurplusCycle, but nothing released was taken back in between, so each firing releases.
  SetClock(1'000'000'000);
  std::vector<Span*> spans;
  for (int i = 0; i < 256; ++i) spans.push_back(New(kMiB));
  for (Span* s : spans) Delete(s);
  const PageHeapStats st = Stats();
  EXPECT_EQ(st.surplus_skips, 0u);
  EXPECT_GT(st.surplus_releases, 1u);
  SpinLockHolder h(heap().lock());
  EXPECT_LE(st.free_bytes, 2 * heap().SurplusReserve());
}

TEST_F(PageHeapTest, SurplusRuleIsOffUnlessTurnedOn) {
  constexpr uintptr_t kMiB = (1 << 20) / kPageSize;
  Delete(New(96 * kMiB));
  CheckHeap();
  EXPECT_EQ(Stats().release_calls, 0u);
  EXPECT_EQ(Stats().unmapped_bytes, 0u);
}

// Random New/NewAligned/Delete/RegisterSizeClass/Release, and now and then the span
// records' compaction, against a shadow list of the spans handed out. Adds the records
// the compaction moved to *moved.
void PageHeapTest::RandomOperations(uint32_t seed, size_t* moved) {
  // Beyond Verify() (free runs only), this checks the in-use side of the pagemap
  // invariants and that no page is ever handed out twice.
  std::mt19937 rng(seed);
  struct Live {
    Span* span;
    uint32_t tag;
  };
  std::vector<Live> live;
  uint32_t next_tag = 1;
  auto tag_of = [](Span* s) { return *static_cast<uint32_t*>(s->start_ptr()); };
  auto check_live = [&] {
    std::vector<Span*> spans;
    for (const Live& l : live) {
      Span* s = l.span;
      spans.push_back(s);
      ASSERT_EQ(s->location, Span::kInUse);
      ASSERT_EQ(tag_of(s), l.tag) << "span memory was handed out twice";
      ASSERT_EQ(pagemap().GetSpan(s->start), s);
      ASSERT_EQ(pagemap().GetSpan(s->last()), s);
      for (uintptr_t i = 0; i < s->length.n; ++i) {
        const PageId p = s->start + Length{i};
        ASSERT_EQ(pagemap().ClassOf(p.addr()), s->sizeclass) << "page " << i;
        if (s->sizeclass != 0) {
          ASSERT_EQ(pagemap().GetSpan(p), s) << "page " << i;
        }
      }
    }
    for (const FreeRun& r : FreeRuns()) {
      Span* s = pagemap().GetSpan(PageId{r.start});
      ASSERT_NE(s, nullptr);
      spans.push_back(s);
    }
    std::sort(spans.begin(), spans.end(), [](Span* a, Span* b) { return a->start < b->start; });
    for (size_t i = 1; i < spans.size(); ++i)
      ASSERT_LE(spans[i - 1]->end().index, spans[i]->start.index) << "overlapping spans";
  };

  for (int step = 0; step < 4000; ++step) {
    const int op = static_cast<int>(rng() % 100);
    if (op < 35 || live.empty()) {
      const uintptr_t n = rng() % 8 == 0 ? 100 + rng() % 200 : 1 + rng() % 20;
      Span* s = New(n);
      ASSERT_NE(s, nullptr);
      ASSERT_EQ(s->length.n, n);
      *static_cast<uint32_t*>(s->start_ptr()) = next_tag;
      live.push_back({s, next_tag++});
    } else if (op < 45) {
      const uintptr_t n = 1 + rng() % 20, align = uintptr_t{1} << (rng() % 7);
      Span* s = NewAligned(n, align);
      ASSERT_NE(s, nullptr);
      ASSERT_EQ(s->length.n, n);
      ASSERT_EQ(s->start.index % align, 0u);
      *static_cast<uint32_t*>(s->start_ptr()) = next_tag;
      live.push_back({s, next_tag++});
    } else if (op < 85) {
      const size_t i = rng() % live.size();
      ASSERT_EQ(tag_of(live[i].span), live[i].tag);
      Delete(live[i].span);
      live[i] = live.back();
      live.pop_back();
    } else if (op < 95) {
      Span* s = live[rng() % live.size()].span;
      if (s->sizeclass == 0) {
        SpinLockHolder h(heap().lock());
        heap().RegisterSizeClass(s, static_cast<uint8_t>(1 + rng() % (kNumClasses - 1)));
      }
    } else {
      Release(1 + rng() % 200);
    }
    if (step % 100 == 50) {
      // Free runs' records move off sparse pages of records (record_pool.h): the spans
      // handed out (whose pointers the shadow list holds) must not move.
      SpinLockHolder h(heap().lock());
      *moved += heap().CompactSpanRecords(PageHeap::kCompactMovesPerPass);
      heap().ReleaseSpanRecords();
    }
    if (step % 100 == 0 || step % 100 == 51) {
      CheckHeap();
      check_live();
      if (HasFatalFailure()) return;
    }
  }
  CheckHeap();
  check_live();
  for (const Live& l : live) Delete(l.span);
  live.clear();
  CheckHeap();
  EXPECT_EQ(Stats().in_use_spans, 0u);
  EXPECT_EQ(Stats().free_bytes + Stats().unmapped_bytes, Stats().system_bytes);
}

TEST_F(PageHeapTest, RandomOperationsKeepEveryInvariant) {
  // Whether a page of records ends up holding only a few free runs depends on where the
  // system's chunks land (adjacent ones merge): several seeds, each on a fresh heap, so
  // the compaction surely runs.
  size_t moved = 0;
  for (uint32_t seed : {2024u, 7u, 11u, 13u, 17u, 19u, 23u, 29u}) {
    t_ = testing::TestHeap::Make();
    in_use_pages_ = in_use_spans_ = 0;
    RandomOperations(seed, &moved);
    if (HasFatalFailure()) return;
  }
  printf("span records moved by the compaction: %zu\n", moved);
  EXPECT_GT(moved, 0u) << "no record was moved: the compaction went untested";
}

// realloc of large blocks: growing takes the free run right after the span, shrinking gives
// the tail back; neither moves the block.
TEST_F(PageHeapTest, LargeSpansGrowAndShrinkInPlace) {
  Span* a = New(40);
  Span* wall = New(10);  // keeps a's neighbourhood known: a, then whatever follows
  Delete(wall);          // a is now followed by a free run (wall merged into the rest)
  const PageId start = a->start;
  {
    SpinLockHolder h(heap().lock());
    ASSERT_TRUE(heap().ExtendInPlace(a, Length{60}));
  }
  in_use_pages_ += 20;
  EXPECT_EQ(a->start, start);
  EXPECT_EQ(a->length.n, 60u);
  EXPECT_EQ(pagemap().GetSpan(a->last()), a);
  CheckHeap();

  {
    SpinLockHolder h(heap().lock());
    heap().ShrinkInPlace(a, Length{5});
  }
  in_use_pages_ -= 55;
  EXPECT_EQ(a->start, start);
  EXPECT_EQ(a->length.n, 5u);
  CheckHeap();

  // A neighbour in use blocks growth, and nothing changes.
  Span* b = New(1);
  ASSERT_EQ(b->start, a->end()) << "the freed tail is reused first";
  {
    SpinLockHolder h(heap().lock());
    EXPECT_FALSE(heap().ExtendInPlace(a, Length{6}));
  }
  EXPECT_EQ(a->length.n, 5u);
  Delete(b);
  Delete(a);
  CheckHeap();
}

}  // namespace
}  // namespace tcm
