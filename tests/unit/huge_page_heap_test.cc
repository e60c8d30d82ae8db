// The hugepage-aware page heap (page_heap.h, set_hugepage_aware) and its HugePageTracker:
// growth in whole aligned huge pages, placement that fills partly used huge pages before
// breaking empty ones, release of whole huge pages before subrelease, advice past the
// threshold (and none when THP is never). Each scenario runs on a private heap
// (test_heap.h) and ends with Verify(), which in this mode also checks that the tracker's
// per-huge-page counts add up to the heap's in-use and released bytes.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/huge_page_tracker.h"
#include "core/page_heap.h"
#include "core/scavenger.h"
#include "test_heap.h"

namespace tcm {
namespace {

constexpr uintptr_t kHP = kPagesPerHugePage;

TEST(HugePageTrackerTest, CountsPagesPerHugePageAcrossBoundaries) {
  Arena arena;
  auto* t = new HugePageTracker(&arena);
  const PageId base = HugePageStart(1000);
  ASSERT_TRUE(t->AddMemory(base, Length{3 * kHP}, true));
  EXPECT_EQ(t->owned(), 3u);
  // 10 pages before the first boundary and 20 after it.
  t->AddUsed(base + Length{kHP - 10}, Length{30}, +1);
  EXPECT_EQ(t->Find(base)->used, 10);
  EXPECT_EQ(t->Find(base + Length{kHP})->used, 20);
  t->AddReleased(base + Length{2 * kHP}, Length{kHP}, +1);
  t->AddUsed(base + Length{kHP}, Length{kHP - 20}, +1);  // the second one is full now
  HugePageStats s = t->Collect();
  EXPECT_EQ(s.owned, 3u);
  EXPECT_EQ(s.partial, 1u);
  EXPECT_EQ(s.full, 1u);
  EXPECT_EQ(s.released, 1u);
  EXPECT_EQ(s.partial_free_bytes, (kHP - 10) * kPageSize);
  t->AddReleased(base, Length{5}, +1);
  s = t->Collect();
  EXPECT_EQ(s.partly_released, 1u);
  EXPECT_EQ(s.broken_released_bytes, 5 * kPageSize);
  EXPECT_EQ(s.broken_free_bytes, (kHP - 15) * kPageSize);
  EXPECT_EQ(t->Find(HugePageStart(999)), nullptr);
  delete t;
}

class HugeHeapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    t_->sys.set_thp_mode(os::ThpMode::kMadvise);
    heap().set_hugepage_aware(true);
  }
  Span* New(uintptr_t n) {
    SpinLockHolder h(heap().lock());
    return heap().New(Length{n});
  }
  void Delete(Span* s) {
    SpinLockHolder h(heap().lock());
    heap().Delete(s);
  }
  HugePageStats Huge() {
    SpinLockHolder h(heap().lock());
    return heap().CollectHugePageStats();
  }
  const HugePageInfo* Info(const Span* s) {
    SpinLockHolder h(heap().lock());
    return heap().hugepages().Find(s->start);
  }
  void Check() {
    SpinLockHolder h(heap().lock());
    heap().Verify();
  }
  size_t Credit() {
    SpinLockHolder h(heap().lock());
    return heap().collapse_credit();
  }
  uintptr_t ReleaseIdle(uint64_t since) {
    SpinLockHolder h(heap().lock());
    return heap().ReleaseIdle(since).n;
  }
  PageHeap& heap() { return t_->heap; }
  std::unique_ptr<testing::TestHeap> t_ = testing::TestHeap::Make();
};

// The VmFlags of the mapping holding addr, as the kernel shows them in /proc/self/smaps.
std::string VmFlagsAt(const void* addr) {
  FILE* f = fopen("/proc/self/smaps", "r");
  if (f == nullptr) return "";
  char line[512];
  bool inside = false;
  std::string flags;
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      inside = a >= lo && a < hi;
    } else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
      flags = line;
      break;
    }
  }
  fclose(f);
  return flags;
}

