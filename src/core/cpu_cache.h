// CpuCache: the per-CPU front end (the modern TCMalloc's answer to per-thread caches).
//
// Every possible CPU owns a slab of kSlabBytes: a header word per size class followed by
// arrays of free object pointers, one array per class. A header holds three slot indices
// into the slab: `begin` (fixed start of the class's array), `current` (one past the top
// object) and `end` (capacity limit). malloc pops slot[current-1], free pushes at
// slot[current]; both run as restartable sequences (platform/rseq.h) on the CPU the thread
// is on, so they need no lock and no atomic instruction: the kernel restarts the sequence
// if the thread is preempted or migrated before its single committing store.
//
// Why it bounds memory: front-end memory is at most max_bytes_per_cpu per CPU whatever the
// number of threads, and a CPU's cache is hot for whichever thread runs there.
//
// Capacity: every class starts with capacity 0. A miss (empty on malloc, full on free)
// grows its capacity while the CPU's byte budget allows (slots x object size over all
// classes <= max_bytes_per_cpu): doubling up to one batch (slow start, so a class used a
// few times costs a few objects), then by one batch; a malloc miss fetches only what the
// capacity has room for, and a class's first one on a CPU only the caller's object (each
// class's slots start on a page of their own, which a block allocated once need not
// touch). Maintenance (Maintain) takes half the spare capacity and half the
// cached objects back from classes that did not miss for a resize interval (they never
// needed their lower half: the design's low-water scavenging), and drains a CPU whose
// threads did not reach a slow path for kIdleNs back to the central lists.
//
// Remote changes (maintenance, another CPU's slow path) lock a class header by compare-
// and-swap, setting begin = kLockedBegin and end = 0 so every fast path on that CPU misses,
// then run an rseq fence (membarrier) on the CPU: a critical section that read the old
// header is aborted or has committed by then. Its commit may have rewritten `current`
// (harmless: the field the lock keeps) or `end` (only slow paths write end, and they hold
// the CPU's lock_, as the remote side does), so after the fence the locked header is
// re-read and every object in [begin, current) belongs to the remote side.
//
// The fast-path sequences (x86-64, g++ -O2, counted in the generated code): Pop is 15
// instructions from arming the section to the commit, Push 17 (it also refuses a pointer
// that is already the top object: a double free in a row). With the entry checks, the
// size-class look-up and the sampling countdown, malloc is 27 instructions from the entry
// point to its return and free 34 (with the block-start test) when glibc's rseq area is at
// the offset the build found (Pop<true>/Push<true>: the area's fields are constants), one
// more each when the offset is loaded first (bench/README.md has the measured pair loop).
// Locking: CpuMeta::lock guards a CPU's capacities, its byte count and header changes by
// slow paths and maintenance. It is a leaf lock: nothing else is taken under it (objects
// move to and from the central lists after it is dropped).
#ifndef TCMALLOC_CPU_CACHE_H_
#define TCMALLOC_CPU_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/config.h"
#include "base/spinlock.h"
#include "core/arena.h"
#include "core/central_freelist.h"
#include "core/size_classes.h"
#include "platform/rseq.h"

// ThreadSanitizer cannot see the hand-over of an object through a slab (the sequences are
// assembly it does not instrument): in TSan builds a push releases and a pop acquires the
// object's address, which is the happens-before the slab provides.
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define TCM_TSAN_ACQUIRE(p) __tsan_acquire(p)
#define TCM_TSAN_RELEASE(p) __tsan_release(p)
#else
#define TCM_TSAN_ACQUIRE(p) static_cast<void>(0)
#define TCM_TSAN_RELEASE(p) static_cast<void>(0)
#endif

