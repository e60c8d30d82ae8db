// PageHeap: hands out runs of pages (spans) and takes them back, coalescing free neighbours.
//
// Free runs of 1..kMaxPages-1 pages sit on exact-length lists; longer runs live in a
// best-fit tree. Each length has two kinds: kNormal (backed by memory) and kReturned
// (released to the OS with madvise; reused memory faults back in as zeros). A request for
// n pages takes the smallest run that fits, normal before returned at equal length, and
// gives the remainder back. A request of kMaxPages or more that no run holds alone takes
// adjacent runs of both kinds together before the heap grows (JoinAcrossKinds). Memory
// comes from the SystemAllocator in >= kMinSystemAlloc chunks and is never unmapped, so
// pagemap entries never dangle.
//
// Hugepage-aware mode (set_hugepage_aware, on by default in the library unless
// TCMALLOC_HUGEPAGES=0 or THP is unavailable): the heap grows in 2 MiB-aligned units of whole
// huge pages, advised MADV_HUGEPAGE once the heap passes kAdviseAfterBytes. Below it the
// heap stays on 4 KiB pages: the huge page being filled at the frontier is resident whole
// from its first touch, up to 2 MiB more than a small page heap would hold, which is at most
// ~1% of a heap past the threshold (a trivial program keeps its small RSS, and 10^7 8-byte
// objects their 2% overhead). When the heap crosses it, the earlier units are advised too
// and the mostly used ones collapsed into huge pages (MADV_COLLAPSE, by the scavenger,
// outside the heap lock: TakeCollapseCandidates).
// A HugePageTracker counts per huge page the pages in use and released, and
//   - placement: a request of >= 1 huge page starts on a huge page boundary (it covers whole
//     huge pages; its tail's slack is filled by small spans); smaller requests take the best
//     fitting length, and among runs of that length the one in the fullest huge page, so
//     partly used huge pages fill up and empty ones stay whole (requests between 1 MiB and
//     2 MiB share the best-fit tree with them and may straddle two huge pages);
//   - release: whole free huge pages first (2 MiB MADV_DONTNEED, the huge page comes back
//     whole on reuse); breaking a huge page by releasing the free runs inside a partly used
//     one ("subrelease") only when the free memory is idle and large (above
//     SubreleaseFloor), sparsest huge pages first, or when explicitly asked for
//     (ReleaseAtLeastNPages: ReleaseFreeMemory, the heap limit). The surplus rule releases
//     whole huge pages, and breaks partly used ones only if the free memory is still over
//     its trigger afterwards.
// Off, the heap is the plain one described above (memory in kMinSystemAlloc chunks, runs
// released wherever they are free).
//
// Pagemap invariants (what free() and coalescing rely on):
//   - the first and last page of every span map to it;
//   - every page of a small-object span maps to it and carries its size class;
//   - every page not in a small-object span has class 0.
//
// Locking: every member function REQUIRES lock() held, except the lock-free pagemap reads.
#ifndef TCMALLOC_PAGE_HEAP_H_
#define TCMALLOC_PAGE_HEAP_H_

#include <cstdint>

#include "core/arena.h"
#include "core/huge_page_tracker.h"
#include "base/spinlock.h"
#include "core/pagemap.h"
#include "core/record_pool.h"
#include "platform/stack_trace.h"
#include "core/span.h"
#include "core/span_tree.h"
#include "core/system_alloc.h"

