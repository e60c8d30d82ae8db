// HugePageTracker: what the page heap knows per 2 MiB huge page of its memory — how many of
// its 256 pages (8 KiB) are in use, how many are released to the OS, whether it was advised
// MADV_HUGEPAGE. The rest of a huge page's pages are free and backed.
//
// The hugepage-aware page heap (page_heap.h) reads it to place small spans in the fullest
// partly used huge page and to release whole empty huge pages before breaking partly used
// ones; the statistics (how many huge pages are full, partial, empty, partly released, and
// the bytes free in each kind) come from one walk over it.
//
// Storage: a two-level radix over the 48-bit address space (2^27 huge pages). The root is a
// constinit array of leaf pointers (untouched, it costs no memory); leaves come from the
// arena as the heap grows into a new 32 GiB region, and are never freed.
//
// Locking: REQUIRES the page heap lock for every call (it is a member of PageHeap).
#ifndef TCMALLOC_HUGE_PAGE_TRACKER_H_
#define TCMALLOC_HUGE_PAGE_TRACKER_H_

#include <cstddef>
#include <cstdint>

#include "base/config.h"
#include "core/arena.h"

namespace tcm {

inline constexpr int kHugePageShift = 21;
inline constexpr size_t kHugePageSize = size_t{1} << kHugePageShift;
inline constexpr size_t kPagesPerHugePage = kHugePageSize >> kPageShift;  // 256
static_assert(kPagesPerHugePage == 256 && kPagesPerHugePage < 65536);

// Index of a huge page: address >> kHugePageShift.
inline constexpr uintptr_t HugePageOf(PageId p) { return p.index >> (kHugePageShift - kPageShift); }
inline constexpr PageId HugePageStart(uintptr_t hp) { return PageId{hp << (kHugePageShift - kPageShift)}; }

struct HugePageInfo {
  uint16_t used = 0;      // pages in in-use spans
  uint16_t released = 0;  // pages in released (kReturned) free runs
  bool owned = false;     // part of the heap (memory the page heap obtained)
  bool advised = false;   // MADV_HUGEPAGE was applied to it
  bool anonymous = false; // anonymous mmap memory: advice applies
  bool collapse = false;  // advised after its first pages were faulted in: collapse it
  // Advised MADV_NOHUGEPAGE while partly released: khugepaged (max_ptes_none 511 by
  // default) would otherwise back the released pages again by collapsing it.
  bool no_huge = false;
  uint16_t free() const { return static_cast<uint16_t>(kPagesPerHugePage - used - released); }
};

// One walk's totals (HugePageTracker::Collect).
struct HugePageStats {
  size_t owned = 0;           // huge pages of heap memory
  size_t advised = 0;         // of which advised MADV_HUGEPAGE
  size_t full = 0;            // every page in use
  size_t partial = 0;         // some pages in use, some free, none released
  size_t empty = 0;           // no page in use, none released: a whole free, backed huge page
  size_t released = 0;        // every page released (a whole huge page given back)
  size_t partly_released = 0; // some pages released, some not: a broken huge page
  size_t partial_free_bytes = 0;   // free backed bytes inside partial huge pages (slack)
  size_t broken_free_bytes = 0;    // free backed bytes inside partly released huge pages
  size_t broken_released_bytes = 0;// released bytes inside partly released huge pages
  size_t intact_bytes = 0;    // bytes of advised huge pages with nothing released
};

class HugePageTracker {
 public:
  static constexpr int kLeafBits = 15;  // a leaf covers 2^15 huge pages = 64 GiB
  static constexpr int kRootBits = 48 - kHugePageShift - kLeafBits;
  static constexpr size_t kLeafLength = size_t{1} << kLeafBits;

  constexpr explicit HugePageTracker(Arena* arena) : arena_(arena) {}
  // Without an arena: set_arena before the first AddMemory (a zero-initialised global).
  constexpr HugePageTracker() = default;
  void set_arena(Arena* arena) { arena_ = arena; }

  // Marks the huge pages overlapping [start, start+len) as owned, with no page used or
  // released (the heap's fresh memory). False if a leaf could not be allocated.
  bool AddMemory(PageId start, Length len, bool anonymous);
  // Adds delta (+1 or -1 per page) to the used / released count of every huge page that
  // [start, start+len) overlaps, by the pages of the range inside it.
  void AddUsed(PageId start, Length len, int sign) { Adjust(start, len, sign, false); }
  void AddReleased(PageId start, Length len, int sign) { Adjust(start, len, sign, true); }
  // The record of the huge page holding p; nullptr if the heap never owned it.
  const HugePageInfo* Find(PageId p) const;
  HugePageInfo* FindMutable(PageId p);

  // Visits every owned huge page: f(uintptr_t hp, HugePageInfo&).
  template <typename F>
  void ForEach(F f) {
    for (size_t r = 0; r < (size_t{1} << kRootBits); ++r) {
      HugePageInfo* leaf = root_[r];
      if (leaf == nullptr) continue;
      for (size_t i = 0; i < kLeafLength; ++i)
        if (leaf[i].owned) f((uintptr_t{r} << kLeafBits) | i, leaf[i]);
    }
  }
  HugePageStats Collect();
  size_t owned() const { return owned_; }

 private:
  void Adjust(PageId start, Length len, int sign, bool released);

  Arena* arena_ = nullptr;
  size_t owned_ = 0;
  HugePageInfo* root_[size_t{1} << kRootBits] = {};
};

}  // namespace tcm

#endif  // TCMALLOC_HUGE_PAGE_TRACKER_H_
