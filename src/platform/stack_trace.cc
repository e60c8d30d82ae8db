#include "platform/stack_trace.h"

#include <dlfcn.h>
#include <link.h>
#include <unwind.h>

#include <cstdint>
#include <cstdio>

namespace tcm::os {

namespace {
struct Walk {
  void** pcs;
  int max_depth;
  int skip;
  int depth;
  int* sizes = nullptr;       // GetStackFrames only
  uintptr_t last_cfa = 0;     // canonical frame address of the frame seen last
};

_Unwind_Reason_Code OnFrame(struct _Unwind_Context* ctx, void* arg) {
  auto* w = static_cast<Walk*>(arg);
  uintptr_t ip = _Unwind_GetIP(ctx);
  if (ip == 0) return _URC_END_OF_STACK;
  // Frame i's stack frame spans from the CFA of the frame it called (i-1) to its own CFA.
  const uintptr_t cfa = w->sizes != nullptr ? _Unwind_GetCFA(ctx) : 0;
  const uintptr_t callee_cfa = w->last_cfa;
  w->last_cfa = cfa;
  if (w->skip > 0) {
    --w->skip;
    return _URC_NO_REASON;
  }
  if (w->depth >= w->max_depth) return _URC_END_OF_STACK;
  if (w->sizes != nullptr)
    w->sizes[w->depth] = callee_cfa != 0 && cfa > callee_cfa ? static_cast<int>(cfa - callee_cfa) : 0;
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

int GetStackFrames(void** pcs, int* sizes, int max_depth, int skip) {
  Walk w{pcs, max_depth, skip + 1, 0, sizes, 0};
  _Unwind_Backtrace(OnFrame, &w);
  return w.depth;
}

namespace {
struct RangeQuery {
  uintptr_t addr;
  uintptr_t lo, hi;
  bool is_main;
  bool found;
};

int OnModule(struct dl_phdr_info* info, size_t, void* arg) {
  auto* q = static_cast<RangeQuery*>(arg);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    uintptr_t hi = lo + ph.p_memsz;
    if (q->addr >= lo && q->addr < hi) {
      q->lo = lo;
      q->hi = hi;
      q->is_main = info->dlpi_name == nullptr || info->dlpi_name[0] == '\0';
      q->found = true;
      return 1;
    }
  }
  return 0;
}
}  // namespace

bool ModuleTextRange(const void* addr, uintptr_t* lo, uintptr_t* hi, bool* is_main_program) {
  RangeQuery q{reinterpret_cast<uintptr_t>(addr), 0, 0, false, false};
  dl_iterate_phdr(OnModule, &q);
  if (!q.found) return false;
  *lo = q.lo;
  *hi = q.hi;
  *is_main_program = q.is_main;
  return true;
}

void DescribePc(const void* pc, char* buf, size_t len) {
  if (len == 0) return;
  buf[0] = '\0';
  Dl_info info;
  if (dladdr(pc, &info) == 0 || info.dli_fname == nullptr) return;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(pc);
  if (info.dli_sname != nullptr && info.dli_saddr != nullptr) {
    snprintf(buf, len, "%s+0x%lx (%s)", info.dli_sname,
             static_cast<unsigned long>(addr - reinterpret_cast<uintptr_t>(info.dli_saddr)), info.dli_fname);
  } else {
    snprintf(buf, len, "(%s+0x%lx)", info.dli_fname,
             static_cast<unsigned long>(addr - reinterpret_cast<uintptr_t>(info.dli_fbase)));
  }
}

}  // namespace tcm::os
