// The heap profiler's and the heap checker's one window onto the allocator.
//
// profiler/ and heapcheck/ include nothing else of api/ or core/ (scripts/check-layers.sh
// enforces it): what they may know of the allocator is listed here, as plain addresses and
// sizes, so the tiers can change shape without them noticing. Everything here is safe to
// call from a malloc hook (no allocation), except where a function says otherwise.
#ifndef TCMALLOC_API_INTROSPECTION_H_
#define TCMALLOC_API_INTROSPECTION_H_

#include <cstddef>
#include <cstdint>

#include "api/options.h"

namespace tcm::introspection {

// Initialises the allocator if it is not yet (the options table is parsed then, and the
// allocator's fork handlers registered: a caller that registers its own fork handlers
// after this call has them run before the allocator's in the prepare phase) and returns
// the options, all three sections. The reference stays valid and unchanged for good.
const Options& AllocatorOptions();

// The calling thread's stack without the allocator's own frames, innermost first.
// Returns the depth (<= max_depth). Never allocates.
int CaptureUserStack(void** pcs, int max_depth);

// Takes every allocator lock, in the allocator's lock order, and releases them again:
// while held no thread can allocate, free or move memory between the tiers. Nothing that
// may malloc can be called in between.
void LockAllocator();
void UnlockAllocator();

// A block handed out by the allocator: any byte of it maps to the same start and size.
struct HeapBlock {
  uintptr_t start = 0;  // 0: not a block of ours
  size_t size = 0;      // usable bytes
};

// The block containing addr. Takes the page heap lock: not while LockAllocator is held.
HeapBlock FindHeapBlock(uintptr_t addr);
// The same for a caller that holds LockAllocator.
HeapBlock FindHeapBlockWhileLocked(uintptr_t addr);

// Whether the page of addr is memory the page heap manages (a block, free or in use, or
// pages it holds). Lock-free; may be stale for pages that change hands concurrently.
bool IsHeapMemory(uintptr_t addr);

// Calls fn(lo, hi, ctx) for each run of pages the page heap manages, free or in use, in
// address order (adjacent runs separately). REQUIRES LockAllocator held.
void ForEachHeapRun(void (*fn)(uintptr_t lo, uintptr_t hi, void* ctx), void* ctx);

// While hooks are installed, every allocation gets `bytes` beyond its request (hooks
// still see the request). The heap checker asks for 1, so that a
// pointer one past a block's end (std::vector's end of storage, an arena block's limit)
// points into that block and not at the start of the next one. Set before installing hooks.
void SetHookedTailPad(size_t bytes);

// Calls fn(lo, hi, ctx) for each of the allocator's own static objects (its caches, lists
// and maps): memory that holds pointers to free blocks, never to live ones the program
// owns, so a leak scan must not take it for roots.
void ForEachAllocatorStatic(void (*fn)(uintptr_t lo, uintptr_t hi, void* ctx), void* ctx);

}  // namespace tcm::introspection

#endif  // TCMALLOC_API_INTROSPECTION_H_
