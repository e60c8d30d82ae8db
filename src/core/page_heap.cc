#include "core/page_heap.h"

#include "base/log.h"

namespace tcm {

size_t PageHeap::CompactSpanRecords(size_t max_moves) {
  constexpr size_t kRecordBytes = TypedRecordPool<Span>::kRecordBytes;
  RecordPool& pool = span_alloc_.pool();
  void* found[kCompactMovesPerPass];
  if (max_moves > kCompactMovesPerPass) max_moves = kCompactMovesPerPass;
  // Pages with at most a quarter of their records in use, all of them free runs: those
  // empty once their records move. Spans in use never move (central lists and lock-free
  // readers hold them).
  auto free_run = [](const void* r) { return static_cast<const Span*>(r)->location != Span::kInUse; };
  const size_t n =
      pool.CollectSparse(found, max_moves, RecordPool::RecordsPerPage(kRecordBytes) / 4, kRecordBytes, free_run);
  size_t moved = 0;
  for (size_t i = 0; i < n; ++i) {
    auto* const s = static_cast<Span*>(found[i]);
    auto* const t = static_cast<Span*>(pool.NewForMove(kRecordBytes));
    if (t == nullptr) break;
    RemoveFree(s);  // off its list or the tree: no links left in it
    __builtin_memcpy(static_cast<void*>(t), s, sizeof(Span));
    InsertFree(t);
    RecordSpan(t);  // the pagemap now names t at both ends
    DeleteSpan(s);
    ++moved;
  }
  return moved;
}

size_t PageHeap::ReleaseSpanRecords(bool keep_reserve) {
  CompactSpanRecords(kCompactMovesPerPass);
  size_t released = span_alloc_.pool().Release(keep_reserve ? kSpanRecordReserve : 0);
  for (RecordPool& p : bitmap_pools_) released += p.Release(keep_reserve ? kBitmapReserve : 0);
  return released;
}

uint64_t* PageHeap::NewBitmap(size_t words) {
  if (words == 0 || words > kMaxBitmapWords) return nullptr;
  return static_cast<uint64_t*>(bitmap_pools_[words - 1].New(arena_, words * sizeof(uint64_t)));
}

void PageHeap::DeleteBitmap(uint64_t* bits, size_t words) { bitmap_pools_[words - 1].Delete(bits); }

PageHeap::RecordTotals PageHeap::record_totals() const {
  RecordTotals t;
  auto add = [&t](const RecordPool& p) {
    t.backed_bytes += p.backed_bytes();
    t.unbacked_bytes += p.unbacked_bytes();
    t.released_bytes += p.released_bytes();
  };
  add(span_alloc_.pool());
  t.span_records = span_alloc_.pool().in_use();
  for (const RecordPool& p : bitmap_pools_) {
    add(p);
    t.bitmaps += p.in_use();
  }
  return t;
}

Span* PageHeap::NewSpan(PageId start, Length len) {
  Span* s = span_alloc_.New(arena_);
  if (s == nullptr) return nullptr;
  s->start = start;
  s->length = len;
  return s;
}

void PageHeap::InsertFree(Span* s) {
  bool returned = s->location == Span::kReturned;
  if (s->length.n < kMaxPages) {
    (returned ? returned_ : normal_)[s->length.n].PushFront(s);
    uint64_t* const lengths = returned ? returned_lengths_ : normal_lengths_;
    lengths[s->length.n / 64] |= uint64_t{1} << (s->length.n % 64);
  } else {
    (returned ? large_returned_ : large_normal_).Insert(s);
  }
  (returned ? stats_.unmapped_bytes : stats_.free_bytes) += s->length.bytes();
}

void PageHeap::RemoveFree(Span* s) {
  bool returned = s->location == Span::kReturned;
  if (s->length.n < kMaxPages) {
    SpanList::Remove(s);
    if ((returned ? returned_ : normal_)[s->length.n].empty()) {
      uint64_t* const lengths = returned ? returned_lengths_ : normal_lengths_;
      lengths[s->length.n / 64] &= ~(uint64_t{1} << (s->length.n % 64));
    }
  } else {
    (returned ? large_returned_ : large_normal_).Remove(s);
  }
  (returned ? stats_.unmapped_bytes : stats_.free_bytes) -= s->length.bytes();
}

// Runs of one length looked at for the fullest huge page: enough to find a well used one
// among the usual handful, bounded so a long list costs no more than a few cache misses.
static constexpr int kPlacementCandidates = 8;

Span* PageHeap::SearchFreeAndLarge(Length n) {
  // The lengths with a run, from the bitmaps: looking at every list from n up was 35% of a
  // loop that allocates and frees 1000 blocks of 16 KiB (each new span looked at ~250
  // empty lists before the large runs).
  for (size_t word = n.n / 64; word < kLengthWords; ++word) {
    uint64_t bits = normal_lengths_[word] | returned_lengths_[word];
    if (word == n.n / 64) bits &= ~uint64_t{0} << (n.n % 64);
    if (bits == 0) continue;
    const size_t len = word * 64 + static_cast<size_t>(__builtin_ctzll(bits));
    if (Span* s = normal_[len].first()) {
      if (!huge_aware_) return s;
      // Carving takes the start of the run: prefer the run whose huge page is fullest.
      Span* best = s;
      int best_used = -1;
      int looked = 0;
      for (Span* c = s; c != nullptr && looked < kPlacementCandidates; c = normal_[len].NextOf(c), ++looked) {
        const HugePageInfo* h = huge_.Find(c->start);
        const int used = h == nullptr ? 0 : h->used;
        if (used > best_used) {
          best = c;
          best_used = used;
        }
      }
      return best;
    }
    return returned_[len].first();
  }
  Span* a = large_normal_.BestFit(n);
  Span* b = large_returned_.BestFit(n);
  if (a == nullptr) return b;
  if (b == nullptr) return a;
  // Best fit across both kinds; prefer memory that is still backed on ties.
  if (b->length < a->length) return b;
  return a;
}

bool PageHeap::MakeRoom(Length n) {
  if (limit_ == 0) return true;
  size_t mapped = stats_.system_bytes - stats_.unmapped_bytes;
  if (mapped + n.bytes() <= limit_) return true;
  ReleaseAtLeastNPages(Length::FromBytesRoundUp(mapped + n.bytes() - limit_));
  mapped = stats_.system_bytes - stats_.unmapped_bytes;
  return mapped + n.bytes() <= limit_;
}

Span* PageHeap::New(Length n) {
  if (n.n == 0) n.n = 1;
  if (huge_aware_ && n.n >= kPagesPerHugePage) return NewHugeAligned(n);
  Span* s = SearchFreeAndLarge(n);
  if (s != nullptr && s->location == Span::kReturned && limit_ != 0) {
    // Reusing released pages commits memory again: it counts against the limit. Making
    // room releases (and merges) other runs, so search again afterwards.
    if (!MakeRoom(n)) return nullptr;
    s = SearchFreeAndLarge(n);
  }
  if (s == nullptr) s = JoinAcrossKinds(n, /*huge_aligned=*/false);
  if (s == nullptr) {
    if (!GrowHeap(n)) return nullptr;
    s = SearchFreeAndLarge(n);
    if (s == nullptr) return nullptr;
  }
  return Carve(s, n);
}

static constexpr uintptr_t kHugeMask = kPagesPerHugePage - 1;
static uintptr_t HugeRoundUp(uintptr_t page) { return (page + kHugeMask) & ~kHugeMask; }
static uintptr_t HugeRoundDown(uintptr_t page) { return page & ~kHugeMask; }

bool PageHeap::HasWholeHugePage(const Span* s) {
  return HugeRoundUp(s->start.index) + kPagesPerHugePage <= s->end().index;
}

Span* PageHeap::FindHugeAlignedFit(Length n) {
  auto fits = [n](const Span* s) { return HugeRoundUp(s->start.index) + n.n <= s->end().index; };
  // The best fit of n pages often starts on a boundary already (whole huge pages freed
  // earlier); otherwise the best fit of n + 255 pages surely holds an aligned stretch.
  Span* a = large_normal_.BestFit(n);
  if (a != nullptr && fits(a)) return a;
  Span* b = large_returned_.BestFit(n);
  if (b != nullptr && fits(b)) return b;
  const Length padded = n + Length{kHugeMask};
  a = large_normal_.BestFit(padded);
  b = large_returned_.BestFit(padded);
  if (a == nullptr) return b;
  if (b == nullptr) return a;
  return b->length < a->length ? b : a;
}

Span* PageHeap::AnyFreeNeighbor(PageId p) {
  Span* s = FreeNeighbor(p, Span::kNormal);
  return s != nullptr ? s : FreeNeighbor(p, Span::kReturned);
}

// Releasing whole huge pages out of a free run (the surplus rule, the scavenger) leaves the
// run's partial huge pages at its ends backed, beside the released stretch, and runs of the
// two kinds never merge. A request longer than either piece then grew the heap although the
// pages were free: a program that allocates, touches and frees one 48 MiB + 4 KiB block
// mapped 52 MiB more nine times in its first 300 rounds and took 248 faults a round against
// 123 for 48 MiB exactly (bench/README, "Forty-second session"). Here the released runs
// inside the pages the request takes become backed free runs (they are about to be
// touched: counted as reused, like a released run carved, for the hugepage tracker and the
// surplus rule's cycle detection) and merge with their backed neighbours into one run, which
// the caller carves. Only for requests the best-fit tree serves, walking the tree's runs
// (the heap is about to grow, a system call at least). Under a heap limit only when the
// released pages it maps again fit within the limit as they are.
Span* PageHeap::JoinAcrossKinds(Length n, bool huge_aligned) {
  if (n.n < kMaxPages) return nullptr;
  uintptr_t best_pages = UINTPTR_MAX;
  PageId lo_best{0}, take{0};
  auto consider = [&](Span* s) {
    PageId lo = s->start, hi = s->end();
    for (Span* p; lo.index > 0 && (p = AnyFreeNeighbor(lo - Length{1})) != nullptr && p->end() == lo;) lo = p->start;
    for (Span* q; (q = AnyFreeNeighbor(hi)) != nullptr && q->start == hi;) hi = q->end();
    if (lo == s->start && hi == s->end()) return;  // one run alone: the searches saw it
    const uintptr_t from = huge_aligned ? HugeRoundUp(lo.index) : lo.index;
    if (from + n.n > hi.index || hi.index - lo.index >= best_pages) return;
    best_pages = hi.index - lo.index;  // the shortest stretch that fits, like a best fit
    lo_best = lo;
    take = PageId{from};
  };
  large_normal_.ForEach(consider);
  large_returned_.ForEach(consider);
  if (best_pages == UINTPTR_MAX) return nullptr;
  const PageId end = take + n;
  if (limit_ != 0) {
    // The released pages taken are mapped again: within the limit, or not at all (making
    // room would release and merge runs under the stretch; the heap's growth then asks).
    size_t released = 0;
    for (PageId p = lo_best; p < end;) {
      Span* s = AnyFreeNeighbor(p);
      if (s == nullptr || s->start != p) return nullptr;
      if (s->location == Span::kReturned) {
        const uintptr_t from = s->start.index > take.index ? s->start.index : take.index;
        const uintptr_t to = s->end().index < end.index ? s->end().index : end.index;
        if (to > from) released += (to - from) << kPageShift;
      }
      p = s->end();
    }
    if (stats_.system_bytes - stats_.unmapped_bytes + released > limit_) return nullptr;
  }
  // Walked run by run from the stretch's start: the pagemap knows the first and last page
  // of a free run, not the pages inside it.
  for (PageId p = lo_best; p < end;) {
    Span* s = AnyFreeNeighbor(p);
    if (s == nullptr || s->start != p) return nullptr;  // not reached: the stretch is free
    if (s->location == Span::kReturned) {
      // A released run across either end is cut there: the pages outside stay released.
      const PageId cut = p < take ? take : end;
      if (s->end() > cut) {
        if (!SplitHead(s, Length{cut.index - p.index})) {
          // Out of span records: rejoin a piece an earlier cut left beside it, and grow.
          RemoveFree(s);
          MergeIntoFreeList(s);
          return nullptr;
        }
        s = AnyFreeNeighbor(p);  // the head, up to the cut
      }
      if (p >= take) {
        RemoveFree(s);
        TrackReleased(s->start, s->length, -1);
        surplus_reused_ += s->length.bytes();
        new_memory_unseen_ = true;  // the heap grows resident, as from a released run carved
        s->location = Span::kNormal;
        MergeIntoFreeList(s);  // s absorbs its backed neighbours
      }
    }
    p = s->end();
  }
  for (PageId p = lo_best;;) {
    Span* s = AnyFreeNeighbor(p);
    if (s == nullptr || s->start != p) return nullptr;
    if (s->end() > take) return s->location == Span::kNormal && !(s->end() < end) ? s : nullptr;
    p = s->end();
  }
}

// A piece split off a free run is free the same way: where it is (backed or released),
// untouched or not, since when, and from which free.
void PageHeap::InheritFreeState(Span* piece, const Span* whole) {
  piece->location = whole->location;
  piece->fresh = whole->fresh;
  piece->free_since = whole->free_since;
  piece->free_seq = whole->free_seq;
}

bool PageHeap::SplitHead(Span* span, Length head) {
  Span* h = NewSpan(span->start, head);
  if (h == nullptr) return false;
  RemoveFree(span);
  InheritFreeState(h, span);
  span->start = span->start + head;
  span->length = span->length - head;
  RecordSpan(h);
  RecordSpan(span);
  InsertFree(h);
  InsertFree(span);
  return true;
}

Span* PageHeap::NewHugeAligned(Length n) {
  Span* s = FindHugeAlignedFit(n);
  if (s != nullptr && s->location == Span::kReturned && limit_ != 0) {
    if (!MakeRoom(n)) return nullptr;
    s = FindHugeAlignedFit(n);
  }
  if (s == nullptr) s = JoinAcrossKinds(n, /*huge_aligned=*/true);
  // The grown memory is aligned whole huge pages: its run surely has an aligned fit.
  if (s == nullptr && (s = GrowHeap(n)) == nullptr) return nullptr;
  const Length head{HugeRoundUp(s->start.index) - s->start.index};
  if (head.n + n.n > s->length.n) {
    // Growth near the heap limit (or a source) gave memory off the huge page grid: the run
    // still fits the request, unaligned.
    return s->length < n ? nullptr : Carve(s, n);
  }
  if (head.n > 0 && !SplitHead(s, head)) return nullptr;
  return Carve(s, n);
}

Span* PageHeap::NewAligned(Length n, Length align) {
  if (align.n <= 1) return New(n);
  // Over-allocate, then give back the misaligned head and the unused tail.
  Length want = n + align - Length{1};
  if (want.n < n.n) return nullptr;
  Span* s = New(want);
  if (s == nullptr) return nullptr;
  uintptr_t aligned = (s->start.index + align.n - 1) & ~(align.n - 1);
  Length head{aligned - s->start.index};
  if (head.n > 0) {
    Span* rest = NewSpan(PageId{aligned}, s->length - head);
    if (rest == nullptr) {
      Delete(s);
      return nullptr;
    }
    rest->fresh = s->fresh;
    s->length = head;
    RecordSpan(s);
    RecordSpan(rest);
    FreePiece(s);  // the head goes back; `rest` takes its place as the span handed out
    s = rest;
  }
  if (s->length > n) {
    Span* tail = NewSpan(s->start + n, s->length - n);
    if (tail == nullptr) {
      Delete(s);
      return nullptr;
    }
    tail->fresh = s->fresh;
    s->length = n;
    RecordSpan(s);
    RecordSpan(tail);
    FreePiece(tail);
  }
  return s;
}

Span* PageHeap::Carve(Span* span, Length n) {
  RemoveFree(span);
  if (span->length > n) {
    Span* rest = NewSpan(span->start + n, span->length - n);
    if (rest == nullptr) {
      InsertFree(span);
      return nullptr;
    }
    InheritFreeState(rest, span);
    span->length = n;
    RecordSpan(rest);
    InsertFree(rest);
  }
  if (span->location == Span::kReturned) {
    TrackReleased(span->start, n, -1);
    surplus_reused_ += n.bytes();
  }
  if (span->location == Span::kReturned || span->fresh) new_memory_unseen_ = true;
  TrackUsed(span->start, n, +1);
  span->location = Span::kInUse;
  span->sizeclass = 0;
  RecordSpan(span);
  ++stats_.in_use_spans;
  return span;
}

Span* PageHeap::GrowHeap(Length n) {
  size_t bytes = n.bytes() < kMinSystemAlloc ? kMinSystemAlloc : n.bytes();
  // Hugepage-aware: whole huge pages, aligned, so every huge page is the heap's alone.
  size_t align = huge_aware_ ? kHugePageSize : kPageSize;
  size_t needed = bytes;  // what to fall back to if the geometric size is refused
  if (huge_aware_) {
    // Geometric growth (an eighth of the heap, at most kMaxGrowthBytes): few, large
    // mappings, so the units advised late are collapsed in a few calls (each MADV_COLLAPSE
    // call costs a drain of every CPU's page lists). Untouched, the slack costs no memory.
    needed = bytes = (bytes + kHugePageSize - 1) & ~(kHugePageSize - 1);
    size_t geometric = stats_.system_bytes / 8;
    if (geometric > kMaxGrowthBytes) geometric = kMaxGrowthBytes;
    if (bytes < geometric) bytes = (geometric + kHugePageSize - 1) & ~(kHugePageSize - 1);
  }
  if (limit_ != 0) {
    size_t mapped = stats_.system_bytes - stats_.unmapped_bytes;
    if (mapped + bytes > limit_) {
      bytes = needed = n.bytes();  // near the limit: no slack chunk, no rounding to huge pages
      align = kPageSize;
    }
    if (mapped + bytes > limit_) {
      // Give back free runs first; growing into released address space is still growth.
      ReleaseAtLeastNPages(Length::FromBytesRoundUp(mapped + bytes - limit_));
      mapped = stats_.system_bytes - stats_.unmapped_bytes;
      if (mapped + bytes > limit_) return nullptr;
    }
  }
  size_t actual = 0;
  bool zeroed = false;
  SystemAllocator::Source from = SystemAllocator::kMmap;
  void* p = system_->Alloc(bytes, align, &actual, &zeroed, &from);
  if (p == nullptr && needed < bytes) p = system_->Alloc(needed, align, &actual, &zeroed, &from);
  if (p == nullptr) return nullptr;
  PageId start = PageId::FromPtr(p);
  Length len{actual >> kPageShift};
  if (!pagemap_->Ensure(start - Length{1}, len + Length{2})) {
    // Without pagemap nodes the memory is unusable; leave it unused rather than corrupt.
    return nullptr;
  }
  if (huge_aware_) {
    // Untracked memory would skew the counts: leave it unused.
    if (!huge_.AddMemory(start, len, from == SystemAllocator::kMmap)) return nullptr;
    if (from == SystemAllocator::kMmap) AdviseGrowth(start, len);
  }
  Span* s = NewSpan(start, len);
  if (s == nullptr) return nullptr;
  stats_.system_bytes += actual;
  if (auto* rec = static_cast<GrowthRecord*>(arena_->Alloc(sizeof(GrowthRecord)))) {
    rec->bytes = actual;
    const bool stack = growth_stacks_ == nullptr || growth_stacks_();
    rec->depth = stack ? os::GetStackTrace(rec->pcs, os::kMaxStackDepth, 1) : 0;
    rec->next = growth_;
    growth_ = rec;
    ++growth_count_;
  }
  s->fresh = zeroed;
  s->location = Span::kNormal;
  s->free_since = Now();
  s->free_seq = 0;
  MergeIntoFreeList(s);
  return s;  // merging keeps s: it is the whole run now
}

void PageHeap::AdviseGrowth(PageId start, Length len) {
  if (!system_->thp_available()) return;
  // stats_.system_bytes does not count this unit yet.
  const bool crossing = stats_.system_bytes <= kAdviseAfterBytes;
  if (stats_.system_bytes + len.bytes() <= kAdviseAfterBytes) return;  // small heap: small pages
  const size_t past = stats_.system_bytes + len.bytes() - kAdviseAfterBytes;
  collapse_credit_ += (past < len.bytes() ? past : len.bytes()) / kCollapseGrowthDivisor;
  auto advise = [this](PageId s, Length l, bool collapse) {
    if (!system_->AdviseHugePages(s.ptr(), l.bytes(), SystemAllocator::kMmap)) return;
    for (uintptr_t hp = HugePageOf(s); hp <= HugePageOf(s + l - Length{1}); ++hp) {
      HugePageInfo* h = huge_.FindMutable(HugePageStart(hp));
      h->advised = true;
      if (collapse && !h->collapse) {
        h->collapse = true;
        ++collapse_pending_;
      }
    }
  };
  if (crossing) {
    // The heap is big now: its earlier units get the advice too, and what of them is
    // already resident is collapsed by the scavenger (khugepaged would, but slowly).
    uintptr_t run = 0, run_len = 0;
    huge_.ForEach([&](uintptr_t hp, const HugePageInfo& h) {
      if (h.advised || !h.anonymous || (hp >= HugePageOf(start) && hp <= HugePageOf(start + len - Length{1})))
        return;
      if (run_len != 0 && run + run_len == hp) {
        ++run_len;
        return;
      }
      if (run_len != 0) advise(HugePageStart(run), Length{run_len * kPagesPerHugePage}, true);
      run = hp;
      run_len = 1;
    });
    if (run_len != 0) advise(HugePageStart(run), Length{run_len * kPagesPerHugePage}, true);
  }
  advise(start, len, false);
}

void PageHeap::KeepBrokenHugePagesSmall(PageId start, Length len) {
  if (len.n == 0) return;
  // Only the two end huge pages of a run can be partly released by it; the ones between
  // are whole (released whole or reused whole): look at each, the ends decide.
  for (uintptr_t hp = HugePageOf(start); hp <= HugePageOf(start + len - Length{1}); ++hp) {
    HugePageInfo* h = huge_.FindMutable(HugePageStart(hp));
    if (h == nullptr || !h->advised) continue;
    const bool broken = h->released != 0 && h->released != kPagesPerHugePage;
    if (broken == h->no_huge) continue;
    void* p = HugePageStart(hp).ptr();
    if (broken ? system_->AdviseNoHugePages(p, kHugePageSize)
               : system_->AdviseHugePages(p, kHugePageSize, SystemAllocator::kMmap))
      h->no_huge = broken;
  }
}

size_t PageHeap::TakeCollapseCandidates(HugeRange* out, size_t max, bool paid_by_growth) {
  if (collapse_pending_ == 0) return 0;
  size_t n = 0;
  bool out_of_credit = false;
  huge_.ForEach([&](uintptr_t hp, HugePageInfo& h) {
    if (!h.collapse || n == max || out_of_credit) return;
    // Free pages get backed by a collapse: only huge pages mostly in use, and none with
    // released pages (that would take back what was given to the OS).
    if (h.released != 0 || h.used < kPagesPerHugePage / 2) return;
    if (paid_by_growth) {
      if (collapse_credit_ < kHugePageSize) {
        out_of_credit = true;
        return;
      }
      collapse_credit_ -= kHugePageSize;
    }
    h.collapse = false;
    --collapse_pending_;
    char* p = static_cast<char*>(HugePageStart(hp).ptr());
    if (n > 0 && static_cast<char*>(out[n - 1].start) + out[n - 1].bytes == p) {
      out[n - 1].bytes += kHugePageSize;
    } else {
      out[n++] = {p, kHugePageSize};
    }
  });
  // The rest (sparse or partly released huge pages) keeps the advice only; unless the
  // credit ran out first, when the candidates not looked at wait for the next pass.
  if (n < max && !out_of_credit) {
    huge_.ForEach([&](uintptr_t, HugePageInfo& h) { h.collapse = false; });
    collapse_pending_ = 0;
  }
  return n;
}

size_t PageHeap::Collapse(const HugeRange* ranges, size_t n) {
  size_t bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    if (system_->CollapseHugePages(ranges[i].start, ranges[i].bytes)) {
      bytes += ranges[i].bytes;
      continue;
    }
    // The kernel gives up on a range at a huge page it cannot collapse (EINVAL for one no
    // page of which was ever touched: blocks handed out and not yet written), leaving the
    // rest of the range on small pages. One huge page at a time, the others still collapse.
    if (ranges[i].bytes <= kHugePageSize) continue;
    char* p = static_cast<char*>(ranges[i].start);
    for (size_t off = 0; off < ranges[i].bytes; off += kHugePageSize)
      if (system_->CollapseHugePages(p + off, kHugePageSize)) bytes += kHugePageSize;
  }
  return bytes;
}

