// Stack capture that is safe inside the allocator: no malloc, no locks of ours.
// Uses the compiler runtime's unwinder (_Unwind_Backtrace), which reads .eh_frame and so
// works on code built without frame pointers.
#ifndef TCMALLOC_PLATFORM_STACK_TRACE_H_
#define TCMALLOC_PLATFORM_STACK_TRACE_H_

#include <cstddef>
#include <cstdint>

namespace tcm::os {

inline constexpr int kMaxStackDepth = 64;

// Fills pcs with up to max_depth return addresses of the calling thread, innermost first,
// skipping `skip` frames above the caller of GetStackTrace. Returns the depth captured.
int GetStackTrace(void** pcs, int max_depth, int skip);

// As GetStackTrace, and sizes[i] = the size in bytes of frame i's stack frame (the distance
// between its canonical frame address and that of the frame it called; 0 if unknown).
int GetStackFrames(void** pcs, int* sizes, int max_depth, int skip);

// The executable address range [*lo, *hi) of the loaded module whose code contains `addr`.
// Returns false if not found. *is_main_program tells whether that module is the program
// itself (a static link) rather than a shared library.
bool ModuleTextRange(const void* addr, uintptr_t* lo, uintptr_t* hi, bool* is_main_program);

// Writes "symbol+0xoff (module)" for pc into buf (NUL-terminated, truncated to len - 1),
// or "(module+0xoff)" when the module exports no symbol there, or "" when pc is in no
// module. Never allocates; meant for crash reports (it may take the loader's lock).
void DescribePc(const void* pc, char* buf, size_t len);

}  // namespace tcm::os

#endif  // TCMALLOC_PLATFORM_STACK_TRACE_H_
