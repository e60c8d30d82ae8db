// Pagemap: page number -> (Span*, size class), a 3-level radix tree over the 35-bit page
// numbers of a 48-bit address space.
//
// Interior nodes are allocated on demand (through a caller-supplied NodeAllocator) and never
// freed, so a reader racing with a writer always sees a valid node. Unpopulated slots point
// at shared, all-zero static nodes instead of nullptr: a lookup is three dependent loads with
// no branches, which the free() fast path relies on. The shared nodes are never written.
//
// Concurrency: Set*/Ensure are called with the page heap lock held; lookups are lock-free
// (entries are word-sized and written before the memory they describe is handed out).
#ifndef TCMALLOC_PAGEMAP_H_
#define TCMALLOC_PAGEMAP_H_

#include <cstddef>
#include <cstdint>

#include "base/config.h"

namespace tcm {

struct Span;

// Returns zeroed memory for pagemap nodes, or nullptr when out of memory.
using NodeAllocator = void* (*)(size_t bytes);

class PageMap {
 public:
  static constexpr int kPageBits = kAddressBits - kPageShift;  // 35
  static constexpr int kLeafBits = 11;
  static constexpr int kMidBits = 12;
  static constexpr int kRootBits = kPageBits - kLeafBits - kMidBits;  // 12
  static constexpr size_t kLeafLength = size_t{1} << kLeafBits;
  static constexpr size_t kMidLength = size_t{1} << kMidBits;
  static constexpr size_t kRootLength = size_t{1} << kRootBits;

  struct Leaf {
    Span* spans[kLeafLength];
    uint8_t classes[kLeafLength];
  };
  struct Mid {
    Leaf* leaves[kMidLength];
  };

  constexpr explicit PageMap(NodeAllocator alloc) : alloc_(alloc) {
    for (auto& m : root_) m = &empty_mid_;
  }

  // Size class of the page holding addr: 0 for anything that is not a small-object span.
  // REQUIRES addr < 2^48.
  TCM_ALWAYS_INLINE uint8_t ClassOf(uintptr_t addr) const {
    uintptr_t p = addr >> kPageShift;
    return root_[p >> (kLeafBits + kMidBits)]->leaves[(p >> kLeafBits) & (kMidLength - 1)]
        ->classes[p & (kLeafLength - 1)];
  }

  // Span covering page p, or nullptr. Any p is accepted (pages beyond 48 bits have none).
  Span* GetSpan(PageId p) const {
    if (p.index >> kPageBits) return nullptr;
    return LeafFor(p)->spans[p.index & (kLeafLength - 1)];
  }

  // True if a real leaf covers page p (false for pages no span was ever recorded around).
  bool LeafExists(PageId p) const {
    if (p.index >> kPageBits) return false;
    return LeafFor(p) != &empty_leaf_;
  }

  // Makes sure nodes exist for [start, start+n). Returns false if the allocator failed.
  bool Ensure(PageId start, Length n);

  // REQUIRES Ensure() covered p.
  void Set(PageId p, Span* s) { MutableLeaf(p)->spans[p.index & (kLeafLength - 1)] = s; }
  void SetClass(PageId p, uint8_t cl) { MutableLeaf(p)->classes[p.index & (kLeafLength - 1)] = cl; }

  // Bytes of nodes allocated so far (metadata accounting).
  size_t node_bytes() const { return node_bytes_; }

 private:
  const Leaf* LeafFor(PageId p) const {
    return root_[p.index >> (kLeafBits + kMidBits)]->leaves[(p.index >> kLeafBits) & (kMidLength - 1)];
  }
  Leaf* MutableLeaf(PageId p);

  static constinit Leaf empty_leaf_;
  struct EmptyMid : Mid {
    constexpr EmptyMid() : Mid{} {
      for (auto& l : leaves) l = &empty_leaf_;
    }
  };
  static constinit EmptyMid empty_mid_;

  Mid* root_[kRootLength];
  NodeAllocator alloc_;
  size_t node_bytes_ = 0;
};

}  // namespace tcm

#endif  // TCMALLOC_PAGEMAP_H_
