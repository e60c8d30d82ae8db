// A private page heap for unit tests: its own pagemap, system allocator and arena, so a
// test sees exactly the memory it asked for and nothing from the process-wide globals.
// The memory it obtains is never returned (the heap never unmaps), which is fine in a test.
#ifndef TCMALLOC_TESTS_UNIT_TEST_HEAP_H_
#define TCMALLOC_TESTS_UNIT_TEST_HEAP_H_

#include <cstdlib>
#include <memory>

#include "core/arena.h"
#include "core/page_heap.h"
#include "core/pagemap.h"
#include "core/system_alloc.h"

namespace tcm::testing {

// Pagemap nodes from glibc's calloc (zeroed, as NodeAllocator requires); leaked on purpose.
inline void* CallocNode(size_t bytes) { return calloc(1, bytes); }

struct TestHeap {
  Arena arena;
  PageMap pagemap{&CallocNode};
  SystemAllocator sys;
  PageHeap heap{&pagemap, &sys, &arena};

  // Components are large (the pagemap root alone is 32 KiB): keep them off the stack.
  static std::unique_ptr<TestHeap> Make() { return std::make_unique<TestHeap>(); }
};

}  // namespace tcm::testing

#endif  // TCMALLOC_TESTS_UNIT_TEST_HEAP_H_
