// The allocator's front end: malloc and free fast paths, inlined into every entry point.
//
// Two front ends, chosen once at start-up (per-CPU where rseq works, else per-thread):
//
// Per-thread caches (the design document's): malloc(size <= 256 KiB) is one table look-up
// for the class and a pop from the head of the calling thread's list; free(p) is three
// loads through the pagemap for p's class and a push. No lock, no syscall, no TLS
// initialisation: the thread's cache pointer starts at an empty cache whose lists are
// empty and full, so the first call of a thread simply misses. x86-64 with g++ -O2, from
// the entry point to the return: malloc 18 instructions, free 33 (12 of them the pagemap
// look-up and the block-start test), one XOR each for the encoded links (freelist_link.h);
// with the loop, 60.3 a pair under callgrind (tests/profiler's Callgrind case bounds it).
//
// Per-CPU caches (core/cpu_cache.h): the per-thread path's first compare fails (its limits
// are 0 in this mode) and branches to the per-CPU path, inlined behind it in the same entry
// point, which pops from or pushes onto the current CPU's slab inside a restartable
// sequence: malloc 27 instructions in all, free 34 (with the block-start test), with
// glibc's rseq area at the offset the build found (else a tail call to the variant that
// loads it). Keeping the per-thread path first
// costs the per-CPU path one compare, and the per-thread path nothing (it is what runs
// under valgrind, where callgrind counts it). The per-CPU path was a separate function,
// reached by a second jump: inlining it took the pair loop from 3.6 to 3.4 ns.
//
// Each path either succeeds in a handful of instructions or tail-calls one noinline slow
// path. Nothing else — stats, hooks, options — runs here.
#ifndef TCMALLOC_ALLOCATION_H_
#define TCMALLOC_ALLOCATION_H_

#include <cstddef>
#include <cstdint>

#include "base/config.h"
#include "base/log.h"
#include "api/globals.h"
#include "api/malloc_hook.h"
#include "core/cpu_cache.h"
#include "core/freelist_link.h"
#include "core/size_classes.h"
#include "core/thread_cache.h"