TEST_F(HugeHeapTest, GrowsInWholeAlignedHugePages) {
  Span* a = New(1);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(heap().stats().system_bytes, kHugePageSize);
  EXPECT_EQ(a->start.index % kHP, 0u);
  // A large request starts on a huge page boundary and covers whole huge pages.
  Span* big = New(3 * kHP);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(big->start.index % kHP, 0u);
  EXPECT_EQ(heap().stats().system_bytes % kHugePageSize, 0u);
  // A large request that is not a multiple leaves its tail's slack to small spans.
  Span* odd = New(kHP + 10);
  ASSERT_NE(odd, nullptr);
  EXPECT_EQ(odd->start.index % kHP, 0u);
  Check();
  HugePageStats s = Huge();
  EXPECT_EQ(s.full, 4u);  // big's three and odd's first
  EXPECT_EQ(s.partial, 2u);  // a's and odd's tail
  Delete(big);
  Delete(odd);
  Delete(a);
  Check();
  EXPECT_EQ(Huge().empty, Huge().owned);
}

TEST_F(HugeHeapTest, SmallSpansFillTheFullestHugePageFirst) {
  // Two huge pages' worth of single pages, then free all of the second one but a few
  // pages, and most of the first: new spans must go to the fuller huge page.
  std::vector<Span*> spans;
  for (uintptr_t i = 0; i < 2 * kHP; ++i) spans.push_back(New(1));
  std::sort(spans.begin(), spans.end(), [](Span* x, Span* y) { return x->start < y->start; });
  const uintptr_t hp0 = HugePageOf(spans[0]->start), hp1 = HugePageOf(spans[kHP]->start);
  ASSERT_NE(hp0, hp1);
  // hp0 keeps 200 pages in use, hp1 keeps 8 (every 32nd page): both have 1-page holes.
  for (uintptr_t i = 0; i < kHP; ++i)
    if (i % 4 == 1) Delete(spans[i]), spans[i] = nullptr;
  for (uintptr_t i = kHP; i < 2 * kHP; ++i)
    if (i % 32 != 0) Delete(spans[i]), spans[i] = nullptr;
  Check();
  const uint16_t used0 = Info(spans[0])->used;
  for (int k = 0; k < 20; ++k) {
    Span* s = New(1);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(HugePageOf(s->start), hp0) << "a single page went to the sparse huge page";
    spans.push_back(s);
  }
  EXPECT_EQ(Info(spans[0])->used, used0 + 20);
  Check();
  for (Span* s : spans)
    if (s != nullptr) Delete(s);
  Check();
}

TEST_F(HugeHeapTest, IdleReleaseTakesWholeHugePagesAndLeavesPartlyUsedOnesWhole) {
  // Four huge pages: the middle two become free entirely; the outer ones keep one span.
  Span* big = New(4 * kHP);
  ASSERT_NE(big, nullptr);
  Delete(big);
  std::vector<Span*> spans;
  for (uintptr_t i = 0; i < 4 * kHP / 16; ++i) spans.push_back(New(16));
  std::sort(spans.begin(), spans.end(), [](Span* x, Span* y) { return x->start < y->start; });
  for (size_t i = 0; i < spans.size(); ++i)
    if (i != 0 && i != spans.size() - 1) Delete(spans[i]);
  heap().set_clock(100);
  Check();
  // Free: 2 whole huge pages + 2 x 240 pages inside partly used ones (3.75 MiB, above the
  // subrelease floor).
  const size_t floor = heap().SubreleaseFloor();
  ASSERT_GT(heap().stats().free_bytes, floor);
  // ReleaseAtLeastNPages without subrelease: the surplus rule's way.
  {
    SpinLockHolder h(heap().lock());
    EXPECT_EQ(heap().ReleaseAtLeastNPages(Length{1}, /*allow_subrelease=*/false).n, 2 * kHP);
  }
  HugePageStats s = Huge();
  EXPECT_EQ(s.released, 2u);
  EXPECT_EQ(s.partly_released, 0u);
  EXPECT_EQ(s.partial, 2u);
  EXPECT_EQ(heap().stats().hugepages_released, 2u);
  EXPECT_EQ(heap().stats().subreleased_bytes_total, 0u);
  Check();
  // Idle release: the partial free (3.75 MiB) is above the floor (2 MiB + a little): the
  // sparsest huge pages are broken until the free memory is under the floor.
  EXPECT_GT(ReleaseIdle(1000), 0u);
  s = Huge();
  EXPECT_GE(s.partly_released, 1u);
  EXPECT_LE(heap().stats().free_bytes, heap().SubreleaseFloor());
  Check();
  Delete(spans.front());
  Delete(spans.back());
  Check();
}