bool PageHeap::ExtendInPlace(Span* span, Length new_len) {
  const Length extra = new_len - span->length;
  Span* next = pagemap_->GetSpan(span->end());
  if (next == nullptr || next->start != span->end() ||
      (next->location != Span::kNormal && next->location != Span::kReturned) || next->length < extra)
    return false;
  if (next->location == Span::kReturned && limit_ != 0 && !MakeRoom(extra)) return false;
  // MakeRoom may have merged `next` into a bigger run: look it up again.
  next = pagemap_->GetSpan(span->end());
  if (next == nullptr || next->start != span->end() || next->length < extra ||
      (next->location != Span::kNormal && next->location != Span::kReturned))
    return false;
  RemoveFree(next);
  if (next->length > extra) {
    Span* rest = NewSpan(next->start + extra, next->length - extra);
    if (rest == nullptr) {
      InsertFree(next);
      return false;
    }
    InheritFreeState(rest, next);
    RecordSpan(rest);
    InsertFree(rest);
  }
  if (next->location == Span::kReturned) TrackReleased(next->start, extra, -1);
  TrackUsed(next->start, extra, +1);
  DeleteSpan(next);
  span->length = new_len;
  span->fresh = false;
  RecordSpan(span);
  return true;
}

void PageHeap::ShrinkInPlace(Span* span, Length new_len) {
  Span* tail = NewSpan(span->start + new_len, span->length - new_len);
  if (tail == nullptr) return;  // keep the pages: correct, just not returned
  span->length = new_len;
  RecordSpan(span);
  RecordSpan(tail);
  FreePiece(tail);
  if (surplus_release_) MaybeReleaseSurplus();
}

