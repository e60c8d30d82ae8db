// Pagemap: page number -> (Span*, size class) over the 35-bit page numbers of a 48-bit
// address space, as two radix trees:
//   - spans: 3 levels (12 + 12 + 11 bits), nodes from the caller's NodeAllocator;
//   - classes: 2 levels (11 + 24 bits) of one byte per page, read by every free(). A class
//     leaf covers 128 GiB with 16 MiB of lazily-backed address space (only the pages for
//     memory we actually manage are ever touched: one byte per 8 KiB page), which buys a
//     lookup of two dependent loads instead of three.
//
// Interior nodes are allocated on demand (through a caller-supplied NodeAllocator) and never
// freed, so a reader racing with a writer always sees a valid node. Unpopulated class-root
// slots point at a shared, all-zero static leaf instead of nullptr: the class lookup is two
// dependent loads with no branch, which the free() fast path relies on. The shared leaf is
// never written. The span tree, read only by slow paths, uses nullptr for missing nodes.
//
// Start-up cost (the program that never allocates much pays it): every pointer in the
// static image is a load-time relocation (24 bytes of .rela.dyn, read from the file) and
// dirties its page, and one such pointer puts the whole object in .data, which the kernel
// maps from the file around every fault. Hence a small class root (2048 slots, 16 KiB),
// filled by Init() rather than by the constructor: a default-constructed PageMap is all
// zero, so the allocator's one lives in .bss (the filled root cost 48 KiB of relocations
// and kept the span root's 32 KiB of zeros in .data). Until Init() nothing may look up a
// class: the fast paths' limits are closed until then (malloc_hook.h).
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
  };
  static constexpr int kClassLeafBits = 24;
  static constexpr int kClassRootBits = kPageBits - kClassLeafBits;  // 11
  static constexpr size_t kClassLeafLength = size_t{1} << kClassLeafBits;
  static constexpr size_t kClassRootLength = size_t{1} << kClassRootBits;
  struct Mid {
    Leaf* leaves[kMidLength];
  };

  // All zero (constinit globals go to .bss); usable once Init() has run.
  constexpr PageMap() = default;
  explicit PageMap(NodeAllocator alloc) { Init(alloc); }
  // Points every class-root slot not yet in use at the shared empty leaf and sets the node
  // allocator. Idempotent; REQUIRES no concurrent use before it returns.
  void Init(NodeAllocator alloc) {
    for (auto& c : class_root_)
      if (c == nullptr) c = empty_class_leaf_;
    __atomic_store_n(&alloc_, alloc, __ATOMIC_RELEASE);  // publishes the filled root
  }
  // Calls f(start, bytes) for each class leaf mapped so far (each is kClassLeafLength bytes,
  // one per page of its 2^24 pages, written only where spans are registered). Racy reads:
  // leaves are only ever added. For statistics.
  template <typename F>
  void ForEachClassLeaf(F f) const {
    for (size_t i = 0; i < kClassRootLength; ++i) {
      const uint8_t* leaf = __atomic_load_n(&class_root_[i], __ATOMIC_ACQUIRE);
      if (leaf != nullptr && leaf != empty_class_leaf_) f(reinterpret_cast<uintptr_t>(leaf), kClassLeafLength);
    }
  }
  // True once Init has run: ClassOf may be called.
  bool initialized() const { return __atomic_load_n(&alloc_, __ATOMIC_ACQUIRE) != nullptr; }

  // Size class of the page holding addr: 0 for anything that is not a small-object span.
  // REQUIRES addr < 2^48.
  TCM_ALWAYS_INLINE uint8_t ClassOf(uintptr_t addr) const {
    return class_root_[addr >> (kPageShift + kClassLeafBits)][(addr >> kPageShift) & (kClassLeafLength - 1)];
  }

  // Span covering page p, or nullptr. Any p is accepted (pages beyond 48 bits have none).
  Span* GetSpan(PageId p) const {
    if (p.index >> kPageBits) return nullptr;
    const Leaf* leaf = LeafFor(p);
    return leaf == nullptr ? nullptr : leaf->spans[p.index & (kLeafLength - 1)];
  }

  // True if a real leaf covers page p (false for pages no span was ever recorded around).
  bool LeafExists(PageId p) const {
    if (p.index >> kPageBits) return false;
    return LeafFor(p) != nullptr;
  }

  // Makes sure nodes exist for [start, start+n). Returns false if the allocator failed.
  bool Ensure(PageId start, Length n);

  // REQUIRES Ensure() covered p.
  void Set(PageId p, Span* s) { MutableLeaf(p)->spans[p.index & (kLeafLength - 1)] = s; }
  void SetClass(PageId p, uint8_t cl) {
    uint8_t* leaf = class_root_[p.index >> kClassLeafBits];
    // Class 0 is what the shared empty leaf already says; never write to it.
    if (leaf == empty_class_leaf_) {
      if (cl == 0) return;
      leaf = MutableClassLeaf(p);
      if (leaf == nullptr) return;  // only after Ensure() failed, which callers check
    }
    leaf[p.index & (kClassLeafLength - 1)] = cl;
  }

  // Bytes of span nodes allocated so far (metadata accounting); class leaves are address
  // space of which only one byte per managed page is ever touched.
  size_t node_bytes() const { return node_bytes_; }
  size_t class_leaves() const { return class_leaves_; }

 private:
  // nullptr when no leaf covers p. Nodes are published with release stores after being
  // filled; the acquire loads pair with them for readers that hold no lock.
  const Leaf* LeafFor(PageId p) const {
    const Mid* mid = __atomic_load_n(&root_[p.index >> (kLeafBits + kMidBits)], __ATOMIC_ACQUIRE);
    if (mid == nullptr) return nullptr;
    return __atomic_load_n(&mid->leaves[(p.index >> kLeafBits) & (kMidLength - 1)], __ATOMIC_ACQUIRE);
  }
  Leaf* MutableLeaf(PageId p);
  uint8_t* MutableClassLeaf(PageId p);

  static uint8_t empty_class_leaf_[kClassLeafLength];  // all zero, never written

  uint8_t* class_root_[kClassRootLength] = {};
  Mid* root_[kRootLength] = {};
  size_t class_leaves_ = 0;
  NodeAllocator alloc_ = nullptr;
  size_t node_bytes_ = 0;
};

}  // namespace tcm

#endif  // TCMALLOC_PAGEMAP_H_
