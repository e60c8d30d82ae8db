// gperftools/stacktrace.h: the calling thread's stack, exported by libtcmalloc only (as
// Debian's gperftools 2.10 does). Thin wrappers over the platform unwinder.
//
// Each wrapper skips its own frame (skip_count + 1). It must stay a real frame on the
// stack: noinline, and no tail call (the barrier after the call keeps the frame alive).
#include "gperftools/stacktrace.h"

#include "platform/stack_trace.h"

namespace {
// Keeps the compiler from turning `return f();` into a jump that would drop our frame.
template <typename T>
T KeepFrame(T value) {
  __asm__ __volatile__("" : "+r"(value));
  return value;
}
}  // namespace

__attribute__((noinline)) int GetStackTrace(void** result, int max_depth, int skip_count) {
  if (result == nullptr || max_depth <= 0) return 0;
  return KeepFrame(tcm::os::GetStackTrace(result, max_depth, skip_count + 1));
}

__attribute__((noinline)) int GetStackTraceWithContext(void** result, int max_depth, int skip_count,
                                                       const void*) {
  if (result == nullptr || max_depth <= 0) return 0;
  return KeepFrame(tcm::os::GetStackTrace(result, max_depth, skip_count + 1));
}

__attribute__((noinline)) int GetStackFrames(void** result, int* sizes, int max_depth, int skip_count) {
  if (result == nullptr || sizes == nullptr || max_depth <= 0) return 0;
  return KeepFrame(tcm::os::GetStackFrames(result, sizes, max_depth, skip_count + 1));
}

__attribute__((noinline)) int GetStackFramesWithContext(void** result, int* sizes, int max_depth,
                                                        int skip_count, const void*) {
  if (result == nullptr || sizes == nullptr || max_depth <= 0) return 0;
  return KeepFrame(tcm::os::GetStackFrames(result, sizes, max_depth, skip_count + 1));
}