void PageHeap::RegisterSizeClass(Span* span, uint8_t cl) {
  span->sizeclass = cl;
  for (Length i{0}; i < span->length; i = i + Length{1}) {
    pagemap_->Set(span->start + i, span);
    pagemap_->SetClass(span->start + i, cl, span->start);
  }
}

Span* PageHeap::FreeNeighbor(PageId p, Span::Location kind) {
  Span* n = pagemap_->GetSpan(p);
  if (n == nullptr || n->location != kind) return nullptr;
  // Entries on interior pages can be stale; a real neighbour covers p.
  if (p < n->start || !(p < n->end())) return nullptr;
  return n;
}

// The idle stamp of two merged runs: their stamps averaged by length. Taking the newer one
// would let a page freed next to a long-idle run of thousands restart the whole run's idle
// clock (a stream of small frees could then keep it from ever being released); taking the
// older one would release big fresh runs that merely touch an old page. Averaged, a run
// counts as idle once most of its pages are. Pages never handed out (`fresh`: as the system
// gave them, untouched) hold no memory and have no age that means anything: a freed run
// merged with them keeps its own stamp. Averaged with them, a 4 MiB block freed and
// reallocated every 0.2 ms next to the untouched rest of the heap's first 16 MiB looked
// idle a few seconds after start-up and was released and faulted back in (1024 faults).
uint64_t PageHeap::MergedFreeSince(const Span* a, const Span* b) {
  if (a->fresh != b->fresh) return a->fresh ? b->free_since : a->free_since;
  const unsigned __int128 sum = static_cast<unsigned __int128>(a->free_since) * a->length.n +
                                static_cast<unsigned __int128>(b->free_since) * b->length.n;
  return static_cast<uint64_t>(sum / (a->length.n + b->length.n));
}

