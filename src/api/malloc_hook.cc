#include "api/malloc_hook.h"

#include "base/config.h"
#include "gperftools/malloc_hook_c.h"
#include "platform/stack_trace.h"

namespace tcm {

size_t g_alloc_limit = kNormalAllocLimit;
uintptr_t g_free_limit = kNormalFreeLimit;
size_t g_cpu_alloc_limit = 0;
uintptr_t g_cpu_free_limit = 0;
std::atomic<int> g_hooks_installed{0};
static std::atomic<bool> g_per_cpu_mode{false};

static void Changed(int delta);

namespace {

// A fixed, lock-free list: slots are claimed with compare-exchange, so hooks can be added
// and removed while other threads invoke them.
template <typename Hook>
class HookList {
 public:
  static constexpr int kMaxHooks = 7;
  bool Add(Hook h) {
    if (h == nullptr) return false;
    for (auto& slot : slots_) {
      Hook expected = nullptr;
      if (slot.compare_exchange_strong(expected, h)) {
        Changed(+1);
        return true;
      }
    }
    return false;
  }
  bool Remove(Hook h) {
    if (h == nullptr) return false;
    for (auto& slot : slots_) {
      Hook expected = h;
      if (slot.compare_exchange_strong(expected, nullptr)) {
        Changed(-1);
        return true;
      }
    }
    return false;
  }
  template <typename... Args>
  void Invoke(Args... args) {
    for (auto& slot : slots_)
      if (Hook h = slot.load(std::memory_order_acquire)) h(args...);
  }

 private:
  std::atomic<Hook> slots_[kMaxHooks] = {};
};

HookList<MallocHook_NewHook> g_new_hooks;
HookList<MallocHook_DeleteHook> g_delete_hooks;
std::atomic<MallocHook_NewHook> g_set_new_hook{nullptr};
std::atomic<MallocHook_DeleteHook> g_set_delete_hook{nullptr};
__thread bool tls_in_hook TCM_INITIAL_EXEC = false;

void Recompute() {
  bool active = g_hooks_installed.load(std::memory_order_relaxed) != 0;
  bool per_cpu = g_per_cpu_mode.load(std::memory_order_relaxed);
  __atomic_store_n(&g_alloc_limit, active || per_cpu ? 0 : kNormalAllocLimit, __ATOMIC_RELAXED);
  __atomic_store_n(&g_free_limit, active || per_cpu ? 0 : kNormalFreeLimit, __ATOMIC_RELAXED);
  __atomic_store_n(&g_cpu_alloc_limit, !active && per_cpu ? kNormalAllocLimit : 0, __ATOMIC_RELAXED);
  __atomic_store_n(&g_cpu_free_limit, !active && per_cpu ? kNormalFreeLimit : 0, __ATOMIC_RELAXED);
}

}  // namespace

static void Changed(int delta) {
  g_hooks_installed.fetch_add(delta, std::memory_order_relaxed);
  Recompute();
}

void ForceSlowPaths(bool on) { Changed(on ? +1 : -1); }

void SetPerCpuMode(bool on) {
  g_per_cpu_mode.store(on, std::memory_order_relaxed);
  Recompute();
}

void InvokeNewHooks(const void* p, size_t size) {
  if (tls_in_hook) return;
  tls_in_hook = true;
  g_new_hooks.Invoke(p, size);
  if (auto h = g_set_new_hook.load(std::memory_order_acquire)) h(p, size);
  tls_in_hook = false;
}

void InvokeDeleteHooks(const void* p) {
  if (tls_in_hook) return;
  tls_in_hook = true;
  g_delete_hooks.Invoke(p);
  if (auto h = g_set_delete_hook.load(std::memory_order_acquire)) h(p);
  tls_in_hook = false;
}

}  // namespace tcm

using namespace tcm;

extern "C" {

TCM_EXPORT int MallocHook_AddNewHook(MallocHook_NewHook hook) { return g_new_hooks.Add(hook); }
TCM_EXPORT int MallocHook_RemoveNewHook(MallocHook_NewHook hook) { return g_new_hooks.Remove(hook); }
TCM_EXPORT int MallocHook_AddDeleteHook(MallocHook_DeleteHook hook) { return g_delete_hooks.Add(hook); }
TCM_EXPORT int MallocHook_RemoveDeleteHook(MallocHook_DeleteHook hook) { return g_delete_hooks.Remove(hook); }

TCM_EXPORT MallocHook_NewHook MallocHook_SetNewHook(MallocHook_NewHook hook) {
  MallocHook_NewHook old = g_set_new_hook.exchange(hook);
  Changed((hook != nullptr) - (old != nullptr));
  return old;
}

TCM_EXPORT MallocHook_DeleteHook MallocHook_SetDeleteHook(MallocHook_DeleteHook hook) {
  MallocHook_DeleteHook old = g_set_delete_hook.exchange(hook);
  Changed((hook != nullptr) - (old != nullptr));
  return old;
}

TCM_EXPORT int MallocHook_GetCallerStackTrace(void** result, int max_depth, int skip_count) {
  return os::GetStackTrace(result, max_depth, skip_count + 1);
}

}  // extern "C"