namespace tcm {

struct PageHeapStats {
  size_t system_bytes = 0;    // obtained from the system allocator, ever
  size_t free_bytes = 0;      // in kNormal free runs
  size_t unmapped_bytes = 0;  // in kReturned free runs
  size_t in_use_spans = 0;    // spans handed out (large objects and small-object spans)
  size_t released_bytes_total = 0;
  uint64_t release_calls = 0;
  uint64_t surplus_releases = 0;  // times the surplus rule fired (set_surplus_release)
  uint64_t surplus_skips = 0;     // times it held back: the program was cycling (kSurplusCycle)
  // Hugepage-aware mode:
  uint64_t hugepages_released = 0;   // whole huge pages released (count, ever)
  size_t subreleased_bytes_total = 0; // bytes released from inside partly used huge pages
};

// One heap growth: how much the page heap asked the system for, and from where.
struct GrowthRecord {
  size_t bytes;
  int depth;
  void* pcs[os::kMaxStackDepth];
  GrowthRecord* next;
};

class PageHeap {
 public:
  constexpr PageHeap(PageMap* pagemap, SystemAllocator* system, Arena* arena)
      : pagemap_(pagemap), system_(system), arena_(arena), huge_(arena) {}
  // Unconnected, all zero: the process's heap is a global in .bss, so its 57 KiB of list
  // heads cost no resident memory until used (in .data, for the three pointers, the
  // kernel's fault-around mapped them from the file). Connect before any other call.
  constexpr PageHeap() = default;
  void Connect(PageMap* pagemap, SystemAllocator* system, Arena* arena) {
    pagemap_ = pagemap;
    system_ = system;
    arena_ = arena;
    huge_.set_arena(arena);
  }

  // Hugepage-aware placement, growth and release (see above). REQUIRES: set before the heap
  // first grows.
  void set_hugepage_aware(bool on) { huge_aware_ = on; }
  bool hugepage_aware() const { return huge_aware_; }
  // Heap size (bytes obtained) from which growth is advised MADV_HUGEPAGE.
  static constexpr size_t kAdviseAfterBytes = size_t{192} << 20;
  // Hugepage-aware growth: at least an eighth of the heap, up to this much at once.
  static constexpr size_t kMaxGrowthBytes = size_t{64} << 20;
  // Subrelease happens only while the free backed bytes exceed this (in-use dependent) floor.
  static constexpr size_t kSubreleaseFloor = size_t{2} << 20;
  // Huge pages advised after they were faulted in, mostly used and with nothing released:
  // up to max ranges (merged when adjacent) to collapse. Clears their mark.
  // paid_by_growth (a pass on a program's thread): no more than the collapse credit, which
  // the heap earns as it grows past kAdviseAfterBytes (kCollapseGrowthDivisor below); the
  // marks beyond it wait for a later pass. Otherwise (ProcessBackgroundActions, the
  // background thread) every candidate.
  struct HugeRange {
    void* start;
    size_t bytes;
  };
  size_t TakeCollapseCandidates(HugeRange* out, size_t max, bool paid_by_growth = false);
  // Bytes a pass on a program's thread may collapse per byte the heap grew past the
  // threshold: 1/kCollapseGrowthDivisor. A collapse clears a fresh huge page and copies what
  // is resident into it, so the program copies at most one byte of its early units for every
  // two it asked for, spread over the passes of that growth. All at the crossing, it was one
  // pass of 0.22-0.38 s inside one malloc call (light_batches' 256 MiB, the Python
  // workload's 263 MB; strace, bench/README "Thirty-fourth session"), a heap that stops soon
  // after the threshold paid the whole copy for little TLB gain, and the kernel's khugepaged
  // collapses advised memory over the next minutes anyway. A heap that grows to 3x the
  // threshold has earned the whole prefix (a 1 GiB heap ends as covered as before).
  static constexpr size_t kCollapseGrowthDivisor = 2;
  size_t collapse_credit() const { return collapse_credit_; }
  // REQUIRES: lock() NOT held (a collapse copies 2 MiB per huge page). Returns bytes collapsed.
  size_t Collapse(const HugeRange* ranges, size_t n);
  size_t SubreleaseFloor() const;
  // Per-huge-page counts (hugepage-aware mode; empty otherwise).
  HugePageStats CollectHugePageStats() { return huge_.Collect(); }
  const HugePageTracker& hugepages() const { return huge_; }

  SpinLock* lock() { return &lock_; }

