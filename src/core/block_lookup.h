// Pointer to block: which heap block an address falls in, from the pagemap alone.
//
// One answer for every question of that kind (malloc_usable_size and realloc for page
// runs, the Verify*Memory checks, MallocExtension::GetOwnership, the heap checker's
// interior pointers, the debug build's block-start check), so they cannot disagree about
// what "ours" means. (malloc_usable_size and realloc of a small object ask the class map
// first, which gives the same size without reading the span record: api/allocation.cc.)
//
// What is found: any byte of a block handed out from an in-use span. In a small-object
// span that is the object the byte falls in (the span's tail that holds no whole object is
// not ours); a page run is one block. Interior pages of a page run are not always in the
// pagemap (page_heap.h records a run's first and last page), so an address there may be
// reported "not ours"; the run's first and last page are always found. Freed small objects
// inside an in-use span are still found: the pagemap cannot tell them from live ones.
//
// Locking: none taken. A small-object span cannot change while the caller holds a live
// object in it; for anything else (a page run, or an address the caller does not own) the
// caller holds the page heap lock, or the answer may be stale by the time it is used.
#ifndef TCMALLOC_CORE_BLOCK_LOOKUP_H_
#define TCMALLOC_CORE_BLOCK_LOOKUP_H_

#include <cstddef>
#include <cstdint>

#include "core/pagemap.h"
#include "core/span.h"

namespace tcm {

struct Block {
  uintptr_t start = 0;   // 0: the address is in no block of ours
  size_t size = 0;       // usable bytes: the class size, or the whole page run
  size_t cl = 0;         // size class; 0 for a page run
  Span* span = nullptr;  // the span holding the block

  bool found() const { return start != 0; }
};

// The block containing addr, or Block{} (found() == false).
Block FindBlock(const PageMap& pagemap, uintptr_t addr) noexcept;

}  // namespace tcm

#endif  // TCMALLOC_CORE_BLOCK_LOOKUP_H_