TEST_F(HugeHeapTest, SmallFreeMemoryInPartlyUsedHugePagesIsNotBroken) {
  // One huge page, half in use; the free half (1 MiB) is under the floor: idle release
  // must not break the huge page.
  Span* a = New(kHP / 2);
  ASSERT_NE(a, nullptr);
  heap().set_clock(10);
  Span* b = New(kHP / 2);
  Delete(b);
  EXPECT_EQ(ReleaseIdle(1000), 0u);
  HugePageStats s = Huge();
  EXPECT_EQ(s.partly_released, 0u);
  EXPECT_EQ(s.partial, 1u);
  // An explicit request (ReleaseFreeMemory, the heap limit) does break it.
  {
    SpinLockHolder h(heap().lock());
    EXPECT_EQ(heap().ReleaseAtLeastNPages(Length{1}).n, kHP / 2);
  }
  EXPECT_EQ(Huge().partly_released, 1u);
  EXPECT_EQ(heap().stats().subreleased_bytes_total, kHP / 2 * kPageSize);
  Check();
  Delete(a);
  Check();
}

TEST_F(HugeHeapTest, SurplusRuleReleasesWholeHugePagesFirst) {
  heap().set_surplus_release(true);
  // 40 MiB in single pages, then 3 of every 4 freed: 30 MiB free inside partly used huge
  // pages, under the trigger (twice 16 MiB + half of the 10 MiB in use).
  std::vector<Span*> spans;
  for (uintptr_t i = 0; i < 20 * kHP; ++i) spans.push_back(New(1));
  for (size_t i = 0; i < spans.size(); ++i)
    if (i % 4 != 0) Delete(spans[i]);
  EXPECT_EQ(heap().stats().surplus_releases, 0u);
  // 80 MiB freed at once: the whole huge pages go, and that brings the free memory under
  // the trigger, so no huge page is broken.
  Span* big = New(40 * kHP);
  Delete(big);
  EXPECT_GT(heap().stats().surplus_releases, 0u);
  EXPECT_GE(Huge().released, 40u);  // and the untouched slack of geometric growth
  EXPECT_EQ(Huge().partly_released, 0u);
  Check();
  // Free all but one page per huge page: now the free memory stays over the trigger after
  // the whole huge pages went, and the rule breaks partly used ones.
  for (size_t i = 0; i < spans.size(); i += 4)
    if (i % kHP != 0) Delete(spans[i]);
  EXPECT_GT(Huge().partly_released, 0u);
  EXPECT_LE(heap().stats().free_bytes, 2 * heap().SurplusReserve());
  Check();
  for (size_t i = 0; i < spans.size(); i += kHP) Delete(spans[i]);
  Check();
}

TEST_F(HugeHeapTest, ReusedReleasedPagesLeaveTheReleasedCount) {
  Span* a = New(2 * kHP);
  Delete(a);
  {
    SpinLockHolder h(heap().lock());
    heap().ReleaseAtLeastNPages(Length{2 * kHP});
  }
  EXPECT_EQ(Huge().released, 2u);
  Span* b = New(kHP);  // from the released run
  ASSERT_NE(b, nullptr);
  HugePageStats s = Huge();
  EXPECT_EQ(s.full, 1u);
  EXPECT_EQ(s.released, 1u);
  Check();
  Delete(b);
  Check();
}

// Releasing a freed block's whole huge pages leaves the page it had in its last, partly
// used one backed; the same request again takes both pieces instead of growing the heap
// (a program that churns one block of 4 huge pages and a page).
TEST_F(HugeHeapTest, TheSameLargeRequestReusesItsReleasedHugePagesAndBackedTail) {
  Span* a = New(4 * kHP + 1);
  Span* b = New(1);  // keeps the fifth huge page partly used
  ASSERT_TRUE(a && b);
  const PageId a_start = a->start;
  ASSERT_EQ(a_start.index % kHP, 0u);
  Delete(a);
  {
    SpinLockHolder h(heap().lock());
    EXPECT_EQ(heap().ReleaseAtLeastNPages(Length{4 * kHP}, /*allow_subrelease=*/false).n, 4 * kHP);
  }
  EXPECT_EQ(Huge().released, 4u);
  const size_t system = heap().stats().system_bytes;
  Span* again = New(4 * kHP + 1);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->start, a_start);
  EXPECT_EQ(heap().stats().system_bytes, system);
  EXPECT_EQ(Huge().released, 0u);
  EXPECT_EQ(heap().stats().unmapped_bytes, 0u);
  Check();
  Delete(again);
  Delete(b);
  Check();
}