void PageHeap::MergeIntoFreeList(Span* s) {
  const Span::Location kind = s->location;
  if (Span* prev = FreeNeighbor(s->start - Length{1}, kind); prev != nullptr && prev->end() == s->start) {
    RemoveFree(prev);
    s->free_since = MergedFreeSince(s, prev);
    if (prev->free_seq < s->free_seq) s->free_seq = prev->free_seq;
    s->start = prev->start;
    s->length = s->length + prev->length;
    s->fresh = s->fresh && prev->fresh;
    DeleteSpan(prev);
  }
  if (Span* next = FreeNeighbor(s->end(), kind); next != nullptr && next->start == s->end()) {
    RemoveFree(next);
    s->free_since = MergedFreeSince(s, next);
    if (next->free_seq < s->free_seq) s->free_seq = next->free_seq;
    s->length = s->length + next->length;
    s->fresh = s->fresh && next->fresh;
    DeleteSpan(next);
  }
  RecordSpan(s);
  InsertFree(s);
}

void PageHeap::Delete(Span* span) {
  TCM_CHECK(span->location == Span::kInUse);
  if (span->sizeclass != 0) {
    for (Length i{0}; i < span->length; i = i + Length{1}) pagemap_->SetClass(span->start + i, 0, span->start);
    span->sizeclass = 0;
  }
  --stats_.in_use_spans;
  span->objects = nullptr;
  span->refcount = 0;
  FreePiece(span);
  if (surplus_release_) MaybeReleaseSurplus();
}

