// Allocation stacks for the heap checker: the allocating thread's return addresses without
// the allocator's own frames (malloc, its slow path, the hook machinery), so reports and
// the policy rules (heap_checker.cc, ClassifyRoots) start at the program's call site.
//
// Shared library: our frames are those inside our own text segment. Static link: our code
// is part of the program's text, and malloc tail-calls its slow path (so it is not even on
// the stack); there InitStackCapture learns which functions sit between a hook and the
// program, by allocating through every entry point from a probe function and recording the
// function of each frame in between (found with the unwinder's own FDE lookup).
//
// Thread-safe after InitStackCapture; CaptureAllocStack takes no lock of ours (it may take
// the dynamic loader's, through the unwinder) and never allocates.
#ifndef TCMALLOC_HEAP_CHECK_STACK_H_
#define TCMALLOC_HEAP_CHECK_STACK_H_

namespace tcm::heapcheck {

// REQUIRES the checker's new hook installed (the static-link probes go through it), and
// no other thread allocating yet (it runs from the library's constructor).
void InitStackCapture();

// Fills out with up to max_depth (<= os::kMaxStackDepth) return addresses, innermost
// first, starting at the program's frame that called the allocator. Returns the depth.
int CaptureAllocStack(void** out, int max_depth);

// True while InitStackCapture probes: CaptureAllocStack then keeps the raw stack for the
// probe and returns 0, and the new hook must record nothing.
bool Probing();

}  // namespace tcm::heapcheck

#endif  // TCMALLOC_HEAP_CHECK_STACK_H_
