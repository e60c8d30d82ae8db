// The hook lists behind gperftools/malloc_hook.h and malloc_hook_c.h, and the one function
// that derives the fast-path limits from them. Locking: see malloc_hook.h.
#include "api/malloc_hook.h"

#include "base/config.h"
#include "base/log.h"
#include "base/spinlock.h"
#include "gperftools/malloc_hook.h"
#include "platform/mmap_intercept.h"
#include "platform/os.h"
#include "platform/rseq.h"
#include "platform/stack_trace.h"

namespace tcm {

constinit RelaxedAtomic<size_t> g_alloc_limit{kNormalAllocLimit};
constinit RelaxedAtomic<uintptr_t> g_free_limit{0};  // opened by OpenFreeFastPaths
constinit RelaxedAtomic<size_t> g_cpu_alloc_limit{0};
constinit RelaxedAtomic<uintptr_t> g_cpu_free_limit{0};
constinit RelaxedAtomic<size_t> g_cpu_built_in_alloc_limit{0};
constinit RelaxedAtomic<uintptr_t> g_cpu_built_in_free_limit{0};
constinit std::atomic<bool> g_alloc_hooks_active{false};
constinit RelaxedAtomic<size_t> g_hooked_tail_pad{0};

namespace {

constinit SpinLock g_hook_lock;
int g_force_slow = 0;      // guarded by g_hook_lock
int g_force_loaded_offset = 0;  // guarded by g_hook_lock: UseLoadedRseqOffset
bool g_per_cpu_mode = false;  // guarded by g_hook_lock
bool g_class_map_ready = false;  // guarded by g_hook_lock: free's fast paths may read the pagemap

// A fixed array of hooks: changed under g_hook_lock, read lock-free (slots are atomic, so
// hooks can be added and removed while other threads invoke them). The last slot is the
// deprecated "singular" hook that Set*Hook replaces.
template <typename Hook>
class HookList {
 public:
  static constexpr int kMaxHooks = 7;

  // Adds h to a free slot; false if h is null or the list is full. REQUIRES g_hook_lock.
  bool AddLocked(Hook h) {
    if (h == nullptr) return false;
    for (int i = 0; i < kMaxHooks; ++i) {
      if (slots_[i].load(std::memory_order_relaxed) == nullptr) {
        slots_[i].store(h, std::memory_order_release);
        ++count_;
        return true;
      }
    }
    return false;
  }
  // Removes one installation of h; false if it was not installed. REQUIRES g_hook_lock.
  bool RemoveLocked(Hook h) {
    if (h == nullptr) return false;
    for (int i = 0; i < kMaxHooks; ++i) {
      if (slots_[i].load(std::memory_order_relaxed) == h) {
        slots_[i].store(nullptr, std::memory_order_relaxed);
        --count_;
        return true;
      }
    }
    return false;
  }
  // Replaces the singular hook; returns the previous one. REQUIRES g_hook_lock.
  Hook ExchangeSingularLocked(Hook h) {
    Hook old = singular_.exchange(h, std::memory_order_acq_rel);
    count_ += (h != nullptr) - (old != nullptr);
    return old;
  }
  bool EmptyLocked() const { return count_ == 0; }
  bool MaybeNonEmpty() const { return count_relaxed_.load(std::memory_order_relaxed) != 0; }
  void PublishCountLocked() { count_relaxed_.store(count_, std::memory_order_relaxed); }

  template <typename... Args>
  void Invoke(Args... args) const {
    for (const auto& slot : slots_)
      if (Hook h = slot.load(std::memory_order_acquire)) h(args...);
    if (Hook h = singular_.load(std::memory_order_acquire)) h(args...);
  }
  // The first hook that handles the call (returns nonzero) wins; for replacements.
  template <typename... Args>
  bool InvokeUntilHandled(Args... args) const {
    for (const auto& slot : slots_)
      if (Hook h = slot.load(std::memory_order_acquire))
        if (h(args...) != 0) return true;
    return false;
  }