size_t PageHeap::SubreleaseFloor() const {
  const size_t used = stats_.system_bytes - stats_.free_bytes - stats_.unmapped_bytes;
  return kSubreleaseFloor + used / 16;
}

size_t PageHeap::SurplusReserve() const {
  const size_t used = stats_.system_bytes - stats_.free_bytes - stats_.unmapped_bytes;
  return kSurplusReserve + used / 2;
}

uint64_t PageHeap::SurplusCycleWindow(size_t surplus_bytes) {
  const uint64_t scaled = static_cast<uint64_t>(surplus_bytes >> 20) * kSurplusCyclePerMiB;
  return scaled > kSurplusCycle ? scaled : kSurplusCycle;
}

void PageHeap::MaybeReleaseSurplus() {
  // Two compares per free while the heap is balanced. Past twice the reserve, release down
  // to the reserve: each release gives back at least kSurplusReserve bytes, so a long run
  // of frees (a thread exiting, a container emptied) makes few, large madvise calls.
  const size_t reserve = SurplusReserve();
  if (stats_.free_bytes <= 2 * reserve) {
    surplus_retry_at_ = 0;
    return;
  }
  if (stats_.free_bytes <= surplus_retry_at_) return;
  // Cycling: the pages released last time came back within kSurplusCycle (or the rule is
  // holding back and the triggers keep coming that fast). Released the first time (one
  // quick return is two phases of a program, not a cycle), held back from the second on,
  // until free memory drops under the trigger again (the program builds up once more).
  const uint64_t now = Now();
  const bool holding_back = surplus_quick_ >= 2;
  const bool quick = surplus_fired_ && now - surplus_last_ < surplus_window_ &&
                     (holding_back || surplus_reused_ >= kSurplusReserve);
  surplus_quick_ = quick ? (surplus_quick_ < 2 ? surplus_quick_ + 1 : 2) : 0;
  surplus_fired_ = true;
  surplus_last_ = now;
  surplus_window_ = SurplusCycleWindow(stats_.free_bytes - reserve);
  if (surplus_quick_ >= 2) {
    surplus_retry_at_ = SIZE_MAX;
    ++stats_.surplus_skips;
    return;
  }
  surplus_reused_ = 0;
  ++stats_.surplus_releases;
  surplus_unseen_ = true;
  ReleaseAtLeastNPages(Length::FromBytesRoundUp(stats_.free_bytes - reserve), !huge_aware_);
  if (!huge_aware_) return;
  // Hugepage-aware: whole huge pages first, and that is enough if it brings the free memory
  // under the trigger. Still far more free than in use (a thread's cache came back while
  // the transfer caches pin a few spans in every huge page): break huge pages too.
  if (stats_.free_bytes > 2 * reserve)
    ReleaseAtLeastNPages(Length::FromBytesRoundUp(stats_.free_bytes - reserve), true);
  // The OS refused: try again only after another kSurplusReserve was freed, so frees do
  // not each walk the free runs in vain.
  if (stats_.free_bytes > 2 * reserve) surplus_retry_at_ = stats_.free_bytes + kSurplusReserve;
}