namespace tcm {

// The calling thread's cache; &g_empty_cache until its first slow path creates a real one.
extern __thread ThreadCache* tls_cache TCM_INITIAL_EXEC TCM_HIDDEN;
extern constinit ThreadCache g_empty_cache TCM_HIDDEN;

// Per-CPU mode: the calling thread's sampling countdown and random state (the thread
// cache's sample_left_ and rng_ play these roles in per-thread mode). Zero in a new thread,
// so its first malloc reaches the slow path, which starts the countdown.
extern __thread int64_t tls_sample_left TCM_INITIAL_EXEC TCM_HIDDEN;
extern __thread uint64_t tls_sample_rng TCM_INITIAL_EXEC TCM_HIDDEN;

TCM_NOINLINE void* AllocateSlow(size_t size) noexcept;  // sets errno = ENOMEM on failure
// Per-CPU mode, malloc's countdown expired on a request of `size`: when only the
// housekeeping tick was due (no sample, the thread's countdown started), runs the tick,
// counts the request in what the expired countdown consumed, re-arms it and returns true;
// the caller then pops as its fast path would.
// False: the caller goes to its slow path, which does all of it.
TCM_NOINLINE bool TickOnly(size_t size) noexcept;
// Per-thread mode's counterpart: malloc's countdown on tc went negative on a request
// (already charged) whose list has an object. The same contract: true when only the tick
// was due and it ran (the countdown re-armed), and the caller then pops.
TCM_NOINLINE bool TickOnly(ThreadCache* tc) noexcept;
TCM_NOINLINE void DeallocateSlow(void* p) noexcept;
TCM_NOINLINE void CollectGarbage(ThreadCache* tc, size_t freed_size) noexcept;

// Debug build only: freed small objects are filled with a pattern that is checked when
// they are handed out again, which catches writes after free; and free() checks that a
// small pointer is the start of a block.
inline constexpr unsigned char kFreedPattern = 0xfd;
inline constexpr size_t kPoisonBytes = 256;  // bounded so big classes stay affordable
void DebugPoison(void* p, size_t size);
void DebugCheckPoison(void* p, size_t size);
void DebugCheckBlockStart(void* p, size_t cl);

// The class of a pointer's page, and whether the pointer may take free()'s fast path: the
// class is not 0 and, in hardened builds, p is a block's first byte. Without that test an interior pointer went
// onto the front end's list, and the next malloc of the class handed out memory overlapping
// a live block before the batch check (when objects move to the central list) could see
// it; a per-CPU cache that never overflows never showed it at all. The page's class-map
// entry, loaded for the class anyway, holds its span's start, and the class's reciprocal
// says whether the size divides the offset (PageMap::LookUpBlock), which fails class 0
// too: one branch for both, so the per-CPU free pays three instructions for the test
// (lea, sub, imul in place of the class-0 test), the per-thread free five (it had no
// class-0 branch). Armed by EnsureInitialized; TCMALLOC_HARDENED=0 arms every class to pass
// (the same cost), -DTCMALLOC_HARDENED=OFF compiles the test out. A pointer into a span's
// tail at a multiple of the size passes here and is left to the batch check.
TCM_ALWAYS_INLINE PageMap::BlockLookUp LookUpSmallBlock(uintptr_t addr) {
  if constexpr (kHardenedBuild) return g_pagemap.LookUpBlock(addr);
  const size_t cl = g_pagemap.ClassOf(addr);
  return {cl, cl != 0};
}
// Where free()'s fast path sends what LookUpSmallBlock refused: DeallocateSlow for class 0,
// the report of an interior pointer (which aborts) otherwise.
TCM_NOINLINE void DeallocateNotSmallBlockStart(void* p, size_t cl) noexcept;
// Reports an interior pointer and aborts. Not declared [[noreturn]]: a noreturn call made
// GCC give the whole free() a stack frame, where `return NotABlockStart(...)` is a tail
// jump like the other misses (TCM_NO_IPA in its definition keeps GCC from finding out).
TCM_NOINLINE void NotABlockStart(void* p, size_t cl, const char* who) noexcept;
// Sets LookUpSmallBlock's rows for every class (hardened: first bytes only); before the
// free fast paths open.
void ArmBlockStartTest(bool hardened);

// Pops an object of class cl from tc's list; nullptr if the list is empty.
TCM_ALWAYS_INLINE void* PopFromCache(ThreadCache* tc, size_t cl) {
  void* result = tc->heads_[cl];
  if (TCM_UNLIKELY(result == nullptr)) return nullptr;
  tc->heads_[cl] = GetLink(result);
  ++tc->spaces_[cl];  // the low-water mark is free's to keep (ThreadCache::LowWater)
  if constexpr (kDebugBuild) DebugCheckPoison(result, tc->object_sizes_[cl]);
  return result;
}

// Per-CPU fast paths, inlined into Allocate/Deallocate behind their first compare, which
// fails when their limits are 0 (per-CPU mode, or hooks). g_cpu_alloc_limit /
// g_cpu_free_limit are the normal limits in per-CPU mode without hooks and 0 otherwise, so
// this costs one compare in either case. That first compare is marked likely to fail, so
// the per-CPU path, the default wherever rseq works, is the fall-through and the per-thread
// path sits behind a taken branch: whichever mode is behind it pays ~1 ns a malloc+free
// pair on the Intel host (pair loop, one CPU: per-CPU 152-155 -> 169-175 M pairs/s with
// this layout, per-thread 174-175 -> 147-148; the instruction counts are the same either
// way, callgrind 59.5 a per-thread 32-byte pair). The
// countdown is charged before the pop (a TLS read-modify-write, outside the critical
// section) and given back on a miss, so the slow path charges it exactly once.
//
// Two variants of the per-CPU path (CpuCache::Pop/Push<kBuiltIn>): the inlined one
// addresses glibc's rseq area at the offset the build found (os::RseqOffsetIsBuiltIn), and
// is open while g_cpu_built_in_alloc_limit / g_cpu_built_in_free_limit are; everything
// else (an area of our own, a glibc whose offset differs, hooks) fails its first compare
// and tail-calls the out-of-line variant, which loads the offset (g_cpu_* limits).
template <bool kBuiltIn, void* (*Slow)(size_t)>
TCM_NOINLINE void* AllocatePerCpuAfterCountdown(size_t size);
template <void* (*Slow)(size_t)>
TCM_NOINLINE void* AllocatePerCpuLoadedOffset(size_t size);

// tls_sample_left -= size; true when it went below 0. One subtraction in memory: in C++,
// GCC kept the old value for the way out and spent a load, a copy and a store on it, three
// instructions of the per-CPU malloc's 30 (counted in the disassembly: valgrind cannot run
// per-CPU mode). The way out adds the size back, as the pop's miss does.
TCM_ALWAYS_INLINE bool ChargeCountdown(size_t size) {
  bool negative;
  asm("subq %[size], %[left]" : [left] "+m"(tls_sample_left), "=@ccs"(negative) : [size] "r"(size));
  return negative;
}

template <bool kBuiltIn, void* (*Slow)(size_t)>
TCM_ALWAYS_INLINE void* AllocatePerCpuAt(size_t size) {
  if constexpr (kBuiltIn) {
    if (TCM_UNLIKELY(size >= g_cpu_built_in_alloc_limit)) return AllocatePerCpuLoadedOffset<Slow>(size);
  } else {
    if (TCM_UNLIKELY(size >= g_cpu_alloc_limit)) return Slow(size);
  }
  const size_t cl = SizeMap::ClassIndex(size);
  if (TCM_UNLIKELY(ChargeCountdown(size))) {
    tls_sample_left += static_cast<int64_t>(size);
    // A tail call like every other way out: a call that returns here made the compiler
    // save registers for every path (callgrind: 6 more instructions a per-thread pair).
    return AllocatePerCpuAfterCountdown<kBuiltIn, Slow>(size);
  }
  void* result = g_cpu_cache.Pop<kBuiltIn>(cl);
  if (TCM_UNLIKELY(result == nullptr)) {
    tls_sample_left += static_cast<int64_t>(size);
    return Slow(size);
  }
  if constexpr (kDebugBuild) DebugCheckPoison(result, SizeMap::ClassSize(cl));
  return result;
}

template <void* (*Slow)(size_t)>
TCM_ALWAYS_INLINE void* AllocatePerCpu(size_t size) {
  return AllocatePerCpuAt<true, Slow>(size);
}

template <void* (*Slow)(size_t)>
TCM_NOINLINE void* AllocatePerCpuLoadedOffset(size_t size) {
  return AllocatePerCpuAt<false, Slow>(size);
}

// The countdown ran out: the tick alone (TickOnly) and then the pop, or the slow path.
template <bool kBuiltIn, void* (*Slow)(size_t)>
TCM_NOINLINE void* AllocatePerCpuAfterCountdown(size_t size) {
  if (!TickOnly(size)) return Slow(size);
  const size_t cl = SizeMap::ClassIndex(size);
  void* result = g_cpu_cache.Pop<kBuiltIn>(cl);
  if (TCM_UNLIKELY(result == nullptr)) {
    // What the tick consumed counts this request already; the slow path charges it again,
    // so it is credited first and the fresh countdown stays as TickOnly armed it.
    tls_sample_left += static_cast<int64_t>(size);
    return Slow(size);
  }
  if constexpr (kDebugBuild) DebugCheckPoison(result, SizeMap::ClassSize(cl));
  return result;
}

TCM_NOINLINE void DeallocatePerCpuMiss(void* p, size_t cl) noexcept;
TCM_NOINLINE void DeallocatePerCpuLoadedOffset(void* p) noexcept;

// free's per-CPU path: class through the pagemap, push; a miss (full, locked, no rseq
// area) or class 0 (nullptr, large, not ours) goes to the slow paths.
template <bool kBuiltIn>
TCM_ALWAYS_INLINE void DeallocatePerCpuAt(void* p) noexcept {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  if constexpr (kBuiltIn) {
    if (TCM_UNLIKELY(addr >= g_cpu_built_in_free_limit)) return DeallocatePerCpuLoadedOffset(p);
  } else {
    if (TCM_UNLIKELY(addr >= g_cpu_free_limit)) return DeallocateSlow(p);
  }
  const auto [cl, block_start] = LookUpSmallBlock(addr);  // class 0 for nullptr, large objects, not ours
  if (TCM_UNLIKELY(!block_start)) return DeallocateNotSmallBlockStart(p, cl);
  if constexpr (kDebugBuild) {
    DebugCheckBlockStart(p, cl);
    DebugPoison(p, SizeMap::ClassSize(cl));
  }
  if (TCM_UNLIKELY(!g_cpu_cache.Push<kBuiltIn>(cl, p))) return DeallocatePerCpuMiss(p, cl);
}

TCM_ALWAYS_INLINE void DeallocatePerCpu(void* p) noexcept { DeallocatePerCpuAt<true>(p); }

// Per-thread mode, the countdown ran out on a request its list can serve: the tick alone
// and the pop, without the walk through the slow path. Every malloc of 64 KiB and more
// ticks (callgrind, fastpath pair 65536: 201 -> 154 instructions a pair; 132 with the
// owner's vectorized size walk, ThreadCache::OwnSize; gperftools 79).
template <void* (*Slow)(size_t)>
TCM_NOINLINE void* AllocateAfterCountdown(size_t size) {
  ThreadCache* tc = tls_cache;
  if (!TickOnly(tc)) return Slow(size);
  void* result = PopFromCache(tc, SizeMap::ClassIndex(size));
  if (TCM_UNLIKELY(result == nullptr)) {
    // The tick's idle-cache collection emptied the list. The re-armed countdown counts
    // this request already and the slow path charges it again: credited first.
    tc->sample_left_ += static_cast<int64_t>(size);
    return Slow(size);
  }
  return result;
}

// Slow is the miss handler: AllocateSlow for malloc, or one that adds the new-handler
// protocol for operator new, so every entry point's miss is a plain tail call.
// g_alloc_limit is kMaxSize + 1, or 0 while hooks are installed (then every call misses).
// The sampling countdown is charged only once the list is known to have an object, so the
// shared empty cache is never written and a miss for an empty list is not counted twice.
template <void* (*Slow)(size_t) = AllocateSlow>
TCM_ALWAYS_INLINE void* Allocate(size_t size) {
  // Likely: per-CPU mode's limit is 0 (the layout's reason: above AllocatePerCpu).
  if (TCM_LIKELY(size >= g_alloc_limit)) return AllocatePerCpu<Slow>(size);
  ThreadCache* tc = tls_cache;
  const size_t cl = SizeMap::ClassIndex(size);
  void* result = tc->heads_[cl];
  if (TCM_UNLIKELY(result == nullptr)) return Slow(size);
  if (TCM_UNLIKELY((tc->sample_left_ -= static_cast<int64_t>(size)) < 0)) return AllocateAfterCountdown<Slow>(size);
  tc->heads_[cl] = GetLink(result);  // decoded: a forged link yields an unpredictable address
  ++tc->spaces_[cl];  // one increment in memory: free keeps the low-water mark
  if constexpr (kDebugBuild) DebugCheckPoison(result, tc->object_sizes_[cl]);
  return result;
}

TCM_ALWAYS_INLINE void Deallocate(void* p) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  // Above the pagemap's reach, per-CPU mode (likely: the layout's reason is above
  // AllocatePerCpu), or hooks installed: the next path decides.
  if (TCM_LIKELY(addr >= g_free_limit)) return DeallocatePerCpu(p);
  // Class 0 (nullptr, large objects, memory we do not own) fails the block-start test (in
  // a build without it, its max_length 0 does it): slow path.
  const auto [cl, block_start] = LookUpSmallBlock(addr);
  if (TCM_UNLIKELY(!block_start)) return DeallocateNotSmallBlockStart(p, cl);
  ThreadCache* tc = tls_cache;
  // The room left after this push: below 0, the list is full (ThreadCache::spaces_). p ==
  // head is a double free caught for the price of one compare.
  const int32_t left = tc->spaces_[cl] - 1;
  if (TCM_UNLIKELY(left < 0 || p == tc->heads_[cl])) return DeallocateSlow(p);
  if constexpr (kDebugBuild) {
    DebugCheckBlockStart(p, cl);
    DebugPoison(p, tc->object_sizes_[cl]);
  }
  // The low-water mark is kept here, where the room is in a register already (why the
  // lowest length a push sees is the mark: ThreadCache::LowWater); malloc's pop is then one
  // increment in memory: callgrind 64.3 -> 62.3 instructions a per-thread 32-byte pair.
  // The highest room a push left is the lowest length's counterpart.
  if (TCM_UNLIKELY(left > tc->space_marks_[cl])) tc->space_marks_[cl] = left;
  SetLink(p, tc->heads_[cl]);  // encoded (freelist_link.h)
  tc->heads_[cl] = p;
  tc->spaces_[cl] = left;
  const uint32_t object_size = tc->object_sizes_[cl];
  tc->room_ -= object_size;
  if (TCM_UNLIKELY(tc->room_ < 0)) return CollectGarbage(tc, object_size);
}