  // Span records and the central lists' span bitmaps (record_pool.h): pages of records all
  // free go back to the OS beyond a reserve (keep_reserve false: all of them). Returns the
  // bytes released.
  static constexpr size_t kSpanRecordReserve = 16;  // 64 KiB: ~580 spans for the next burst
  static constexpr size_t kBitmapReserve = 2;       // a pool, for the classes in use
  size_t ReleaseSpanRecords(bool keep_reserve = true);
  // Moves the records of free runs off sparse pages of records whose every record is a
  // free run (they are the page heap's alone: lists, tree and pagemap), at most max_moves,
  // so those pages empty and can be released. Returns the records moved.
  size_t CompactSpanRecords(size_t max_moves);
  static constexpr size_t kCompactMovesPerPass = 64;
  const RecordPool& span_records() const { return span_alloc_.pool(); }
  // A span's bitmap of `words` 64-bit words (zeroed), from a pool per word count; nullptr
  // when out of metadata. REQUIRES lock() held, like DeleteBitmap.
  static constexpr size_t kMaxBitmapWords = 16;
  uint64_t* NewBitmap(size_t words);
  void DeleteBitmap(uint64_t* bits, size_t words);
  // Over the span records and every bitmap pool: pages backed, pages not backed (released
  // or never used), bytes released in all, records in use.
  struct RecordTotals {
    size_t backed_bytes = 0;
    size_t unbacked_bytes = 0;
    size_t released_bytes = 0;
    size_t span_records = 0;
    size_t bitmaps = 0;
  };
  RecordTotals record_totals() const;

  // Where the heap's metadata comes from (the central lists take their span bitmaps there).
  Arena* arena() const { return arena_; }
  // A span of exactly n pages, in use, sizeclass 0; nullptr when out of memory.
  Span* New(Length n);
  // Like New, with the start page a multiple of `align` pages (a power of two).
  Span* NewAligned(Length n, Length align);
  // Returns an in-use span (large or small-object) to the free runs.
  void Delete(Span* span);
  // Grows an in-use large span to new_len pages by taking the free run right after it;
  // false (nothing changed) if that run is missing or too short.
  bool ExtendInPlace(Span* span, Length new_len);
  // Shrinks an in-use large span to new_len pages, giving the tail back.
  void ShrinkInPlace(Span* span, Length new_len);
  // Turns an in-use span into a small-object span of class cl: every page gets mapped.
  void RegisterSizeClass(Span* span, uint8_t cl);

  // Releases free kNormal runs to the OS until at least n pages were released or none are
  // left; returns the pages released. Largest runs go first (fewest syscalls per page).
  // Hugepage-aware: whole free huge pages first; runs inside partly used huge pages only
  // if allow_subrelease. Given `pass` (when a maintenance pass began: the clock, the
  // count of frees, and min_age), a run freed before the pass is left alone unless it has
  // been free for more than min_age (0: since before the clock's last tick): a
  // recent one is a block the program frees and takes back between two calls, whatever
  // its size. The clock's tick alone was not enough: a program preempted between its free
  // and its next malloc (a loaded machine) spans a tick often, and a 4 MiB block in a loop
  // was released and faulted back in about one run in fifteen of the churn test under
  // load. Runs freed during the pass (free_seq past pass->frees) go; untouched (fresh)
  // runs do not (no memory to give back).
  struct PassStart {
    uint64_t time;
    uint64_t frees;
    uint64_t min_age;
  };
  PassStart pass_start(uint64_t min_age = 0) const { return {Now(), frees_, min_age}; }
  Length ReleaseAtLeastNPages(Length n, bool allow_subrelease = true, const PassStart* pass = nullptr);

  // Releases kNormal free runs, other than untouched (fresh) ones, that have been free
  // since before `idle_since` (a time on the caller's clock, see set_clock). Returns the
  // pages released. Hugepage-aware: the
  // whole huge pages inside such runs first; then the runs in partly used huge pages,
  // sparsest first, while the free backed memory exceeds SubreleaseFloor().
  Length ReleaseIdle(uint64_t idle_since);
  // The time stamped on spans as they become free: the clock function's reading when one
  // is set (the composition root sets the coarse monotonic clock, so a run freed after a
  // long quiet spell is not mistaken for an idle one), else the last set_clock() value
  // (unit tests drive time by hand).
  void set_clock(uint64_t now) { clock_ = now; }
  void set_clock_source(uint64_t (*now)()) { clock_source_ = now; }
  // The time free runs are stamped with: the clock source's, else the set clock.
  uint64_t Now() const { return clock_source_ != nullptr ? clock_source_() : clock_; }