void PageHeap::FreePiece(Span* span) {
  TrackUsed(span->start, span->length, -1);
  span->fresh = false;
  span->location = Span::kNormal;
  span->free_since = Now();
  span->free_seq = ++frees_;
  MergeIntoFreeList(span);
  // Merging keeps `span` (it absorbs its neighbours), so it is the whole free run now.
  if (aggressive_decommit_) ReleaseSpan(span);
}

Length PageHeap::ReleaseSpan(Span* s) {
  RemoveFree(s);
  ++stats_.release_calls;
  bool zeroed = false;
  if (!system_->Release(s->start_ptr(), s->length.bytes(), &zeroed)) {
    InsertFree(s);  // the OS refused; keep it as normal memory
    return Length{0};
  }
  Length len = s->length;
  stats_.released_bytes_total += len.bytes();
  if (huge_aware_) {
    TrackReleased(s->start, len, +1);
    // Pages outside whole huge pages were broken out of partly used ones.
    const uintptr_t a = HugeRoundUp(s->start.index), b = HugeRoundDown(s->end().index);
    const uintptr_t whole = b > a ? b - a : 0;
    stats_.hugepages_released += whole / kPagesPerHugePage;
    stats_.subreleased_bytes_total += (len.n - whole) << kPageShift;
  }
  s->location = Span::kReturned;
  s->fresh = zeroed;
  MergeIntoFreeList(s);
  return len;
}

