#include "core/page_heap.h"

#include "base/log.h"

namespace tcm {

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
  } else {
    (returned ? large_returned_ : large_normal_).Insert(s);
  }
  (returned ? stats_.unmapped_bytes : stats_.free_bytes) += s->length.bytes();
}

void PageHeap::RemoveFree(Span* s) {
  bool returned = s->location == Span::kReturned;
  if (s->length.n < kMaxPages) {
    SpanList::Remove(s);
  } else {
    (returned ? large_returned_ : large_normal_).Remove(s);
  }
  (returned ? stats_.unmapped_bytes : stats_.free_bytes) -= s->length.bytes();
}

Span* PageHeap::SearchFreeAndLarge(Length n) {
  for (size_t len = n.n; len < kMaxPages; ++len) {
    if (Span* s = normal_[len].first()) return s;
    if (Span* s = returned_[len].first()) return s;
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
  Span* s = SearchFreeAndLarge(n);
  if (s != nullptr && s->location == Span::kReturned && limit_ != 0) {
    // Reusing released pages commits memory again: it counts against the limit. Making
    // room releases (and merges) other runs, so search again afterwards.
    if (!MakeRoom(n)) return nullptr;
    s = SearchFreeAndLarge(n);
  }
  if (s == nullptr) {
    if (!GrowHeap(n)) return nullptr;
    s = SearchFreeAndLarge(n);
    if (s == nullptr) return nullptr;
  }
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
    rest->location = span->location;
    rest->fresh = span->fresh;
    rest->free_since = span->free_since;
    span->length = n;
    RecordSpan(rest);
    InsertFree(rest);
  }
  span->location = Span::kInUse;
  span->sizeclass = 0;
  RecordSpan(span);
  ++stats_.in_use_spans;
  return span;
}

bool PageHeap::GrowHeap(Length n) {
  size_t bytes = n.bytes() < kMinSystemAlloc ? kMinSystemAlloc : n.bytes();
  if (limit_ != 0) {
    size_t mapped = stats_.system_bytes - stats_.unmapped_bytes;
    if (mapped + bytes > limit_) bytes = n.bytes();  // near the limit: no slack chunk
    if (mapped + bytes > limit_) {
      // Give back free runs first; growing into released address space is still growth.
      ReleaseAtLeastNPages(Length::FromBytesRoundUp(mapped + bytes - limit_));
      mapped = stats_.system_bytes - stats_.unmapped_bytes;
      if (mapped + bytes > limit_) return false;
    }
  }
  size_t actual = 0;
  bool zeroed = false;
  void* p = system_->Alloc(bytes, kPageSize, &actual, &zeroed);
  if (p == nullptr) return false;
  PageId start = PageId::FromPtr(p);
  Length len{actual >> kPageShift};
  if (!pagemap_->Ensure(start - Length{1}, len + Length{2})) {
    // Without pagemap nodes the memory is unusable; leave it unused rather than corrupt.
    return false;
  }
  Span* s = NewSpan(start, len);
  if (s == nullptr) return false;
  stats_.system_bytes += actual;
  if (auto* rec = static_cast<GrowthRecord*>(arena_->Alloc(sizeof(GrowthRecord)))) {
    rec->bytes = actual;
    rec->depth = os::GetStackTrace(rec->pcs, os::kMaxStackDepth, 1);
    rec->next = growth_;
    growth_ = rec;
    ++growth_count_;
  }
  s->fresh = zeroed;
  s->location = Span::kNormal;
  s->free_since = Now();
  MergeIntoFreeList(s);
  return true;
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
    rest->location = next->location;
    rest->fresh = next->fresh;
    rest->free_since = next->free_since;
    RecordSpan(rest);
    InsertFree(rest);
  }
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
    pagemap_->SetClass(span->start + i, cl);
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
// counts as idle once most of its pages are.
uint64_t PageHeap::MergedFreeSince(const Span* a, const Span* b) {
  const unsigned __int128 sum = static_cast<unsigned __int128>(a->free_since) * a->length.n +
                                static_cast<unsigned __int128>(b->free_since) * b->length.n;
  return static_cast<uint64_t>(sum / (a->length.n + b->length.n));
}

void PageHeap::MergeIntoFreeList(Span* s) {
  const Span::Location kind = s->location;
  if (Span* prev = FreeNeighbor(s->start - Length{1}, kind); prev != nullptr && prev->end() == s->start) {
    RemoveFree(prev);
    s->free_since = MergedFreeSince(s, prev);
    s->start = prev->start;
    s->length = s->length + prev->length;
    s->fresh = s->fresh && prev->fresh;
    DeleteSpan(prev);
  }
  if (Span* next = FreeNeighbor(s->end(), kind); next != nullptr && next->start == s->end()) {
    RemoveFree(next);
    s->free_since = MergedFreeSince(s, next);
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
    for (Length i{0}; i < span->length; i = i + Length{1}) pagemap_->SetClass(span->start + i, 0);
    span->sizeclass = 0;
  }
  --stats_.in_use_spans;
  span->objects = nullptr;
  span->refcount = 0;
  FreePiece(span);
  if (surplus_release_) MaybeReleaseSurplus();
}

size_t PageHeap::SurplusReserve() const {
  const size_t used = stats_.system_bytes - stats_.free_bytes - stats_.unmapped_bytes;
  return kSurplusReserve + used / 2;
}

void PageHeap::MaybeReleaseSurplus() {
  // Two compares per free while the heap is balanced. Past twice the reserve, release down
  // to the reserve: each release gives back at least kSurplusReserve bytes, so a long run
  // of frees (a thread exiting, a container emptied) makes few, large madvise calls.
  const size_t reserve = SurplusReserve();
  if (stats_.free_bytes <= 2 * reserve) return;
  ++stats_.surplus_releases;
  ReleaseAtLeastNPages(Length::FromBytesRoundUp(stats_.free_bytes - reserve));
}

void PageHeap::FreePiece(Span* span) {
  span->fresh = false;
  span->location = Span::kNormal;
  span->free_since = Now();
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
  s->location = Span::kReturned;
  s->fresh = zeroed;
  MergeIntoFreeList(s);
  return len;
}

Length PageHeap::ReleaseIdle(uint64_t idle_since) {
  // Collect victims first, then release: releasing merges returned spans, which would
  // disturb the walk. Victims are kNormal spans, and merging only ever deletes kReturned
  // neighbours, so the collected pointers stay valid while we release them in turn.
  Length released{0};
  for (;;) {
    Span* victims[64];
    size_t n = 0;
    ForEachFreeSpan([&](Span* s) {
      if (n < 64 && s->location == Span::kNormal && s->free_since < idle_since) victims[n++] = s;
    });
    for (size_t i = 0; i < n; ++i) {
      Length got = ReleaseSpan(victims[i]);
      if (got.n == 0) return released;  // the OS refuses: try again at a later tick
      released = released + got;
    }
    if (n < 64) return released;
  }
}

Length PageHeap::ReleaseAtLeastNPages(Length n) {
  Length released{0};
  auto release = [&](Span* s) {
    Length got = ReleaseSpan(s);
    released = released + got;
    return got.n != 0;
  };
  while (released < n && !large_normal_.empty()) {
    if (!release(large_normal_.Largest())) return released;
  }
  for (size_t len = kMaxPages - 1; len >= 1 && released < n; --len) {
    while (released < n) {
      Span* s = normal_[len].first();
      if (s == nullptr) break;
      if (!release(s)) return released;
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
}

}  // namespace tcm