namespace tcm {

inline constexpr int kSlabShift = 19;
inline constexpr size_t kSlabBytes = size_t{1} << kSlabShift;  // 65536 slots per CPU
inline constexpr size_t kSlabSlots = kSlabBytes / sizeof(void*);
inline constexpr size_t kHeaderSlots = 128;  // one 8-byte header per class, kMaxClasses
inline constexpr uint16_t kLockedBegin = 0xffff;
inline constexpr size_t kMaxClasses = size_class_internal::kMaxClasses;
inline constexpr size_t kDefaultMaxPerCpuCacheBytes = size_t{3} << 20;
// A CPU with no slow path for this long is drained whole. Memory must be back within a
// second of a program going light (issue 12); at 1 s, whether the drain came before that
// second was over was a coin toss.
inline constexpr uint64_t kCpuIdleNs = 500'000'000;
// Unused capacity and half the objects of classes that did not miss are taken back at most
// this often per CPU, each time for the cost of a fence (an interrupt of that CPU): at most
// ten a second. At 250 ms, with passes driven by light traffic's ticks every ~200 ms, only
// every other pass halved (two halvings in the second after a burst of frees, not four).
inline constexpr uint64_t kCpuResizeIntervalNs = 100'000'000;

// `current` is 32 bits wide although its values fit 16: the fast paths load it right
// after the previous call stored it, and on this machine's AMD cores a 32-bit load of a
// 32-bit store forwards at once while a 16-bit pair did not (a loop of 31 pops then 31
// pushes: 3.6 ns a pair with 16-bit `current`, 2.0 ns with 32-bit). Slot indices stay
// below 65536 (kSlabSlots), so its upper half is always 0.
struct alignas(8) SlabHeader {  // stored whole (one 8-byte store) when a CPU is set up
  uint32_t current;
  uint16_t end;
  uint16_t begin;
};
static_assert(sizeof(SlabHeader) == 8 && offsetof(SlabHeader, end) == 4 && offsetof(SlabHeader, begin) == 6,
              "the asm spells these out");

namespace cpu_cache_internal {
// Most objects a class may ever cache on one CPU: about 128 KiB worth below 256 bytes and
// 256 KiB from there, 8..8192 objects (the object cap matters for the 8-byte class only),
// 24576 for the 16-byte class (history below). At 2048 a working set of a few
// thousand small nodes (a tree of depth 11) crossed the central list where a thread cache
// (8192) held it; 4096 made binary trees (depth 19) 5% faster. 8192 was rejected once
// (two threads 0.78-0.86 -> 0.94-1.15 s), while the slow-path tick was one counter both
// CPUs wrote; with that counted per thread, 8192 took trees of depth 12 from 7.7-8.3 to
// 5.6-5.9 ns a node, depth 19 from 1.11-1.17 to 1.07-1.11 s on one thread and 0.67-0.89
// to 0.64-0.85 s on two (8 interleaved runs, both bimodal). 256 KiB a class
// was tried: a working set of 1000 blocks of 256 B then stays on the CPU (the suite's
// batch 256: 4.4 ns a pair against 7.1), but a heap of 1 GiB with 75% freed in random
// order kept 1.36-1.51x its bytes in use after the idle period, not 1.25-1.29x (issue 13's
// bound is 1.3x): rejected. The byte budget per CPU still bounds what all classes hold
// together.
// Classes of 256 bytes and more may hold 256 KiB: a working set of 1000 blocks of 256 B
// (the suite's batch 256) stays on the CPU, 179 -> 248-261 M ops/s (gperftools 290; the
// batch check on the way to the transfer cache was 28% of it). With objects that only
// overflowed handed back at every pass (below), the 75%-freed heap keeps 1.20-1.21x its
// bytes in use, as with 128 KiB; the smaller classes stay at 128 KiB because their slots
// would not fit the slab's 16-bit indices.
// The 16-byte class (two pointers: tree and list nodes, std::unique_ptr pairs) may hold
// 24576 objects, 384 KiB: a tree of depth 14 (32767 nodes) then fits in the slab and the
// transfer cache together instead of crossing the spans, 8.2-8.6 -> 6.3-6.6 ns a node
// (mimalloc 5.8). The slab's 16-bit indices leave room for one class this large, and the
// classes of the 75%-freed heap (64-256 B) keep their 128 KiB.
inline constexpr uint16_t kMaxCapacity16 = 24576;
constexpr uint16_t MaxCapacity(size_t cl) {
  if (cl == 0) return 0;
  if (SizeMap::ClassSize(cl) == 16) return kMaxCapacity16;
  const size_t bytes = SizeMap::ClassSize(cl) >= 256 ? 256 * 1024 : 128 * 1024;
  size_t n = bytes / SizeMap::ClassSize(cl);
  return static_cast<uint16_t>(n < 8 ? 8 : n > 8192 ? 8192 : n);
}
constexpr size_t TotalSlots() {
  size_t total = kHeaderSlots;
  for (size_t cl = 1; cl < kNumClasses; ++cl) total += MaxCapacity(cl);
  return total;
}
static_assert(kNumClasses <= kHeaderSlots);
static_assert(TotalSlots() <= kSlabSlots, "every class's array must fit the slab");
static_assert(TotalSlots() < kLockedBegin, "slot indices (up to TotalSlots) must stay below the lock marker");
}  // namespace cpu_cache_internal

class CpuCache {
 public:
  constexpr CpuCache() = default;