Length PageHeap::ReleaseWholeHugePages(Span* s, bool* refused) {
  const uintptr_t a = HugeRoundUp(s->start.index), b = HugeRoundDown(s->end().index);
  if (b <= a) return Length{0};
  // Cut the run to its whole huge pages; the partial ends stay backed, as kNormal runs.
  if (a > s->start.index && !SplitHead(s, Length{a - s->start.index})) return Length{0};
  if (b < s->end().index) {
    Span* tail = NewSpan(PageId{b}, Length{s->end().index - b});
    if (tail == nullptr) {
      RemoveFree(s);
      MergeIntoFreeList(s);
      return Length{0};
    }
    RemoveFree(s);
    InheritFreeState(tail, s);  // s is a kNormal run
    s->length = Length{b - s->start.index};
    RecordSpan(s);
    RecordSpan(tail);
    InsertFree(tail);
    InsertFree(s);
  }
  const Length got = ReleaseSpan(s);
  if (got.n == 0) {
    *refused = true;
    RemoveFree(s);  // the OS refused: join the pieces again
    MergeIntoFreeList(s);
  }
  return got;
}

// Walks free spans with walk(visit), collecting those pick(s) accepts, 64 at a time, and
// hands each to release(s), which returns false to stop. Collected first, released after:
// releasing merges runs, which would disturb the walk. Victims are kNormal spans, and
// merging only ever deletes kReturned neighbours (or pieces just split off the victim
// itself), so the collected pointers stay valid while they are released in turn. Returns
// false when release stopped it.
template <typename Walk, typename Pick, typename Release>
static bool ReleaseInBatches(Walk walk, Pick pick, Release release) {
  for (;;) {
    Span* victims[64];
    size_t n = 0;
    walk([&](Span* s) {
      if (n < 64 && pick(s)) victims[n++] = s;
    });
    for (size_t i = 0; i < n; ++i)
      if (!release(victims[i])) return false;
    if (n < 64) return true;
  }
}