// The rest of the API: slower paths, out of line.
void* AllocateAligned(size_t align, size_t size);  // REQUIRES align a power of two
void* Reallocate(void* p, size_t size) noexcept;
// calloc's pieces out of line: a request whose n * size overflows (errno = ENOMEM,
// nullptr), and a zeroed block above kMaxSize (nullptr with errno = ENOMEM on failure).
TCM_NOINLINE void* ZeroedSizeOverflows() noexcept;
TCM_NOINLINE void* AllocateZeroedLarge(size_t total) noexcept;
// calloc: Slow is the small-object miss handler (as Allocate's), Large the handler of
// blocks above kMaxSize (tc_calloc passes the ones with the new-handler protocol; the
// defaults have none, for callers of the core such as tests/soak). Inline,
// so that a cache hit runs malloc's fast path and ends in a tail call of memset, with no
// frame of its own: a calloc(4, 8)+free pair took 108.3 instructions when tc_calloc kept n
// and size across a call for its failure path, 81.4 this way (tests/profiler pair_loop N
// calloc, loop included).
template <void* (*Slow)(size_t) = AllocateSlow, void* (*Large)(size_t) = AllocateZeroedLarge>
TCM_ALWAYS_INLINE void* AllocateZeroed(size_t n, size_t size) {
  size_t total;
  if (TCM_UNLIKELY(__builtin_mul_overflow(n, size, &total))) return ZeroedSizeOverflows();
  if (TCM_UNLIKELY(total > kMaxSize)) return Large(total);
  void* p = Allocate<Slow>(total);
  if (TCM_UNLIKELY(p == nullptr)) return nullptr;
  return __builtin_memset(p, 0, total);
}
// Usable size of a block we handed out; crashes with `who` in the message on a bad pointer.
size_t UsableSize(const void* p, const char* who);
// Size malloc(size) would really hand out, with lg_align from nallocx's flags.
size_t GoodSize(size_t size, size_t align);