  // Limit on memory obtained from the system minus memory released back (0 = none).
  // Growth beyond it first releases free runs, then fails.
  void set_limit(size_t bytes) { limit_ = bytes; }
  size_t limit() const { return limit_; }
  // Release at the moment a lot becomes free: when a span returned by Delete() leaves more
  // than twice SurplusReserve() in free backed runs (the program freed far more than it
  // uses: a thread exited, a big container was emptied, a huge block was freed), the
  // largest runs are released at once until SurplusReserve() is left. The reserve is
  // kSurplusReserve plus half the bytes in use, so a program that frees and reallocates
  // blocks below kSurplusReserve (large-block churn) keeps its backed pages. Idle runs
  // below the trigger are the scavenger's business. Off by default (tests of exact
  // accounting); the composition root turns it on unless releasing is disabled.
  //
  // A program that cycles (builds a 40 MiB structure, frees it, builds it again, every
  // few tens of milliseconds) would have every cycle's surplus released and faulted back
  // in: a fault storm (binary trees of depth 20 alone: 386 MiB released and 107 000 minor
  // faults in 0.9 s, 18% of its time in the kernel). So the rule holds back when, for the
  // second time in a row, it would fire within the cycle window of its previous firing and
  // the program has taken back at least kSurplusReserve of the released pages since; it
  // stays held back while the triggers keep coming that fast. Once is not a cycle: the
  // design's two-phase program frees its second phase ~140 ms after its first here, and
  // on a faster machine that second release must still happen. Held-back memory is the
  // scavenger's: released once it has been idle for the idle time, so a program that
  // stops cycling still gives it back. Triggers in one long run of frees (nothing taken
  // back between) all release.
  //
  // The window grows with what the previous trigger would release (SurplusCycleWindow):
  // kSurplusCyclePerMiB a MiB, at least kSurplusCycle. Faulting released memory back in
  // costs about 1 ms a MiB here (binary trees of depth 20, one thread: 366 MiB released
  // in 14 firings took 1.66 s, 54 MiB in 2 took 1.32 s), so a program whose cycle is
  // slower than the window loses at most ~1/16 of its time to refaults. With a fixed
  // 100 ms, a 32 MiB tree rebuilt every 40 ms was caught, but the first refaults slowed
  // the cycle to 90-100 ms, just under or over the line: 2 to 14 firings from run to run.
  static constexpr size_t kSurplusReserve = size_t{16} << 20;
  static constexpr uint64_t kSurplusCycle = 100'000'000;       // ns
  static constexpr uint64_t kSurplusCyclePerMiB = 16'000'000;  // ns
  static uint64_t SurplusCycleWindow(size_t surplus_bytes);
  void set_surplus_release(bool on) { surplus_release_ = on; }
  bool surplus_release() const { return surplus_release_; }
  size_t SurplusReserve() const;
  // True once after each time the surplus rule released memory, then false until it does
  // again: the caller that made it fire (by a Delete under lock()) acts on it once the lock
  // is dropped (the central lists' kept spans go back too: central_freelist.h).
  bool TakeSurplusReleased() {
    const bool fired = surplus_unseen_;
    surplus_unseen_ = false;
    return fired;
  }
  // True once after each New (under lock()) that handed out pages the process does not
  // hold yet (never touched since the OS gave them, or released): the heap is about to
  // grow resident. The caller gives back the central lists' kept spans once the lock is
  // dropped, so pages kept empty for one class are reused before the heap grows for
  // another (central_freelist.h, "Kept spans"). Not reported: untouched pages of a run that
  // merged with a freed neighbour (the merged run is no longer `fresh`).
  bool TakeNewMemoryCarved() {
    const bool carved = new_memory_unseen_;
    new_memory_unseen_ = false;
    return carved;
  }

  // Release every run as soon as it becomes free (TCMALLOC_AGGRESSIVE_DECOMMIT).
  void set_aggressive_decommit(bool on) { aggressive_decommit_ = on; }
  bool aggressive_decommit() const { return aggressive_decommit_; }