TEST_F(HugeHeapTest, AdvisesPastTheThresholdAndCollapsesTheEarlyUnits) {
  // Below the threshold nothing is advised (a small program stays on small pages).
  std::vector<Span*> spans;
  // (Growth is geometric, an eighth of the heap: stop well before the threshold.)
  while (heap().stats().system_bytes * 9 / 8 + 2 * kHugePageSize < PageHeap::kAdviseAfterBytes)
    spans.push_back(New(kHP));
  EXPECT_EQ(Huge().advised, 0u);
  EXPECT_EQ(t_->sys.advised_bytes(), 0u);
  // Crossing it advises everything, and marks the early units (mostly full) for collapse.
  spans.push_back(New(PageHeap::kAdviseAfterBytes / kPageSize));
  HugePageStats s = Huge();
  EXPECT_EQ(s.advised, s.owned);
  EXPECT_GE(t_->sys.advised_bytes(), heap().stats().system_bytes);
  PageHeap::HugeRange ranges[4];
  size_t n, bytes = 0;
  {
    SpinLockHolder h(heap().lock());
    n = heap().TakeCollapseCandidates(ranges, 4);
  }
  ASSERT_GT(n, 0u);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(ranges[i].start) % kHugePageSize, 0u);
    bytes += ranges[i].bytes;
  }
  EXPECT_GT(bytes, 0u);
  // The kernel's view: the heap's mapping holding the last span carries the advice.
  const bool advised = VmFlagsAt(spans.back()->start_ptr()).find(" hg") != std::string::npos;
  EXPECT_TRUE(advised) << "the heap's memory is not advised MADV_HUGEPAGE";
  for (Span* sp : spans) Delete(sp);
  Check();
}

// A pass inside one of the program's calls collapses only what the heap's growth past the
// threshold paid for (1/kCollapseGrowthDivisor of it); the candidates beyond wait for more
// growth or for an explicit pass (ProcessBackgroundActions, the background thread), which
// takes them all.
TEST_F(HugeHeapTest, CollapseOnTheProgramsThreadsIsPaidByGrowth) {
  std::vector<Span*> spans;
  while (heap().stats().system_bytes * 9 / 8 + 2 * kHugePageSize < PageHeap::kAdviseAfterBytes)
    spans.push_back(New(kHP));
  EXPECT_EQ(Credit(), 0u) << "credit below the threshold";
  // Past the threshold by at least a few huge pages' worth of credit.
  constexpr size_t kPast = 16u << 20;
  while (heap().stats().system_bytes < PageHeap::kAdviseAfterBytes + kPast) spans.push_back(New(kHP));
  const size_t past = heap().stats().system_bytes - PageHeap::kAdviseAfterBytes;
  const size_t credit = Credit();
  EXPECT_LE(credit, past / PageHeap::kCollapseGrowthDivisor);
  EXPECT_GE(credit + 4 * kPageSize, past / PageHeap::kCollapseGrowthDivisor);
  const auto take = [this](bool paid_by_growth) {
    PageHeap::HugeRange ranges[Scavenger::kMaxCollapsePerPass];
    size_t bytes = 0;
    SpinLockHolder h(heap().lock());
    const size_t n = heap().TakeCollapseCandidates(ranges, Scavenger::kMaxCollapsePerPass, paid_by_growth);
    for (size_t i = 0; i < n; ++i) bytes += ranges[i].bytes;
    return bytes;
  };
  const size_t paid = take(true);
  EXPECT_GT(paid, 0u);
  EXPECT_LE(paid, credit) << "a program-thread pass collapsed more than the growth paid for";
  EXPECT_LT(Credit(), kHugePageSize);
  EXPECT_EQ(take(true), 0u) << "out of credit, yet a program-thread pass collapsed more";
  // The early units not collapsed yet are still marked: an explicit pass takes them.
  const size_t rest = take(false);
  EXPECT_GT(rest, credit) << "the candidates beyond the credit lost their mark";
  EXPECT_EQ(take(false), 0u);
  for (Span* sp : spans) Delete(sp);
  Check();
}