 private:
  std::atomic<Hook> slots_[kMaxHooks] = {};
  std::atomic<Hook> singular_{nullptr};
  int count_ = 0;                        // installed hooks, singular included; g_hook_lock
  std::atomic<int> count_relaxed_{0};    // a copy for lock-free "anything to call?" checks
};

constinit HookList<MallocHook_NewHook> g_new_hooks;
constinit HookList<MallocHook_DeleteHook> g_delete_hooks;
constinit HookList<MallocHook_PreMmapHook> g_pre_mmap_hooks;
constinit HookList<MallocHook_MmapHook> g_mmap_hooks;
constinit HookList<MallocHook_MmapReplacement> g_mmap_replacement;
constinit HookList<MallocHook_MunmapHook> g_munmap_hooks;
constinit HookList<MallocHook_MunmapReplacement> g_munmap_replacement;
constinit HookList<MallocHook_MremapHook> g_mremap_hooks;
constinit HookList<MallocHook_PreSbrkHook> g_pre_sbrk_hooks;
constinit HookList<MallocHook_SbrkHook> g_sbrk_hooks;
__thread bool tls_in_hook TCM_INITIAL_EXEC = false;

// Every change to a hook list: under the hook lock, then the list's published count and
// the fast paths' limits (a hook present makes malloc take its slow path).
template <typename Hook, typename Change>
auto Update(HookList<Hook>& list, Change change) {
  SpinLockHolder l(&g_hook_lock);
  const auto result = change(list);
  list.PublishCountLocked();
  RecomputeFastPathLimits();
  return result;
}

template <typename Hook>
int Add(HookList<Hook>& list, Hook h) {
  return Update(list, [h](HookList<Hook>& l) { return l.AddLocked(h); });
}

template <typename Hook>
int Remove(HookList<Hook>& list, Hook h) {
  return Update(list, [h](HookList<Hook>& l) { return l.RemoveLocked(h); });
}

template <typename Hook>
Hook Exchange(HookList<Hook>& list, Hook h) {
  return Update(list, [h](HookList<Hook>& l) { return l.ExchangeSingularLocked(h); });
}

// A replacement is exclusive: a second one is refused with a diagnosis.
template <typename Hook>
int SetReplacement(HookList<Hook>& list, Hook h, const char* who) {
  SpinLockHolder l(&g_hook_lock);
  if (!list.EmptyLocked()) {
    Log("%s: a replacement is already set; refusing a second one", who);
    return 0;
  }
  const bool ok = list.AddLocked(h);
  list.PublishCountLocked();
  return ok;
}

// What the intercepted mmap family (libtcmalloc) calls: the MallocHook lists.
constexpr os::AddressSpaceHooks kAddressSpaceForwarders = {
    [](const void* start, size_t size, int prot, int flags, int fd, off_t offset) {
      MallocHook::InvokePreMmapHook(start, size, prot, flags, fd, offset);
    },
    [](const void* start, size_t size, int prot, int flags, int fd, off_t offset, void** result) {
      return MallocHook::InvokeMmapReplacement(start, size, prot, flags, fd, offset, result);
    },
    [](const void* result, const void* start, size_t size, int prot, int flags, int fd, off_t offset) {
      MallocHook::InvokeMmapHook(result, start, size, prot, flags, fd, offset);
    },
    [](const void* p, size_t size, int* result) { return MallocHook::InvokeMunmapReplacement(p, size, result); },
    [](const void* p, size_t size) { MallocHook::InvokeMunmapHook(p, size); },
    [](const void* result, const void* old_addr, size_t old_size, size_t new_size, int flags,
       const void* new_addr) { MallocHook::InvokeMremapHook(result, old_addr, old_size, new_size, flags, new_addr); },
    [](ptrdiff_t increment) { MallocHook::InvokePreSbrkHook(increment); },
    [](const void* result, ptrdiff_t increment) { MallocHook::InvokeSbrkHook(result, increment); },
};

// The intercepted calls report to the hooks from the first address-space hook on; until
// then they are bare system calls.
template <typename Hook>
int AddAddressSpaceHook(HookList<Hook>& list, Hook h) {
  os::SetAddressSpaceHooks(&kAddressSpaceForwarders);
  return Add(list, h);
}

template <typename Hook>
Hook ExchangeAddressSpaceHook(HookList<Hook>& list, Hook h) {
  os::SetAddressSpaceHooks(&kAddressSpaceForwarders);
  return Exchange(list, h);
}

template <typename Hook>
int SetAddressSpaceReplacement(HookList<Hook>& list, Hook h, const char* who) {
  os::SetAddressSpaceHooks(&kAddressSpaceForwarders);
  return SetReplacement(list, h, who);
}

}  // namespace

void RecomputeFastPathLimits() {
  const bool hooks = !g_new_hooks.EmptyLocked() || !g_delete_hooks.EmptyLocked();
  const bool slow = hooks || g_force_slow > 0;
  g_alloc_hooks_active.store(hooks, std::memory_order_relaxed);
  // Per-thread fast path: open unless slow paths are forced or the per-CPU one is chosen.
  g_alloc_limit.store(slow || g_per_cpu_mode ? 0 : kNormalAllocLimit);
  g_free_limit.store(slow || g_per_cpu_mode || !g_class_map_ready ? 0 : kNormalFreeLimit);
  // Per-CPU fast path: open only in per-CPU mode without a reason for the slow paths.
  g_cpu_alloc_limit.store(!slow && g_per_cpu_mode ? kNormalAllocLimit : 0);
  g_cpu_free_limit.store(!slow && g_per_cpu_mode && g_class_map_ready ? kNormalFreeLimit : 0);
  const bool built_in = os::RseqOffsetIsBuiltIn() && g_force_loaded_offset == 0;
  g_cpu_built_in_alloc_limit.store(built_in ? g_cpu_alloc_limit.load() : 0);
  g_cpu_built_in_free_limit.store(built_in ? g_cpu_free_limit.load() : 0);
}

void OpenFreeFastPaths() {
  SpinLockHolder l(&g_hook_lock);
  g_class_map_ready = true;
  RecomputeFastPathLimits();
}

void SetPerCpuMode(bool on) {
  SpinLockHolder l(&g_hook_lock);
  g_per_cpu_mode = on;
  RecomputeFastPathLimits();
}

void UseLoadedRseqOffset(bool on) {
  SpinLockHolder l(&g_hook_lock);
  g_force_loaded_offset += on ? 1 : -1;
  RecomputeFastPathLimits();
}

void ForceSlowPaths(bool on) {
  SpinLockHolder l(&g_hook_lock);
  g_force_slow += on ? 1 : -1;
  RecomputeFastPathLimits();
}

void InvokeNewHooks(const void* p, size_t size) {
  if (tls_in_hook) return;
  tls_in_hook = true;
  g_new_hooks.Invoke(p, size);
  tls_in_hook = false;
}

void InvokeDeleteHooks(const void* p) {
  if (tls_in_hook) return;
  tls_in_hook = true;
  g_delete_hooks.Invoke(p);
  tls_in_hook = false;
}

}  // namespace tcm

