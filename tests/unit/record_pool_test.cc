// RecordPool: span records in 4 KiB pages that go back to the OS when all their records are
// free. Records must come out zeroed, aligned and disjoint, never at a page's first word,
// reuse must prefer pages in use, and Release must really take pages off the process's
// resident set (mincore) while keeping what it was asked to keep.
#include "core/record_pool.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "core/page_heap.h"
#include "core/span.h"
#include "test_heap.h"

namespace tcm {
namespace {

constexpr size_t kRecord = 120;  // a Span's size class: 34 records a page

bool Resident(const void* page) {
  unsigned char v = 0;
  EXPECT_EQ(mincore(const_cast<void*>(page), RecordPool::kPageBytes, &v), 0);
  return (v & 1) != 0;
}

uintptr_t PageOf(const void* r) { return reinterpret_cast<uintptr_t>(r) & ~uintptr_t{RecordPool::kPageBytes - 1}; }

class RecordPoolTest : public ::testing::Test {
 protected:
  void* New() {
    void* r = pool_.New(&arena_, kRecord);
    EXPECT_NE(r, nullptr);
    return r;
  }
  // Records filling `pages` whole pages, in the order New gave them.
  std::vector<void*> FillPages(size_t pages) {
    std::vector<void*> v;
    for (size_t i = 0; i < pages * per_page_; ++i) v.push_back(New());
    return v;
  }
  Arena arena_;
  RecordPool pool_;
  const size_t per_page_ = RecordPool::RecordsPerPage(kRecord);
};

TEST_F(RecordPoolTest, RecordsAreZeroedAlignedDisjointAndNeverAPagesFirstWord) {
  ASSERT_EQ(per_page_, 34u);
  std::vector<void*> v;
  for (int i = 0; i < 1000; ++i) {
    void* r = New();
    const unsigned char* c = static_cast<const unsigned char*>(r);
    EXPECT_TRUE(std::all_of(c, c + kRecord, [](unsigned char b) { return b == 0; })) << i;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r) % 8, 0u);
    const uintptr_t offset = reinterpret_cast<uintptr_t>(r) - PageOf(r);
    EXPECT_GE(offset, RecordPool::kPageHeader);
    EXPECT_LE(offset + kRecord, RecordPool::kPageBytes) << "a record straddles two pages";
    memset(r, 0xab, kRecord);  // the page's descriptor pointer must survive its neighbours
    v.push_back(r);
  }
  std::vector<uintptr_t> starts;
  for (void* r : v) starts.push_back(reinterpret_cast<uintptr_t>(r));
  std::sort(starts.begin(), starts.end());
  for (size_t i = 1; i < starts.size(); ++i) ASSERT_GE(starts[i], starts[i - 1] + kRecord) << "overlap";
  EXPECT_EQ(pool_.in_use(), 1000u);
  for (void* r : v) pool_.Delete(r);
  EXPECT_EQ(pool_.in_use(), 0u);
  // Handed out again, records are zeroed whatever was written into them.
  void* again = New();
  EXPECT_EQ(*static_cast<uint64_t*>(again), 0u);
  pool_.Delete(again);
}