// The AnonHugePages figure (KiB) of the mapping holding addr; -1 if there is none.
long AnonHugeKibAt(const void* addr) {
  FILE* f = fopen("/proc/self/smaps", "r");
  if (f == nullptr) return -1;
  char line[512];
  bool inside = false;
  long kib = -1;
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      inside = a >= lo && a < hi;
    } else if (inside && sscanf(line, "AnonHugePages: %ld kB", &kib) == 1) {
      break;
    }
  }
  fclose(f);
  return kib;
}

// MADV_COLLAPSE of a range stops at a huge page none of whose pages was ever touched
// (blocks handed out and not written yet): EINVAL, and the huge pages after it stay on
// small pages. Collapse then goes one huge page at a time, so those still collapse.
TEST_F(HugeHeapTest, CollapseGetsPastAHugePageThatWasNeverTouched) {
  const size_t span = 3 * kHugePageSize;
  char* raw = static_cast<char*>(mmap(nullptr, span + kHugePageSize, PROT_READ | PROT_WRITE,
                                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(raw, MAP_FAILED);
  char* p = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + kHugePageSize - 1) & ~(kHugePageSize - 1));
  // Touched before the advice, so on small pages: huge page 0 and huge page 2; huge page
  // 1 never. Advised on its own, the range becomes a mapping of its own, whose smaps entry
  // counts only its huge pages.
  p[0] = 1;
  p[2 * kHugePageSize + 64] = 1;
  if (!t_->sys.AdviseHugePages(p, span, SystemAllocator::kMmap)) {
    munmap(raw, span + kHugePageSize);
    GTEST_SKIP() << "THP unavailable";
  }
  // Is MADV_COLLAPSE there at all (Linux >= 6.1, THP in madvise or always mode)?
  char* probe = static_cast<char*>(mmap(nullptr, 2 * kHugePageSize, PROT_READ | PROT_WRITE,
                                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(probe, MAP_FAILED);
  char* pp = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(probe) + kHugePageSize - 1) & ~(kHugePageSize - 1));
  pp[0] = 1;
  const bool collapse_works = os::CollapseHugePages(pp, kHugePageSize);
  munmap(probe, 2 * kHugePageSize);
  if (!collapse_works) {
    munmap(raw, span + kHugePageSize);
    GTEST_SKIP() << "MADV_COLLAPSE is not supported here";
  }
  const PageHeap::HugeRange range{p, span};
  const size_t collapsed = heap().Collapse(&range, 1);
  // Both touched huge pages are huge now, whatever the kernel did with the whole range.
  EXPECT_EQ(AnonHugeKibAt(p), 2 * static_cast<long>(kHugePageSize / 1024));
  EXPECT_GE(collapsed, 2 * kHugePageSize);
  munmap(raw, span + kHugePageSize);
}

// A huge page broken by a release is advised MADV_NOHUGEPAGE, so that khugepaged (which
// collapses a region with a single page present, at the default max_ptes_none) does not
// back its released pages again: once seen in a CI run as +9 MiB RSS after a release.
// Reused whole again, it gets MADV_HUGEPAGE back.
TEST_F(HugeHeapTest, ABrokenHugePageIsKeptOffKhugepagedUntilWholeAgain) {
  std::vector<Span*> spans;
  spans.push_back(New(PageHeap::kAdviseAfterBytes / kPageSize + kHP));  // advised from the start
  ASSERT_EQ(Huge().advised, Huge().owned);
  Span* a = New(kHP / 2);
  Span* b = New(kHP / 2);
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(a->start.index / kHP, b->start.index / kHP) << "not one huge page";
  Delete(b);
  {
    SpinLockHolder h(heap().lock());
    heap().ReleaseAtLeastNPages(Length{~uintptr_t{0} >> 1});  // all free memory: breaks a's
  }
  ASSERT_EQ(Huge().partly_released, 1u);
  EXPECT_TRUE(Info(a)->no_huge);
  EXPECT_NE(VmFlagsAt(a->start_ptr()).find(" nh"), std::string::npos) << VmFlagsAt(a->start_ptr());
  // The released half reused: nothing released in it any more, the advice comes back.
  Span* c = New(kHP / 2);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->start.index / kHP, a->start.index / kHP);
  EXPECT_EQ(Huge().partly_released, 0u);
  EXPECT_FALSE(Info(a)->no_huge);
  EXPECT_NE(VmFlagsAt(a->start_ptr()).find(" hg"), std::string::npos) << VmFlagsAt(a->start_ptr());
  Delete(c);
  Delete(a);
  for (Span* sp : spans) Delete(sp);
  Check();
}

