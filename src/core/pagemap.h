// Pagemap: page number -> (Span*, size class) over the 35-bit page numbers of a 48-bit
// address space, as two radix trees:
//   - spans: 3 levels (12 + 12 + 11 bits), nodes from the caller's NodeAllocator;
//   - classes: 2 levels (11 + 24 bits) of one 32-bit entry per page, read by every free().
//     A class leaf covers 128 GiB with 64 MiB of lazily-backed address space (only the
//     pages for memory we actually manage are ever touched: four bytes per 8 KiB page),
//     which buys a lookup of two dependent loads instead of three. An entry is the page's
//     size class in its low byte and, above it, the low 32 bits of the start of the span
//     that holds the page (page-aligned, so its low 13 bits are free for the class): free()
//     tells a block's first byte from an interior pointer with the entry it already loads
//     (SpanOffset), where one byte per page could only say the class.
//
// Interior nodes are allocated on demand (through a caller-supplied NodeAllocator) and never
// freed, so a reader racing with a writer always sees a valid node. Unpopulated class-root
// slots point at a shared, all-zero static leaf instead of nullptr: the class lookup is two
// dependent loads with no branch, which the free() fast path relies on. The shared leaf is
// never written. A slot holds its leaf's address biased by the slot's place (Bias), so the
// entry's address needs no mask. The span tree, read only by slow paths, uses nullptr for missing nodes.
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
    if (!initialized())  // once: a biased slot of a real leaf may read 0
      for (size_t i = 0; i < kClassRootLength; ++i)
        class_base_[i] = reinterpret_cast<uintptr_t>(empty_class_leaf_) - Bias(i);
    __atomic_store_n(&alloc_, alloc, __ATOMIC_RELEASE);  // publishes the filled root
  }
  // Calls f(start, bytes) for each class leaf mapped so far (each is kClassLeafBytes, four
  // bytes per page of its 2^24 pages, written only where spans are registered). Racy reads:
  // leaves are only ever added. For statistics.
  static constexpr size_t kClassLeafBytes = kClassLeafLength * sizeof(uint32_t);
  template <typename F>
  void ForEachClassLeaf(F f) const {
    if (!initialized()) return;
    for (size_t i = 0; i < kClassRootLength; ++i) {
      const uint32_t* leaf = ClassLeaf(i);
      if (leaf != empty_class_leaf_) f(reinterpret_cast<uintptr_t>(leaf), kClassLeafBytes);
    }
  }
  // True once Init has run: ClassOf may be called.
  bool initialized() const { return __atomic_load_n(&alloc_, __ATOMIC_ACQUIRE) != nullptr; }

  // Size class of the page holding addr: 0 for anything that is not a small-object span.
  // The entry's low byte, read alone (little-endian). REQUIRES addr < 2^48.
  TCM_ALWAYS_INLINE uint8_t ClassOf(uintptr_t addr) const {
    return *reinterpret_cast<const uint8_t*>(ClassEntry(addr));
  }
  // addr's offset from the start of its span, given cl = ClassOf(addr) != 0: the entry is
  // span start (low 32 bits) + cl, and a small-object span is far shorter than 4 GiB, so the
  // 32-bit difference is exact even where the span straddles a multiple of 4 GiB.
  // REQUIRES addr < 2^48.
  TCM_ALWAYS_INLINE uint32_t SpanOffset(uintptr_t addr, size_t cl) const {
    return static_cast<uint32_t>(addr + cl) - *ClassEntry(addr);
  }
  // The class of addr's page (ClassOf) and whether addr is the first byte of one of its
  // blocks with the class not 0: the size divides SpanOffset, which is offset * magic <
  // limit with the class's row (Lemire, Kaser and Kurz's test, as SizeMap::StartsObject,
  // where limit = magic). Rows that were never set read {0, 0} and fail every pointer, so
  // class 0 (nullptr, large blocks, memory not ours) fails with no test of its own: free()'s
  // one branch sends both kinds to its slow path. PassEveryBlock makes a class's row {0, ~0},
  // which passes every pointer (the test switched off).
  // In assembly, for what GCC did in C++: it spent a copy of cl, a zero-extension and a
  // register move on the test (32-bit lea and sub zero the upper half), and, seeing the
  // entry's address in two loads, formed it in a register first. Here both loads address it
  // as root slot + page number * 4 (the slot is biased, so the page number needs no mask),
  // and the rows are read at their offsets in this object, whose address the root's load
  // has in a register already. REQUIRES addr < 2^48.
  static constexpr size_t kClassSlots = 128;  // above every class the entries hold
  struct BlockLookUp {
    size_t cl;
    bool block_start;
  };
  TCM_ALWAYS_INLINE BlockLookUp LookUpBlock(uintptr_t addr) const {
    size_t cl;
    uint64_t product;
    bool fails;
    asm("movzbl %[entry], %k[cl]\n\t"
        "leal (%[addr],%[cl]), %k[product]\n\t"
        "subl %[entry], %k[product]\n\t"
        "imulq %c[magic](%[map],%[cl],8), %[product]\n\t"
        "cmpq %c[limit](%[map],%[cl],8), %[product]"
        : [cl] "=&r"(cl), [product] "=&r"(product), "=@ccae"(fails)
        : [addr] "r"(addr), [entry] "m"(*ClassEntry(addr)), [map] "r"(this),
          [magic] "i"(offsetof(PageMap, block_magic_)), [limit] "i"(offsetof(PageMap, block_limit_)),
          "m"(block_magic_), "m"(block_limit_));
    return {cl, !fails};
  }
  // Class cl >= 1: only its blocks' first bytes pass, given the class's division magic
  // ceil(2^64 / size) (SizeMap::kDivisionMagic; magic = limit), or every pointer passes.
  void ArmBlockStartTest(size_t cl, uint64_t magic) { block_magic_[cl] = block_limit_[cl] = magic; }
  void PassEveryBlock(size_t cl) {
    block_magic_[cl] = 0;
    block_limit_[cl] = ~uint64_t{0};
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
  // Page p belongs to a span of class cl (0: none) that starts at page span_start.
  void SetClass(PageId p, uint8_t cl, PageId span_start) {
    uint32_t* leaf = ClassLeaf(p.index >> kClassLeafBits);
    // Class 0 is what the shared empty leaf already says; never write to it.
    if (leaf == empty_class_leaf_) {
      if (cl == 0) return;
      leaf = MutableClassLeaf(p);
      if (leaf == nullptr) return;  // only after Ensure() failed, which callers check
    }
    const uint32_t entry = cl == 0 ? 0 : static_cast<uint32_t>(span_start.addr()) + cl;
    // One aligned 32-bit store: a lock-free reader sees the old entry or the new one.
    __atomic_store_n(&leaf[p.index & (kClassLeafLength - 1)], entry, __ATOMIC_RELAXED);
  }

  // A large block's length in pages, kept in the entry of its run's first page above the
  // class byte (0): realloc's fast path has loaded that entry to learn the class, and with
  // the length there a large block that still fits (a buffer grown by small steps) is
  // answered without the span tree's three dependent loads and the span record's (FindBlock:
  // half of realloc_growth's time went there). The allocation layer records unsampled runs
  // it hands out, records them again after a resize in place, and clears the entry
  // (SetClass 0) before it frees one; every
  // other page's entry, and every run longer than kMaxRecordedPages, reads 0 (not known).
  // REQUIRES Ensure covered first.
  static constexpr size_t kMaxRecordedPages = (size_t{1} << 24) - 1;
  void SetLargeLength(PageId first, size_t pages) {
    uint32_t* leaf = MutableClassLeaf(first);
    if (leaf == nullptr) return;
    const uint32_t entry = pages <= kMaxRecordedPages ? static_cast<uint32_t>(pages) << 8 : 0;
    __atomic_store_n(&leaf[first.index & (kClassLeafLength - 1)], entry, __ATOMIC_RELAXED);
  }
  // The length SetLargeLength recorded for the run starting at addr's page, 0 if none.
  // Meaningful only where ClassOf(addr) == 0 (above a class, the entry holds a span start).
  // REQUIRES addr < 2^48.
  TCM_ALWAYS_INLINE size_t LargeLength(uintptr_t addr) const { return *ClassEntry(addr) >> 8; }

  // Bytes of span nodes allocated so far (metadata accounting); class leaves are address
  // space of which only four bytes per managed page are ever touched.
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
  uint32_t* MutableClassLeaf(PageId p);
  // Each class-root slot holds its leaf's address minus Bias(slot), the offset of the slot's
  // first page in a leaf indexed by the whole page number: an entry's address is then the
  // slot + page number * 4, with no mask on the page number (LookUpBlock).
  static constexpr uintptr_t Bias(size_t slot) { return uintptr_t{slot} * kClassLeafBytes; }
  TCM_ALWAYS_INLINE const uint32_t* ClassEntry(uintptr_t addr) const {
    return reinterpret_cast<const uint32_t*>(class_base_[addr >> (kPageShift + kClassLeafBits)] +
                                             (addr >> kPageShift) * sizeof(uint32_t));
  }
  uint32_t* ClassLeaf(size_t slot) const {
    return reinterpret_cast<uint32_t*>(__atomic_load_n(&class_base_[slot], __ATOMIC_ACQUIRE) + Bias(slot));
  }

  static uint32_t empty_class_leaf_[kClassLeafLength];  // all zero, never written

  uintptr_t class_base_[kClassRootLength] = {};  // leaf address - Bias(slot)
  uint64_t block_magic_[kClassSlots] = {};
  uint64_t block_limit_[kClassSlots] = {};
  Mid* root_[kRootLength] = {};
  size_t class_leaves_ = 0;
  NodeAllocator alloc_ = nullptr;
  size_t node_bytes_ = 0;
};

}  // namespace tcm

#endif  // TCMALLOC_PAGEMAP_H_
