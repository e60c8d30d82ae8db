#include "core/huge_page_tracker.h"

#include "base/log.h"

namespace tcm {

bool HugePageTracker::AddMemory(PageId start, Length len, bool anonymous) {
  if (len.n == 0) return true;
  const uintptr_t first = HugePageOf(start), last = HugePageOf(start + len - Length{1});
  // Leaves first, so a failure leaves no huge page half registered.
  for (uintptr_t r = first >> kLeafBits; r <= last >> kLeafBits; ++r) {
    if (root_[r] != nullptr) continue;
    void* leaf = arena_->Alloc(sizeof(HugePageInfo) * kLeafLength, 64);
    if (leaf == nullptr) return false;
    root_[r] = static_cast<HugePageInfo*>(leaf);  // arena memory is zero: no page owned
  }
  for (uintptr_t hp = first; hp <= last; ++hp) {
    HugePageInfo& h = root_[hp >> kLeafBits][hp & (kLeafLength - 1)];
    if (!h.owned) ++owned_;
    h.owned = true;
    h.anonymous = anonymous;
  }
  return true;
}

const HugePageInfo* HugePageTracker::Find(PageId p) const {
  const uintptr_t hp = HugePageOf(p);
  const HugePageInfo* leaf = root_[(hp >> kLeafBits) & ((size_t{1} << kRootBits) - 1)];
  if (leaf == nullptr) return nullptr;
  const HugePageInfo* h = &leaf[hp & (kLeafLength - 1)];
  return h->owned ? h : nullptr;
}

HugePageInfo* HugePageTracker::FindMutable(PageId p) { return const_cast<HugePageInfo*>(Find(p)); }

void HugePageTracker::Adjust(PageId start, Length len, int sign, bool released) {
  PageId p = start;
  const PageId end = start + len;
  while (p < end) {
    const PageId hp_end = HugePageStart(HugePageOf(p) + 1);
    const uintptr_t n = (hp_end < end ? hp_end : end).index - p.index;
    HugePageInfo* h = FindMutable(p);
    // Memory the heap obtained before tracking began (or a source smaller than a huge page
    // that straddles one the heap never owned): not counted.
    if (h != nullptr) {
      uint16_t& c = released ? h->released : h->used;
      const int v = static_cast<int>(c) + sign * static_cast<int>(n);
      TCM_CHECK(v >= 0 && v <= static_cast<int>(kPagesPerHugePage));
      c = static_cast<uint16_t>(v);
      TCM_CHECK(h->used + h->released <= kPagesPerHugePage);
    }
    p = PageId{p.index + n};
  }
}

HugePageStats HugePageTracker::Collect() {
  HugePageStats s;
  ForEach([&](uintptr_t, const HugePageInfo& h) {
    ++s.owned;
    if (h.advised) ++s.advised;
    const size_t free_bytes = size_t{h.free()} << kPageShift;
    if (h.released == 0) {
      if (h.used == kPagesPerHugePage) {
        ++s.full;
      } else if (h.used == 0) {
        ++s.empty;
      } else {
        ++s.partial;
        s.partial_free_bytes += free_bytes;
      }
      if (h.advised) s.intact_bytes += kHugePageSize;
    } else if (h.released == kPagesPerHugePage) {
      ++s.released;
    } else {
      ++s.partly_released;
      s.broken_free_bytes += free_bytes;
      s.broken_released_bytes += size_t{h.released} << kPageShift;
    }
  });
  return s;
}

}  // namespace tcm