TEST(HugeHeapNoThpTest, WithThpNeverNothingIsAdvisedAndEverythingWorks) {
  auto t = testing::TestHeap::Make();
  t->sys.set_thp_mode(os::ThpMode::kNever);
  t->heap.set_hugepage_aware(true);
  std::vector<Span*> spans;
  {
    SpinLockHolder h(t->heap.lock());
    for (int i = 0; i < 110; ++i) spans.push_back(t->heap.New(Length{kHP * 2}));
    for (Span* s : spans) ASSERT_NE(s, nullptr);
    EXPECT_EQ(t->heap.CollectHugePageStats().advised, 0u);
    for (Span* s : spans) t->heap.Delete(s);
    t->heap.Verify();
  }
  EXPECT_EQ(t->sys.advised_bytes(), 0u);
  EXPECT_FALSE(t->sys.AdviseHugePages(spans[0]->start_ptr(), kHugePageSize, SystemAllocator::kMmap));
}

TEST_F(HugeHeapTest, APassReleasesAllOfARunItFreedThoughReleaseSplitsItAtHugePages) {
  // A run the maintenance pass itself frees (the front end giving back) goes to the OS in
  // the same pass. Release cuts it at huge page bounds: its whole huge page first, then the
  // partial pieces at its ends, which must still count as freed during the pass (the clock
  // stamps them like a run freed just before it, which the pass leaves alone).
  {
    SpinLockHolder h(heap().lock());
    heap().set_clock(1000);
  }
  std::vector<Span*> spans;
  for (uintptr_t i = 0; i < 3 * kHP; ++i) spans.push_back(New(1));
  std::sort(spans.begin(), spans.end(), [](Span* x, Span* y) { return x->start < y->start; });
  ASSERT_EQ(spans[0]->start.index % kHP, 0u);
  PageHeap::PassStart pass;
  {
    SpinLockHolder h(heap().lock());
    pass = heap().pass_start();
  }
  // 10 pages at the end of the first huge page, all of the second, 10 of the third.
  for (uintptr_t i = kHP - 10; i < 2 * kHP + 10; ++i) Delete(spans[i]);
  uintptr_t released;
  {
    SpinLockHolder h(heap().lock());
    released = heap().ReleaseAtLeastNPages(Length{10 * kHP}, true, &pass).n;
  }
  EXPECT_EQ(released, kHP + 20) << "the pieces cut off the run the pass freed stayed";
  Check();
  for (uintptr_t i = 0; i < 3 * kHP; ++i)
    if (i < kHP - 10 || i >= 2 * kHP + 10) Delete(spans[i]);
  Check();
}

TEST_F(HugeHeapTest, RandomOperationsKeepEveryInvariant) {
  std::mt19937 rng(11);
  std::vector<Span*> live;
  heap().set_surplus_release(true);
  for (int step = 0; step < 4000; ++step) {
    const unsigned op = rng() % 10;
    if (op < 5 || live.empty()) {
      const uintptr_t n = rng() % 8 == 0 ? 1 + rng() % (3 * kHP) : 1 + rng() % 64;
      Span* s = New(n);
      ASSERT_NE(s, nullptr) << "step " << step << " n " << n;
      if (n >= kHP) {
        EXPECT_EQ(s->start.index % kHP, 0u);
      }
      live.push_back(s);
    } else if (op < 9) {
      const size_t i = rng() % live.size();
      Delete(live[i]);
      live[i] = live.back();
      live.pop_back();
    } else {
      heap().set_clock(static_cast<uint64_t>(step));
      ReleaseIdle(static_cast<uint64_t>(step) - rng() % 50);
    }
    if (step % 200 == 0) Check();
  }
  for (Span* s : live) Delete(s);
  Check();
  EXPECT_EQ(heap().stats().in_use_spans, 0u);
}

}  // namespace
}  // namespace tcm