TEST_F(RecordPoolTest, EmptyPagesGoBackToTheOsBeyondWhatIsKept) {
  constexpr size_t kPages = 100;
  std::vector<void*> v = FillPages(kPages);
  std::set<uintptr_t> pages;
  for (void* r : v) pages.insert(PageOf(r));
  ASSERT_EQ(pages.size(), kPages) << "records were not packed into whole pages";
  for (uintptr_t p : pages) ASSERT_TRUE(Resident(reinterpret_cast<void*>(p)));
  const size_t backed = pool_.backed_bytes();
  EXPECT_EQ(pool_.Release(0), 0u) << "every page is full";

  // One record left in each of the first 10 pages: those stay; the other 90 empty.
  std::vector<void*> kept;
  std::set<uintptr_t> kept_pages;
  for (void* r : v) {
    if (kept_pages.size() < 10 && kept_pages.insert(PageOf(r)).second) kept.push_back(r);
    else if (std::find(kept.begin(), kept.end(), r) == kept.end()) pool_.Delete(r);
  }
  EXPECT_EQ(pool_.empty_pages(), 90u);
  EXPECT_EQ(pool_.Release(16), 74 * RecordPool::kPageBytes);
  EXPECT_EQ(pool_.empty_pages(), 16u);
  EXPECT_EQ(pool_.backed_bytes(), backed - 74 * RecordPool::kPageBytes);
  size_t resident = 0;
  for (uintptr_t p : pages) resident += Resident(reinterpret_cast<void*>(p));
  EXPECT_EQ(resident, 26u) << "10 pages in use and 16 kept";
  for (uintptr_t p : kept_pages) EXPECT_TRUE(Resident(reinterpret_cast<void*>(p)));

  EXPECT_EQ(pool_.Release(0), 16 * RecordPool::kPageBytes);
  EXPECT_EQ(pool_.released_bytes(), 90 * RecordPool::kPageBytes);
  for (void* r : kept) pool_.Delete(r);
  EXPECT_EQ(pool_.Release(0), 10 * RecordPool::kPageBytes);
  EXPECT_EQ(pool_.backed_bytes(), 0u);
  for (uintptr_t p : pages) EXPECT_FALSE(Resident(reinterpret_cast<void*>(p)));

  // Released pages are set up again on demand: records zeroed, writable, counted.
  std::vector<void*> w;
  for (size_t i = 0; i < 3 * per_page_; ++i) {
    void* r = New();
    EXPECT_EQ(*static_cast<uint64_t*>(r), 0u);
    memset(r, 0x5a, kRecord);
    w.push_back(r);
  }
  EXPECT_EQ(pool_.backed_bytes(), 3 * RecordPool::kPageBytes);
  for (void* r : w) pool_.Delete(r);
  EXPECT_EQ(pool_.in_use(), 0u);
}

TEST_F(RecordPoolTest, NewPrefersPagesInUseSoFreedOnesEmpty) {
  const size_t per = per_page_;
  std::vector<void*> v = FillPages(4);
  // Page A loses one record, page B all of them: the next record comes from A, and B,
  // empty, stays empty (releasable) while A has room.
  const uintptr_t a = PageOf(v[0]), b = PageOf(v[per]);
  ASSERT_NE(a, b);
  pool_.Delete(v[0]);
  for (size_t i = per; i < 2 * per; ++i) pool_.Delete(v[i]);
  EXPECT_EQ(pool_.empty_pages(), 1u);
  void* r = New();
  EXPECT_EQ(PageOf(r), a);
  EXPECT_EQ(pool_.empty_pages(), 1u);
  // A is full again: now the empty page is used rather than a new one.
  void* s = New();
  EXPECT_EQ(PageOf(s), b);
  EXPECT_EQ(pool_.empty_pages(), 0u);
  pool_.Delete(r);
  pool_.Delete(s);
  for (size_t i = 1; i < per; ++i) pool_.Delete(v[i]);
  for (size_t i = 2 * per; i < 4 * per; ++i) pool_.Delete(v[i]);
  EXPECT_EQ(pool_.in_use(), 0u);
  EXPECT_EQ(pool_.empty_pages(), 4u);
}

TEST_F(RecordPoolTest, NewFillsPagesWellInUseBeforeSparseOnes) {
  const size_t per = per_page_;
  std::vector<void*> v = FillPages(2);
  const uintptr_t a = PageOf(v[0]), b = PageOf(v[per]);
  // A keeps one record (sparse), then B loses three (dense): records freed into A last
  // must not draw the next ones there, or A never empties.
  for (size_t i = per; i < per + 3; ++i) pool_.Delete(v[i]);
  for (size_t i = 1; i < per; ++i) pool_.Delete(v[i]);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(PageOf(New()), b) << k;
  // B is full: now A takes them.
  void* r = New();
  EXPECT_EQ(PageOf(r), a);
  pool_.Delete(r);
  pool_.Delete(v[0]);
  EXPECT_EQ(pool_.empty_pages(), 1u) << "A emptied";
}