using namespace tcm;

// ---- gperftools' C++ entry points (exported: the class has default visibility) ---------

void MallocHook::InvokeNewHookSlow(const void* p, size_t s) { InvokeNewHooks(p, s); }
void MallocHook::InvokeDeleteHookSlow(const void* p) { InvokeDeleteHooks(p); }

void MallocHook::InvokePreMmapHookSlow(const void* start, size_t size, int protection, int flags,
                                       int fd, off_t offset) {
  if (g_pre_mmap_hooks.MaybeNonEmpty()) g_pre_mmap_hooks.Invoke(start, size, protection, flags, fd, offset);
}

void MallocHook::InvokeMmapHookSlow(const void* result, const void* start, size_t size,
                                    int protection, int flags, int fd, off_t offset) {
  if (g_mmap_hooks.MaybeNonEmpty()) g_mmap_hooks.Invoke(result, start, size, protection, flags, fd, offset);
}

bool MallocHook::InvokeMmapReplacementSlow(const void* start, size_t size, int protection,
                                           int flags, int fd, off_t offset, void** result) {
  return g_mmap_replacement.MaybeNonEmpty() &&
         g_mmap_replacement.InvokeUntilHandled(start, size, protection, flags, fd, offset, result);
}

void MallocHook::InvokeMunmapHookSlow(const void* p, size_t size) {
  if (g_munmap_hooks.MaybeNonEmpty()) g_munmap_hooks.Invoke(p, size);
}

bool MallocHook::InvokeMunmapReplacementSlow(const void* p, size_t size, int* result) {
  return g_munmap_replacement.MaybeNonEmpty() && g_munmap_replacement.InvokeUntilHandled(p, size, result);
}

void MallocHook::InvokeMremapHookSlow(const void* result, const void* old_addr, size_t old_size,
                                      size_t new_size, int flags, const void* new_addr) {
  if (g_mremap_hooks.MaybeNonEmpty()) g_mremap_hooks.Invoke(result, old_addr, old_size, new_size, flags, new_addr);
}

void MallocHook::InvokePreSbrkHookSlow(ptrdiff_t increment) {
  if (g_pre_sbrk_hooks.MaybeNonEmpty()) g_pre_sbrk_hooks.Invoke(increment);
}

void MallocHook::InvokeSbrkHookSlow(const void* result, ptrdiff_t increment) {
  if (g_sbrk_hooks.MaybeNonEmpty()) g_sbrk_hooks.Invoke(result, increment);
}

void* MallocHook::UnhookedMMap(void* start, size_t length, int prot, int flags, int fd, off_t offset) {
  return os::RawMmap(start, length, prot, flags, fd, offset);
}

int MallocHook::UnhookedMUnmap(void* start, size_t length) { return os::RawMunmap(start, length); }

// ---- the C interface ---------------------------------------------------------------------