// Statistics shared by mallinfo and malloc_stats.
struct HeapTotals {
  size_t system_bytes;
  size_t in_use_bytes;
  size_t pageheap_free_bytes;
  size_t unmapped_bytes;
  size_t central_free_bytes;
  size_t transfer_cache_bytes;
  size_t thread_cache_bytes;
  size_t cpu_cache_bytes;
  size_t metadata_bytes;
  size_t in_use_spans;
  size_t thread_caches;
};
HeapTotals ComputeTotals();
// Walks the whole heap checking every invariant (page heap, central lists, the calling
// thread's cache, pagemap coverage, statistics); crashes with a message on a violation.
void VerifyHeap();

// Releases every free page-heap run to the OS; returns bytes released.
size_t ReleaseFreeMemory();
// Releases at least `bytes` of free memory if there is that much; returns bytes released.
size_t ReleaseToSystem(size_t bytes);
// The calling thread's cache: its bytes, or give them all back (destroy = forget the
// cache too; the next allocation builds a new one).
size_t CallingThreadCacheSize();
void ReleaseCallingThreadCache(bool destroy);
// The calling thread's stack without the allocator's own frames (for samples, the heap
// profiler and the heap checker). Never allocates. Returns the depth (<= max_depth).
int CaptureUserStack(void** pcs, int max_depth);
// What the allocator knows about p: 0 = not ours, else its usable size (FindBlock's answer:
// a page run by its start, a small object by any of its bytes).
size_t OwnedSize(const void* p);

}  // namespace tcm

#endif  // TCMALLOC_ALLOCATION_H_