  const PageHeapStats& stats() const { return stats_; }
  // Visits every free span: f(Span*); spans are kNormal or kReturned.
  template <typename F>
  void ForEachFreeSpan(F f) {
    for (size_t i = 1; i < kMaxPages; ++i) {
      for (Span* s = normal_[i].first(); s != nullptr; s = normal_[i].NextOf(s)) f(s);
      for (Span* s = returned_[i].first(); s != nullptr; s = returned_[i].NextOf(s)) f(s);
    }
    large_normal_.ForEach(f);
    large_returned_.ForEach(f);
  }

  // Newest first; records live forever in the arena (one per >= 1 MiB of growth).
  const GrowthRecord* growth_records() const { return growth_; }
  // Whether a growth record gets the stack that caused it (else depth 0). Unwinding reads
  // the unwind tables of every module on the stack, which a program that never unwinds
  // otherwise keeps resident (~85 KiB: libc's, the program's, ours and the unwinder's
  // code), so the owner decides at each growth; null: always.
  void set_growth_stacks(bool (*wanted)()) { growth_stacks_ = wanted; }
  size_t growth_record_count() const { return growth_count_; }

  // Visits every span that starts at a page the pagemap knows, in address order, from
  // page `from`: f(Span*) returns false to stop; returns the page after the last visited.
  template <typename F>
  PageId ForEachSpanFrom(PageId from, F f);

  // Checks every invariant above; crashes with a message on the first violation.
  void Verify();

  void ResetLockAfterFork() { lock_.ResetAfterFork(); }

 private:
  Span* NewSpan(PageId start, Length len);
  void DeleteSpan(Span* s) { span_alloc_.Delete(s); }
  Span* SearchFreeAndLarge(Length n);
  // Hugepage-aware placement of n >= kPagesPerHugePage pages on a huge page boundary.
  Span* NewHugeAligned(Length n);
  // A free run of at least n pages with a huge-page-aligned stretch of n pages; nullptr if none.
  Span* FindHugeAlignedFit(Length n);
  // Copies the free-run fields (location, fresh, free_since, free_seq) of `whole` to a
  // piece split off it.
  static void InheritFreeState(Span* piece, const Span* whole);
  // Splits the first `head` pages off free run `span` as a free run of the same kind;
  // `span` keeps the rest. False if metadata ran out (nothing changed).
  bool SplitHead(Span* span, Length head);
  // Hugepage-aware release of the whole huge pages inside free kNormal run s; the partial
  // huge pages at its ends stay as kNormal runs. Returns pages released; *refused is set
  // when the OS said no.
  Length ReleaseWholeHugePages(Span* s, bool* refused);
  static bool HasWholeHugePage(const Span* s);
  // Advises [start, start+len) (anonymous memory), and the early unadvised units when the
  // heap crosses kAdviseAfterBytes.
  void AdviseGrowth(PageId start, Length len);
  void TrackUsed(PageId start, Length len, int sign) {
    if (huge_aware_) huge_.AddUsed(start, len, sign);
  }
  void TrackReleased(PageId start, Length len, int sign) {
    if (!huge_aware_) return;
    huge_.AddReleased(start, len, sign);
    KeepBrokenHugePagesSmall(start, len);
  }
  // Advised huge pages in [start, start+len) that are partly released get MADV_NOHUGEPAGE,
  // and get MADV_HUGEPAGE back once none or all of their pages are released.
  void KeepBrokenHugePagesSmall(PageId start, Length len);
  // Returns the free run that holds the new memory (merged with its free neighbours), or
  // nullptr when the system gave nothing.
  Span* GrowHeap(Length n);
  // With a limit set: releases free runs until n more mapped pages fit; false if they can't.
  bool MakeRoom(Length n);
  // Removes `span` from its free structure and returns an in-use span of n pages starting
  // at span->start; the remainder goes back as a free run of the same kind.
  Span* Carve(Span* span, Length n);
  void RecordSpan(Span* s) {
    pagemap_->Set(s->start, s);
    if (s->length.n > 1) pagemap_->Set(s->last(), s);
  }
  void InsertFree(Span* s);
  void RemoveFree(Span* s);
  // Frees pages that belong to no counted in-use span: Delete()'s second half, also used
  // for the pieces split off an in-use span (alignment slack, a shrunk tail).
  void FreePiece(Span* s);
  // Merges s (not yet on any list) with free neighbours of the same kind and inserts it.
  void MergeIntoFreeList(Span* s);
  Span* FreeNeighbor(PageId p, Span::Location kind);
  // The free run of either kind that covers page p, nullptr if none.
  Span* AnyFreeNeighbor(PageId p);
  // A free kNormal run holding n pages (from a huge page boundary if huge_aligned) made of
  // adjacent free runs of both kinds, their released pages in the request turned backed;
  // nullptr if no such stretch (see the .cc).
  Span* JoinAcrossKinds(Length n, bool huge_aligned);
  static uint64_t MergedFreeSince(const Span* a, const Span* b);
  // The surplus rule of set_surplus_release, after a Delete().
  void MaybeReleaseSurplus();
  // Releases one free kNormal span to the OS; returns its length, 0 if the OS refused.
  Length ReleaseSpan(Span* s);