TEST_F(RecordPoolTest, SparsePagesAreCollectedWholeAndMovesGoToPagesWellInUse) {
  const size_t per = per_page_;
  std::vector<void*> v = FillPages(4);
  // Pages 0 and 1 keep 2 records each (sparse), page 2 loses one (dense), page 3 full.
  std::vector<void*> left;
  for (size_t i = 0; i < 2 * per; ++i) {
    if (i % per < 2) left.push_back(v[i]);
    else pool_.Delete(v[i]);
  }
  pool_.Delete(v[2 * per]);
  std::vector<void*> found(8);
  const size_t n = pool_.CollectSparse(found.data(), 8, 2, kRecord);
  ASSERT_EQ(n, 4u);
  found.resize(n);
  std::sort(found.begin(), found.end());
  std::sort(left.begin(), left.end());
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(found[i], left[i]);
  found.resize(8);
  EXPECT_EQ(pool_.CollectSparse(found.data(), 8, 1, kRecord), 0u) << "pages with more in use than asked";
  EXPECT_EQ(pool_.CollectSparse(found.data(), 3, 2, kRecord), 2u) << "whole pages only";
  // A page with a record that cannot move is skipped whole; the next page still counts.
  static void* pinned;
  pinned = left[0];
  const size_t m = pool_.CollectSparse(found.data(), 8, 2, kRecord, [](const void* r) { return r != pinned; });
  ASSERT_EQ(m, 2u);
  const uintptr_t pinned_page = PageOf(pinned);
  EXPECT_NE(PageOf(found[0]), pinned_page);
  EXPECT_NE(PageOf(found[1]), pinned_page);
  // A move goes to the dense page, never to a sparse one.
  void* moved = pool_.NewForMove(kRecord);
  ASSERT_NE(moved, nullptr);
  EXPECT_EQ(PageOf(moved), PageOf(v[2 * per]));
  // Page 2 is full again and no page is empty: a move takes one of the block's untouched
  // pages rather than a sparse one.
  void* next = pool_.NewForMove(kRecord);
  ASSERT_NE(next, nullptr);
  EXPECT_NE(PageOf(next), PageOf(left[0]));
  EXPECT_NE(PageOf(next), PageOf(left[2]));
  pool_.Delete(moved);
  pool_.Delete(next);
  for (void* r : left) pool_.Delete(r);
  for (size_t i = 2 * per + 1; i < 4 * per; ++i) pool_.Delete(v[i]);
  EXPECT_EQ(pool_.in_use(), 0u);
}

// The page heap's span records: a heap of many one-page spans given back leaves its
// records' pages releasable, and ReleaseSpanRecords gives them back.
TEST(PageHeapSpanRecords, RecordsOfAFreedHeapGoBack) {
  std::unique_ptr<testing::TestHeap> t = testing::TestHeap::Make();
  PageHeap& heap = t->heap;
  std::vector<Span*> spans;
  {
    SpinLockHolder h(heap.lock());
    // One-page spans with a one-page gap each: every span and every gap is a record.
    for (int i = 0; i < 6000; ++i) {
      Span* s = heap.New(Length{1});
      ASSERT_NE(s, nullptr);
      spans.push_back(s);
    }
    for (size_t i = 0; i < spans.size(); i += 2) heap.Delete(spans[i]);
  }
  const size_t busy = heap.span_records().backed_bytes();
  EXPECT_GE(busy, 6000 * sizeof(Span)) << "records: one a span, one a free run";
  {
    SpinLockHolder h(heap.lock());
    for (size_t i = 1; i < spans.size(); i += 2) heap.Delete(spans[i]);  // all merge
    heap.ReleaseSpanRecords();
    heap.Verify();
  }
  // Every span is back: the records in use are the free runs' (one a run of adjacent
  // growth), and the reserve of empty pages, plus at most a page for each of those.
  const size_t live = heap.span_records().in_use();
  size_t runs = 0;
  {
    SpinLockHolder h(heap.lock());
    heap.ForEachFreeSpan([&runs](Span*) { ++runs; });
  }
  EXPECT_EQ(live, runs);
  EXPECT_LT(live, 64u) << "the runs did not merge";
  EXPECT_LE(heap.span_records().backed_bytes(), (PageHeap::kSpanRecordReserve + live) * RecordPool::kPageBytes);
}

}  // namespace
}  // namespace tcm