Length PageHeap::ReleaseIdle(uint64_t idle_since) {
  Length released{0};
  auto all_free = [this](auto visit) { ForEachFreeSpan(visit); };
  // Untouched runs (`fresh`: as the system gave them) hold no memory to give back, and
  // releasing one inside the huge page being filled broke that huge page: the heap's
  // fresh tail idle past the idle time while a 256 MiB heap was still being built, 16 MiB
  // released and split, coverage 87-91% instead of 99% in about one run of five.
  auto idle = [idle_since](const Span* s) {
    return s->location == Span::kNormal && !s->fresh && s->free_since < idle_since;
  };
  // The OS refusing stops a pass: try again at a later tick.
  auto release = [&](Span* s) {
    const Length got = ReleaseSpan(s);
    released = released + got;
    return got.n != 0;
  };
  if (!huge_aware_) {
    ReleaseInBatches(all_free, idle, release);
    return released;
  }
  // Whole idle huge pages first; each victim is cut to its whole huge pages, and the
  // pieces left hold none, so the walk ends.
  const bool done = ReleaseInBatches(
      all_free, [&](const Span* s) { return idle(s) && HasWholeHugePage(s); },
      [&](Span* s) {
        bool refused = false;
        released = released + ReleaseWholeHugePages(s, &refused);
        return !refused;
      });
  if (!done) return released;
  // Breaking huge pages: only while the free memory is large, and the sparsest huge pages
  // first (most memory back per huge page broken).
  for (uintptr_t max_used : {kPagesPerHugePage / 8, kPagesPerHugePage / 2, kPagesPerHugePage}) {
    const bool more = ReleaseInBatches(
        all_free,
        [&](const Span* s) {
          if (!idle(s)) return false;
          const HugePageInfo* h = huge_.Find(s->start);
          return h == nullptr || h->used <= max_used;
        },
        [&](Span* s) { return stats_.free_bytes > SubreleaseFloor() && release(s); });
    if (!more) break;
  }
  return released;
}

Length PageHeap::ReleaseAtLeastNPages(Length n, bool allow_subrelease, const PassStart* pass) {
  Length released{0};
  // For a pass, untouched runs are not what it is after either: they hold no memory.
  auto old_enough = [pass](const Span* s) {
    return pass == nullptr ||
           (!s->fresh && (s->free_seq > pass->frees || s->free_since + pass->min_age < pass->time));
  };
  if (huge_aware_) {
    // Whole free huge pages first: runs holding one are >= 256 pages, so in the tree.
    ReleaseInBatches(
        [this](auto visit) { large_normal_.ForEach(visit); },
        [&](const Span* s) { return old_enough(s) && HasWholeHugePage(s); },
        [&](Span* s) {
          if (released >= n) return false;
          bool refused = false;
          released = released + ReleaseWholeHugePages(s, &refused);
          return !refused;
        });
    if (released >= n || !allow_subrelease) return released;
  }
  auto release = [&](Span* s) {
    Length got = ReleaseSpan(s);
    released = released + got;
    return got.n != 0;
  };
  if (pass == nullptr) {
    while (released < n && !large_normal_.empty()) {
      if (!release(large_normal_.Largest())) return released;
    }
  } else {
    const bool done = ReleaseInBatches([this](auto visit) { large_normal_.ForEach(visit); }, old_enough,
                                       [&](Span* s) { return released < n && release(s); });
    if (!done) return released;
  }
  for (size_t len = kMaxPages - 1; len >= 1 && released < n; --len) {
    for (Span* s = normal_[len].first(); s != nullptr && released < n;) {
      // Read first: release takes s off this list (and merges it only with released runs,
      // so next, a kNormal run, stays).
      Span* const next = normal_[len].NextOf(s);
      if (old_enough(s) && !release(s)) return released;
      s = next;
    }
  }
  return released;
}

void PageHeap::Verify() {
  size_t free_bytes = 0, unmapped = 0;
  ForEachFreeSpan([&](Span* s) {
    TCM_CHECK(s->location == Span::kNormal || s->location == Span::kReturned);
    TCM_CHECK(pagemap_->GetSpan(s->start) == s);
    TCM_CHECK(pagemap_->GetSpan(s->last()) == s);
    for (Length i{0}; i < s->length; i = i + Length{1})
      TCM_CHECK(pagemap_->ClassOf((s->start + i).addr()) == 0);
    // Neighbours of the same kind would have been merged.
    Span* prev = pagemap_->GetSpan(s->start - Length{1});
    TCM_CHECK(prev == nullptr || prev->location != s->location || prev->end() != s->start);
    (s->location == Span::kNormal ? free_bytes : unmapped) += s->length.bytes();
  });
  TCM_CHECK(free_bytes == stats_.free_bytes);
  TCM_CHECK(unmapped == stats_.unmapped_bytes);
  for (size_t len = 1; len < kMaxPages; ++len) {
    const uint64_t bit = uint64_t{1} << (len % 64);
    TCM_CHECK(((normal_lengths_[len / 64] & bit) != 0) == !normal_[len].empty());
    TCM_CHECK(((returned_lengths_[len / 64] & bit) != 0) == !returned_[len].empty());
  }
  if (huge_aware_) {
    // Every page of a tracked huge page is in use, free or released; their sums match.
    size_t used_pages = 0, released_pages = 0;
    huge_.ForEach([&](uintptr_t, const HugePageInfo& h) {
      TCM_CHECK(h.used + h.released <= kPagesPerHugePage);
      used_pages += h.used;
      released_pages += h.released;
    });
    TCM_CHECK(released_pages << kPageShift == stats_.unmapped_bytes);
    TCM_CHECK(used_pages << kPageShift == stats_.system_bytes - stats_.free_bytes - stats_.unmapped_bytes);
  }
}

}  // namespace tcm