  // Sets up slabs for every possible CPU (memory is touched only as CPUs use it). Returns
  // false when rseq is unusable or memory ran out; the allocator then uses thread caches.
  // central: the central lists, shards->count groups of kNumClasses (central_freelist.h); each
  // CPU's misses go to its shard.
  bool Init(Arena* arena, CentralFreeList* central, size_t max_bytes_per_cpu,
            const CentralShards* shards = nullptr);
  bool active() const { return slabs_ != nullptr; }
  int num_cpus() const { return static_cast<int>(num_cpus_); }
  size_t slab_region_bytes() const { return static_cast<size_t>(num_cpus_) << kSlabShift; }

  // ---- fast paths (rseq critical sections); nullptr / false means "miss" ----
  // kBuiltInOffset: the rseq area is addressed at os::kBuiltInRseqOffset, which only
  // callers that checked os::RseqOffsetIsBuiltIn() may ask for; else at RseqOffsetFast().
  template <bool kBuiltInOffset = false>
  TCM_ALWAYS_INLINE void* Pop(size_t cl);
  template <bool kBuiltInOffset = false>
  TCM_ALWAYS_INLINE bool Push(size_t cl, void* p);

  // ---- slow paths ----
  // malloc's miss for class cl: grows the class's capacity if the budget allows, refills
  // the CPU's cache with a batch from the central list and returns one object (nullptr
  // when out of memory).
  void* AllocateMiss(size_t cl);
  // free's miss (the class's array is full, locked, or this thread has no rseq area):
  // grows the capacity or moves a batch to the central list, then caches p.
  void DeallocateMiss(size_t cl, void* p);
  // Whether p is the top object of class cl on the caller's CPU (a double free in a row);
  // Push misses in that case so the slow path can tell. Racy by design, never wrong for a
  // pointer the caller owns: an owned block cannot be in a cache.
  bool IsTopObject(size_t cl, const void* p);
  // Batch sequences for the slow paths: one critical section moves up to n objects between
  // the caller's array and the current CPU's array of class cl. They return how many moved
  // (0 when full/empty, locked, or no rseq area).
  int PushBatch(size_t cl, void* const* items, int n);
  int PopBatch(size_t cl, void** out, int n);
  // The calling thread reached a slow path at `now`: its CPU is not idle.
  void MarkActive(uint64_t now);

  // Maintenance: drains CPUs idle for kCpuIdleNs, shrinks unused capacity elsewhere.
  // Returns bytes moved to the central lists.
  size_t Maintain(uint64_t now);
  // Moves every object cached on `cpu` to the central lists (capacities start over).
  size_t Drain(int cpu);
  size_t DrainAll();
  // Drains the CPU the caller runs on (MarkThreadIdle).
  size_t DrainCurrent();

  // Statistics (racy reads).
  size_t CpuBytes(int cpu) const;
  size_t TotalBytes() const;
  size_t CpuCapacityBytes(int cpu) const;
  size_t ClassObjects(size_t cl) const;  // over all CPUs
  // Calls f(object) for each object cached for class cl on cpu (racy: for checks).
  template <typename F>
  void ForEachObject(int cpu, size_t cl, F f) const {
    if (!active() || !meta(cpu).initialized) return;
    const uint32_t current = __atomic_load_n(&Header(cpu, cl)->current, __ATOMIC_ACQUIRE);
    void** slots = Slots(cpu);
    for (uint16_t i = begin_[cl]; i < current && i < begin_[cl] + max_capacity(cl); ++i)
      f(__atomic_load_n(&slots[i], __ATOMIC_RELAXED));
  }
  uint64_t drains() const { return drains_.load(std::memory_order_relaxed); }
  // Slots class cl may hold on cpu (its capacity; racy read: statistics, tests, and
  // AllocateMiss, whose first miss of a class caches nothing).
  size_t ClassCapacity(int cpu, size_t cl) const;
  size_t max_bytes_per_cpu() const { return max_bytes_.load(std::memory_order_relaxed); }
  void set_max_bytes_per_cpu(size_t bytes) { max_bytes_.store(bytes, std::memory_order_relaxed); }
  uint16_t begin_of(size_t cl) const { return begin_[cl]; }
  uint16_t max_capacity(size_t cl) const { return cpu_cache_internal::MaxCapacity(cl); }

