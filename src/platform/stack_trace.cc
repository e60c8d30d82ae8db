#include "platform/stack_trace.h"

#include <unwind.h>

#include <cstdint>

namespace tcm::os {

namespace {
struct Walk {
  void** pcs;
  int max_depth;
  int skip;
  int depth;
};

_Unwind_Reason_Code OnFrame(struct _Unwind_Context* ctx, void* arg) {
  auto* w = static_cast<Walk*>(arg);
  uintptr_t ip = _Unwind_GetIP(ctx);
  if (ip == 0) return _URC_END_OF_STACK;
  if (w->skip > 0) {
    --w->skip;
    return _URC_NO_REASON;
  }
  if (w->depth >= w->max_depth) return _URC_END_OF_STACK;
  w->pcs[w->depth++] = reinterpret_cast<void*>(ip);
  return _URC_NO_REASON;
}
}  // namespace

int GetStackTrace(void** pcs, int max_depth, int skip) {
  // +1: the first frame reported is GetStackTrace itself.
  Walk w{pcs, max_depth, skip + 1, 0};
  _Unwind_Backtrace(OnFrame, &w);
  return w.depth;
}

}  // namespace tcm::os
