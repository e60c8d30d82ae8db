// Allocation hooks (gperftools/malloc_hook.h), the allocator side.
//
// Installing the first new/delete hook lowers the fast-path limits (g_alloc_limit,
// g_free_limit) to zero, so every malloc and free falls into the slow path, which calls the
// hooks; the fast paths themselves never test for hooks. Removing the last hook restores
// the limits. Hooks run with no allocator lock held. A hook's own allocations are not hooked
// again (per-thread guard), so a hook may allocate.
//
// SYNCHRONIZATION: g_hook_lock (malloc_hook.cc) serialises every change to the hook lists,
// the force-slow count and the limits: RecomputeFastPathLimits() runs under it and derives
// the limits from the lists as they are, so the last writer always wrote the truth (no
// stale "no hooks" store can land after a newer "hooks" one). Readers take no lock: the
// limits are relaxed atomics (a plain load on x86-64), the hook slots acquire loads.
#ifndef TCMALLOC_API_MALLOC_HOOK_H_
#define TCMALLOC_API_MALLOC_HOOK_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/config.h"

namespace tcm {

// A value read on a fast path and written rarely from elsewhere. Every access is a relaxed
// atomic one (a plain mov on x86-64), and the implicit conversion lets the fast path
// compare against it as against a plain variable.
//
// `x >= limit` gets its own operator: compilers never fold an atomic load into another
// instruction, so the comparison would cost a mov plus a cmp, where a plain variable
// compiles to one cmp with a memory operand (+1 instruction on each of the malloc and
// free fast paths, measured with callgrind). On x86-64 the operator issues that one cmp
// itself: an aligned 8-byte load is atomic there, and the asm reads the memory afresh each
// time (volatile), which is what a relaxed load promises.
template <typename T>
class RelaxedAtomic {
 public:
  constexpr explicit RelaxedAtomic(T v) : v_(v) {}
  RelaxedAtomic(const RelaxedAtomic&) = delete;
  RelaxedAtomic& operator=(const RelaxedAtomic&) = delete;
  TCM_ALWAYS_INLINE operator T() const { return v_.load(std::memory_order_relaxed); }
  T load() const { return v_.load(std::memory_order_relaxed); }
  void store(T v) { v_.store(v, std::memory_order_relaxed); }

  friend TCM_ALWAYS_INLINE bool operator>=(T lhs, const RelaxedAtomic& rhs) {
#if defined(__x86_64__)
    static_assert(sizeof(T) == 8 && T(-1) > T(0), "64-bit unsigned values only");
    static_assert(sizeof(std::atomic<T>) == sizeof(T) && std::atomic<T>::is_always_lock_free);
    bool above_or_equal;
    __asm__ __volatile__("cmpq %2, %1" : "=@ccae"(above_or_equal) : "r"(lhs), "m"(rhs.v_));
    return above_or_equal;
#else
    return lhs >= rhs.load();
#endif
  }

 private:
  std::atomic<T> v_;
};

// Fast-path limits: malloc of size >= g_alloc_limit and free of an address >= g_free_limit
// take the slow path. Normally kMaxSize + 1 and 2^48 (the pagemap's reach); 0 while a
// new/delete hook is installed, something forces the slow paths, or in per-CPU mode. The
// free limits stay 0 until OpenFreeFastPaths (the pagemap's class root is filled at
// initialisation, not at load time: pagemap.h).
extern RelaxedAtomic<size_t> g_alloc_limit TCM_HIDDEN;
extern RelaxedAtomic<uintptr_t> g_free_limit TCM_HIDDEN;
// The per-CPU fast paths' limits: the normal ones in per-CPU mode without hooks, else 0.
// (In per-CPU mode g_alloc_limit and g_free_limit are 0, which routes every call there.)
extern RelaxedAtomic<size_t> g_cpu_alloc_limit TCM_HIDDEN;
extern RelaxedAtomic<uintptr_t> g_cpu_free_limit TCM_HIDDEN;
// The same, open only while the rseq area is at the offset built in (os::RseqOffsetIsBuiltIn):
// the inlined per-CPU paths address it as a constant (allocation.h, "Two variants").
extern RelaxedAtomic<size_t> g_cpu_built_in_alloc_limit TCM_HIDDEN;
extern RelaxedAtomic<uintptr_t> g_cpu_built_in_free_limit TCM_HIDDEN;

inline constexpr size_t kNormalAllocLimit = kMaxSize + 1;
inline constexpr uintptr_t kNormalFreeLimit = uintptr_t{1} << kAddressBits;

// True while a new or delete hook may be installed (the slow paths then invoke them).
extern std::atomic<bool> g_alloc_hooks_active TCM_HIDDEN;
inline bool HooksActive() { return g_alloc_hooks_active.load(std::memory_order_relaxed); }
void InvokeNewHooks(const void* p, size_t size);
void InvokeDeleteHooks(const void* p);

// Bytes added to every allocation while hooks are active; the hooks still see the size
// asked for. The heap checker sets 1: a pointer one past a block's
// end (std::vector's end of storage, an arena block's limit) then stays inside the block
// instead of pointing at the start of the next one and keeping it "reachable" (conservative
// collectors pad for the same reason). 0 by default.
extern RelaxedAtomic<size_t> g_hooked_tail_pad TCM_HIDDEN;
inline size_t HookedTailPad() { return HooksActive() ? g_hooked_tail_pad.load() : 0; }

// Selects the per-CPU fast paths (once, at initialisation) and recomputes the limits.
void SetPerCpuMode(bool on);

// The pagemap's class map is set up: free's fast paths may open (once, at initialisation).
void OpenFreeFastPaths();

// Another reason to force the slow paths (e.g. the heap profiler); counted, so calls nest.
void ForceSlowPaths(bool on);

// Closes the per-CPU paths that address the rseq area at the built-in offset, so every call
// takes the variant that loads it (allocation.h, "Two variants"), as on a machine whose glibc
// keeps the area elsewhere; counted like ForceSlowPaths. For tests (soak_stress_core).
void UseLoadedRseqOffset(bool on);

// Sets every fast-path limit from the current hook state. REQUIRES g_hook_lock held (every
// caller is in malloc_hook.cc). The one place that decides the limits: a new kind of limit
// (per-CPU caches) is set here too.
void RecomputeFastPathLimits();

}  // namespace tcm

#endif  // TCMALLOC_API_MALLOC_HOOK_H_