  SpinLock lock_;
  PageMap* pagemap_ = nullptr;
  SystemAllocator* system_ = nullptr;
  Arena* arena_ = nullptr;
  TypedRecordPool<Span> span_alloc_;
  RecordPool bitmap_pools_[kMaxBitmapWords];  // [words - 1]: records of `words` words
  SpanList normal_[kMaxPages];
  SpanList returned_[kMaxPages];
  // Bit len set: normal_[len] (returned_[len]) holds a run. Kept by InsertFree/RemoveFree.
  static constexpr size_t kLengthWords = (kMaxPages + 63) / 64;
  uint64_t normal_lengths_[kLengthWords] = {};
  uint64_t returned_lengths_[kLengthWords] = {};
  SpanTree large_normal_;
  SpanTree large_returned_;
  PageHeapStats stats_;
  uint64_t clock_ = 0;
  uint64_t (*clock_source_)() = nullptr;
  GrowthRecord* growth_ = nullptr;
  size_t growth_count_ = 0;
  bool (*growth_stacks_)() = nullptr;
  size_t limit_ = 0;
  bool aggressive_decommit_ = false;
  bool surplus_release_ = false;
  // Hugepage-aware mode.
  bool huge_aware_ = false;
  HugePageTracker huge_;
  // Huge pages marked for collapse (HugePageInfo::collapse).
  size_t collapse_pending_ = 0;
  // Bytes passes on program threads may still collapse (kCollapseGrowthDivisor).
  size_t collapse_credit_ = 0;
  // The surplus rule, hugepage-aware: free bytes at which it tries again after a pass that
  // could not get below its trigger (the rest sits inside partly used huge pages). Also
  // SIZE_MAX while held back (until free memory drops under the trigger again).
  size_t surplus_retry_at_ = 0;
  // The surplus rule's cycle detection: when it last fired or held back, the window the
  // next trigger is measured against, whether it ever did, quick returns in a row (2, the
  // most it counts: holding back), and bytes of released runs handed out since it last
  // released.
  uint64_t frees_ = 0;  // runs freed so far (Span::free_seq)
  uint64_t surplus_last_ = 0;
  // SurplusCycleWindow of the last trigger; read only once surplus_fired_. Zero by default:
  // any non-zero member default moves g_pageheap (59 KiB) from .bss to .data.
  uint64_t surplus_window_ = 0;
  bool surplus_fired_ = false;
  bool surplus_unseen_ = false;  // TakeSurplusReleased
  bool new_memory_unseen_ = false;  // TakeNewMemoryCarved
  int surplus_quick_ = 0;
  size_t surplus_reused_ = 0;
};

template <typename F>
PageId PageHeap::ForEachSpanFrom(PageId from, F f) {
  PageId p = from;
  const PageId end{uintptr_t{1} << PageMap::kPageBits};
  while (p < end) {
    if (!pagemap_->LeafExists(p)) {
      p = PageId{((p.index >> PageMap::kLeafBits) + 1) << PageMap::kLeafBits};
      continue;
    }
    Span* s = pagemap_->GetSpan(p);
    if (s != nullptr && s->start == p) {
      if (!f(s)) return p + s->length;
      p = p + s->length;
    } else {
      p = p + Length{1};
    }
  }
  return end;
}

}  // namespace tcm

#endif  // TCMALLOC_PAGE_HEAP_H_