extern "C" {

TCM_EXPORT int MallocHook_AddNewHook(MallocHook_NewHook hook) { return Add(g_new_hooks, hook); }
TCM_EXPORT int MallocHook_RemoveNewHook(MallocHook_NewHook hook) { return Remove(g_new_hooks, hook); }
TCM_EXPORT int MallocHook_AddDeleteHook(MallocHook_DeleteHook hook) { return Add(g_delete_hooks, hook); }
TCM_EXPORT int MallocHook_RemoveDeleteHook(MallocHook_DeleteHook hook) { return Remove(g_delete_hooks, hook); }
TCM_EXPORT int MallocHook_AddPreMmapHook(MallocHook_PreMmapHook hook) { return AddAddressSpaceHook(g_pre_mmap_hooks, hook); }
TCM_EXPORT int MallocHook_RemovePreMmapHook(MallocHook_PreMmapHook hook) { return Remove(g_pre_mmap_hooks, hook); }
TCM_EXPORT int MallocHook_AddMmapHook(MallocHook_MmapHook hook) { return AddAddressSpaceHook(g_mmap_hooks, hook); }
TCM_EXPORT int MallocHook_RemoveMmapHook(MallocHook_MmapHook hook) { return Remove(g_mmap_hooks, hook); }
TCM_EXPORT int MallocHook_AddMunmapHook(MallocHook_MunmapHook hook) { return AddAddressSpaceHook(g_munmap_hooks, hook); }
TCM_EXPORT int MallocHook_RemoveMunmapHook(MallocHook_MunmapHook hook) { return Remove(g_munmap_hooks, hook); }
TCM_EXPORT int MallocHook_AddMremapHook(MallocHook_MremapHook hook) { return AddAddressSpaceHook(g_mremap_hooks, hook); }
TCM_EXPORT int MallocHook_RemoveMremapHook(MallocHook_MremapHook hook) { return Remove(g_mremap_hooks, hook); }
TCM_EXPORT int MallocHook_AddPreSbrkHook(MallocHook_PreSbrkHook hook) { return AddAddressSpaceHook(g_pre_sbrk_hooks, hook); }
TCM_EXPORT int MallocHook_RemovePreSbrkHook(MallocHook_PreSbrkHook hook) { return Remove(g_pre_sbrk_hooks, hook); }
TCM_EXPORT int MallocHook_AddSbrkHook(MallocHook_SbrkHook hook) { return AddAddressSpaceHook(g_sbrk_hooks, hook); }
TCM_EXPORT int MallocHook_RemoveSbrkHook(MallocHook_SbrkHook hook) { return Remove(g_sbrk_hooks, hook); }

TCM_EXPORT int MallocHook_SetMmapReplacement(MallocHook_MmapReplacement hook) {
  return SetAddressSpaceReplacement(g_mmap_replacement, hook, "MallocHook_SetMmapReplacement");
}
TCM_EXPORT int MallocHook_RemoveMmapReplacement(MallocHook_MmapReplacement hook) {
  return Remove(g_mmap_replacement, hook);
}
TCM_EXPORT int MallocHook_SetMunmapReplacement(MallocHook_MunmapReplacement hook) {
  return SetAddressSpaceReplacement(g_munmap_replacement, hook, "MallocHook_SetMunmapReplacement");
}
TCM_EXPORT int MallocHook_RemoveMunmapReplacement(MallocHook_MunmapReplacement hook) {
  return Remove(g_munmap_replacement, hook);
}

TCM_EXPORT MallocHook_NewHook MallocHook_SetNewHook(MallocHook_NewHook hook) { return Exchange(g_new_hooks, hook); }
TCM_EXPORT MallocHook_DeleteHook MallocHook_SetDeleteHook(MallocHook_DeleteHook hook) {
  return Exchange(g_delete_hooks, hook);
}
TCM_EXPORT MallocHook_PreMmapHook MallocHook_SetPreMmapHook(MallocHook_PreMmapHook hook) {
  return ExchangeAddressSpaceHook(g_pre_mmap_hooks, hook);
}
TCM_EXPORT MallocHook_MmapHook MallocHook_SetMmapHook(MallocHook_MmapHook hook) { return ExchangeAddressSpaceHook(g_mmap_hooks, hook); }
TCM_EXPORT MallocHook_MunmapHook MallocHook_SetMunmapHook(MallocHook_MunmapHook hook) {
  return ExchangeAddressSpaceHook(g_munmap_hooks, hook);
}
TCM_EXPORT MallocHook_MremapHook MallocHook_SetMremapHook(MallocHook_MremapHook hook) {
  return ExchangeAddressSpaceHook(g_mremap_hooks, hook);
}
TCM_EXPORT MallocHook_PreSbrkHook MallocHook_SetPreSbrkHook(MallocHook_PreSbrkHook hook) {
  return ExchangeAddressSpaceHook(g_pre_sbrk_hooks, hook);
}
TCM_EXPORT MallocHook_SbrkHook MallocHook_SetSbrkHook(MallocHook_SbrkHook hook) { return ExchangeAddressSpaceHook(g_sbrk_hooks, hook); }

TCM_EXPORT int MallocHook_GetCallerStackTrace(void** result, int max_depth, int skip_count) {
  return os::GetStackTrace(result, max_depth, skip_count + 1);
}

}  // extern "C"
