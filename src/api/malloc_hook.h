// Allocation hooks (gperftools/malloc_hook.h), the allocator side.
//
// Installing the first hook lowers the two fast-path limits (g_alloc_limit, g_free_limit)
// to zero, so every malloc and free falls into the slow path, which calls the hooks; the
// fast paths themselves never test for hooks. Removing the last hook restores the limits.
// Hooks run with no allocator lock held. A hook's own allocations are not hooked again
// (per-thread guard), so a hook may allocate.
#ifndef TCMALLOC_MALLOC_HOOK_H_
#define TCMALLOC_MALLOC_HOOK_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/config.h"

namespace tcm {

// Fast-path limits: malloc of size >= g_alloc_limit and free of an address >= g_free_limit
// take the slow path. Normally kMaxSize + 1 and 2^48 (the pagemap's reach).
extern size_t g_alloc_limit TCM_HIDDEN;
extern uintptr_t g_free_limit TCM_HIDDEN;
// The per-CPU fast paths' limits: the normal ones in per-CPU mode without hooks, else 0.
// (In per-CPU mode g_alloc_limit and g_free_limit are 0, which routes every call there.)
extern size_t g_cpu_alloc_limit TCM_HIDDEN;
extern uintptr_t g_cpu_free_limit TCM_HIDDEN;

inline constexpr size_t kNormalAllocLimit = kMaxSize + 1;
inline constexpr uintptr_t kNormalFreeLimit = uintptr_t{1} << kAddressBits;

extern std::atomic<int> g_hooks_installed;  // number of hooks of either kind

inline bool HooksActive() { return g_hooks_installed.load(std::memory_order_relaxed) != 0; }
void InvokeNewHooks(const void* p, size_t size);
void InvokeDeleteHooks(const void* p);

// Selects the per-CPU fast paths (once, at initialisation) and recomputes the limits.
void SetPerCpuMode(bool on);

// Another reason to force the slow paths (e.g. the heap profiler); counted like a hook.
void ForceSlowPaths(bool on);

}  // namespace tcm

#endif  // TCMALLOC_MALLOC_HOOK_H_