  // Fork: every CPU lock, in CPU order.
  void LockAll();
  void UnlockAll();
  void ResetLocksAfterFork();

  // Fast-path state, public so the inline asm can name it as memory operands.
  char* slabs_ = nullptr;
  uint32_t num_cpus_ = 0;

 private:
  struct alignas(64) CpuMeta {
    SpinLock lock;
    bool initialized = false;
    size_t capacity_bytes = 0;  // sum over classes of (end - begin) x size; written under lock, read racily
    std::atomic<uint64_t> last_active{0};
    uint64_t last_resize = 0;  // when unused capacity was last taken back, under lock
    uint32_t misses[kMaxClasses] = {};  // since the previous maintenance pass, under lock
    uint32_t alloc_misses[kMaxClasses] = {};  // of which malloc found the class empty
    // The same for the interval before, for FreeOverflowsOutnumber only: counted from zero
    // at each pass, a CPU that allocates a class and frees it as well looked like a consumer
    // for its first frees after a pass (its overflows outnumbering zero malloc misses), and
    // parked whole batches of big blocks in the transfer cache (5.4-6.6 MiB instead of
    // 1.2 in big_blocks_test when a pass fell just before the program freed everything).
    uint32_t prev_misses[kMaxClasses] = {};
    uint32_t prev_alloc_misses[kMaxClasses] = {};
  };

  SlabHeader* Header(int cpu, size_t cl) const {
    return reinterpret_cast<SlabHeader*>(slabs_ + (static_cast<size_t>(cpu) << kSlabShift)) + cl;
  }
  void** Slots(int cpu) const { return reinterpret_cast<void**>(slabs_ + (static_cast<size_t>(cpu) << kSlabShift)); }
  // The CPU the caller probably runs on, with its rseq area registered; -1 if none.
  int CallerCpu();
  // REQUIRES m.lock. Headers of a CPU no one used yet read all-zero, so every fast path
  // misses until this writes real ones.
  void InitCpu(int cpu);
  // REQUIRES meta(cpu).lock. Raises cl's capacity by up to n objects within the budget.
  void Grow(int cpu, size_t cl, uint32_t n);
  // A miss (of malloc: `alloc`, else of free): counts it, and grows the capacity unless it
  // is at its largest already.
  void MaybeGrow(int cpu, size_t cl, uint32_t n, bool alloc);
  uint32_t FetchCount(int cpu, size_t cl, uint32_t batch);
  // Whether class cl's frees overflowed m's CPU more than `factor` times as often as its
  // mallocs ran out since the last maintenance pass (a consumer of another CPU's objects).
  // Racy counts, read relaxed: a wrong answer costs a batch in the wrong place.
  static bool FreeOverflowsOutnumber(const CpuMeta& m, size_t cl, uint32_t factor);
  // REQUIRES meta(cpu).lock. Locks the headers of the classes in mask (all if nullptr) of
  // `cpu` for a remote change and fences; returns false if the fence failed (then nothing
  // is locked). After it, the caller owns [begin_[cl], current) of each locked class.
  bool LockClasses(int cpu, const bool* mask);
  // Moves objects [from, to) of class cl on `cpu` (locked) to the central list.
  void ReturnObjects(int cpu, size_t cl, uint32_t from, uint32_t to);
  size_t DrainLocked(int cpu);
  CpuMeta& meta(int cpu) const { return meta_[cpu]; }

  CentralFreeList* central_ = nullptr;
  const CentralShards* shards_ = nullptr;
  CentralFreeList& Central(int cpu, size_t cl) const { return CentralOf(central_, shards_, cpu, cl); }
  CpuMeta* meta_ = nullptr;
  uint16_t begin_[kMaxClasses] = {};
  std::atomic<size_t> max_bytes_{kDefaultMaxPerCpuCacheBytes};
  std::atomic<uint64_t> drains_{0};
  bool fence_ok_ = false;
};

// Both sequences: arm the section (store its descriptor's address in the thread's rseq
// area), read the CPU number, find the class's header in that CPU's slab, check, and commit
// with one 32-bit store of `current`. Push's store of p into slot[current] comes before the
// commit, into a slot that is not part of the stack yet: if the sequence is aborted, that
// slot is simply overwritten by the next push. The abort handler (after the signature the
// kernel checks) starts over. A CPU number of num_cpus_ or more (-1: no area) misses.
// The header and the slot are reached through a register that holds their address (a lea),
// not by base+index addressing in the loads and stores themselves: a free's push writes
// the header and slot the next malloc's pop reads, and with indexed operands that hand-over
// cost the pair loop 6.8-7.2 ns on the Intel host, with plain register operands 3.5 (the
// header alone: 3.75). The free's class look-up drops off the critical path with it:
// ClassOf's two loads give 3.5 ns, a constant class 3.2. (Four more instructions a pair.)
// The descriptor and the abort handler go to their own sections with the "?" flag (same
// section group as the code): when the linker drops a duplicate copy of an inline function,
// it drops them along with it.
#define TCM_RSEQ_PROLOGUE_AT(CS_FIELD, CPU_FIELD)                \
  ".pushsection __rseq_cs, \"aw?\"\n\t"                          \
  ".balign 32\n"                                                \
  ".Lcs%=:\n\t"                                                 \
  ".long 0, 0\n\t"                                              \
  ".quad .Lbegin%=, .Lcommit%= - .Lbegin%=, .Labort%=\n\t"      \
  ".popsection\n"                                               \
  ".Lretry%=:\n\t"                                              \
  "leaq .Lcs%=(%%rip), %[slab]\n\t"                             \
  "movq %[slab], %%fs:" CS_FIELD "\n"                           \
  ".Lbegin%=:\n\t"                                              \
  "movl %%fs:" CPU_FIELD ", %k[slab]\n\t"                       \
  "cmpl %[ncpu], %k[slab]\n\t"                                  \
  "jae %l[miss]\n\t"                                            \
  "shlq $19, %[slab]\n\t"                                       \
  "addq %[slabs], %[slab]\n\t"
// The area's fields through the offset in register operand `off` (RseqOffsetFast)...
#define TCM_RSEQ_PROLOGUE TCM_RSEQ_PROLOGUE_AT("8(%[off])", "4(%[off])")
// ... or at the constant operands cs_at and cpu_at (kBuiltInRseqOffset + 8 and + 4).
#define TCM_RSEQ_PROLOGUE_BUILT_IN TCM_RSEQ_PROLOGUE_AT("%c[cs_at]", "%c[cpu_at]")
// Tests that must see the abort path run define TCM_RSEQ_COUNT_ABORTS (and the counter)
// before including this header; their inlined copies of Pop/Push then count restarts.
#ifdef TCM_RSEQ_COUNT_ABORTS
extern "C" unsigned long tcm_rseq_aborts;
#define TCM_RSEQ_ABORT_HOOK "lock incq tcm_rseq_aborts(%%rip)\n\t"
#else
#define TCM_RSEQ_ABORT_HOOK ""
#endif
#define TCM_RSEQ_EPILOGUE                                       \
  ".Lcommit%=:\n\t"                                             \
  ".pushsection __rseq_failure, \"ax?\"\n\t"                     \
  ".byte 0x0f, 0xb9, 0x3d\n\t"                                  \
  ".long 0x53053053\n"                                          \
  ".Labort%=:\n\t"                                              \
  TCM_RSEQ_ABORT_HOOK                                           \
  "jmp .Lretry%=\n\t"                                           \
  ".popsection\n\t"
static_assert(kSlabShift == 19 && os::kRseqSignature == 0x53053053 && os::kRseqCsOffset == 8 &&
              os::kRseqCpuIdOffset == 4, "the asm spells these out");

// The sequences after the prologue. Pop: an empty (or locked) array misses, else the top
// object is read and `current` lowered. Push: a full (or locked) array misses, and so does
// p already on top; else p goes into slot[current] and `current` is raised.
#define TCM_POP_SEQUENCE                                        \
  "leaq (%[slab],%[cl],8), %[h]\n\t"  /* the header (why a lea: see above) */ \
  "movl (%[h]), %k[cur]\n\t"          /* current */            \
  "cmpw 6(%[h]), %w[cur]\n\t"         /* <= begin: empty (or locked) */ \
  "jbe %l[miss]\n\t"                                            \
  "leaq -8(%[slab],%[cur],8), %[slab]\n\t"                      \
  "movq (%[slab]), %[result]\n\t"                               \
  "decl %k[cur]\n\t"                                            \
  "movl %k[cur], (%[h])\n"             /* commit */             \
  TCM_RSEQ_EPILOGUE
#define TCM_PUSH_SEQUENCE                                       \
  "leaq (%[slab],%[cl],8), %[h]\n\t"  /* the header (why a lea: see above) */ \
  "movl (%[h]), %k[cur]\n\t"          /* current */            \
  "cmpw 4(%[h]), %w[cur]\n\t"         /* >= end: full (or locked) */ \
  "jae %l[miss]\n\t"                                            \
  "leaq (%[slab],%[cur],8), %[slab]\n\t"                        \
  "cmpq %[p], -8(%[slab])\n\t"        /* p on top already: double free? */ \
  "je %l[miss]\n\t"                                             \
  "movq %[p], (%[slab])\n\t"                                    \
  "incl %k[cur]\n\t"                                            \
  "movl %k[cur], (%[h])\n"             /* commit */             \
  TCM_RSEQ_EPILOGUE

template <bool kBuiltInOffset>
TCM_ALWAYS_INLINE void* CpuCache::Pop(size_t cl) {
  void* result;
  uintptr_t slab;
  uintptr_t cur;
  uintptr_t h;
  if constexpr (kBuiltInOffset) {
    asm volatile goto(TCM_RSEQ_PROLOGUE_BUILT_IN TCM_POP_SEQUENCE
             : [result] "=&r"(result), [slab] "=&r"(slab), [cur] "=&r"(cur), [h] "=&r"(h)
             : [cs_at] "i"(os::kBuiltInRseqOffset + os::kRseqCsOffset),
               [cpu_at] "i"(os::kBuiltInRseqOffset + os::kRseqCpuIdOffset), [ncpu] "m"(num_cpus_),
               [slabs] "m"(slabs_), [cl] "r"(cl)
             : "cc", "memory"
             : miss);
  } else {
    asm volatile goto(TCM_RSEQ_PROLOGUE TCM_POP_SEQUENCE
             : [result] "=&r"(result), [slab] "=&r"(slab), [cur] "=&r"(cur), [h] "=&r"(h)
             : [off] "r"(os::RseqOffsetFast()), [ncpu] "m"(num_cpus_), [slabs] "m"(slabs_), [cl] "r"(cl)
             : "cc", "memory"
             : miss);
  }
  // Slots below `current` never hold nullptr; saying so spares callers a test.
  if (result == nullptr) __builtin_unreachable();
  TCM_TSAN_ACQUIRE(result);
  return result;
miss:
  return nullptr;
}

template <bool kBuiltInOffset>
TCM_ALWAYS_INLINE bool CpuCache::Push(size_t cl, void* p) {
  TCM_TSAN_RELEASE(p);
  uintptr_t slab;
  uintptr_t cur;
  uintptr_t h;
  if constexpr (kBuiltInOffset) {
    asm volatile goto(TCM_RSEQ_PROLOGUE_BUILT_IN TCM_PUSH_SEQUENCE
             : [slab] "=&r"(slab), [cur] "=&r"(cur), [h] "=&r"(h)
             : [cs_at] "i"(os::kBuiltInRseqOffset + os::kRseqCsOffset),
               [cpu_at] "i"(os::kBuiltInRseqOffset + os::kRseqCpuIdOffset), [ncpu] "m"(num_cpus_),
               [slabs] "m"(slabs_), [cl] "r"(cl), [p] "r"(p)
             : "cc", "memory"
             : miss);
  } else {
    asm volatile goto(TCM_RSEQ_PROLOGUE TCM_PUSH_SEQUENCE
             : [slab] "=&r"(slab), [cur] "=&r"(cur), [h] "=&r"(h)
             : [off] "r"(os::RseqOffsetFast()), [ncpu] "m"(num_cpus_), [slabs] "m"(slabs_), [cl] "r"(cl), [p] "r"(p)
             : "cc", "memory"
             : miss);
  }
  return true;
miss:
  return false;
}

// (The TCM_RSEQ_* macros stay defined: cpu_cache.cc builds its batch sequences from them.)

}  // namespace tcm

#endif  // TCMALLOC_CPU_CACHE_H_
