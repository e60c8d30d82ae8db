// Slow paths of the front end: thread-cache creation and teardown, large objects, aligned
// allocation, realloc/calloc, pointer validation and the heap totals.
#include "api/allocation.h"

#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "core/block_lookup.h"
#include "core/freelist_link.h"
#include "platform/fault_handler.h"
#include "platform/os.h"
#include "platform/stack_trace.h"

namespace tcm {

constinit ThreadCache g_empty_cache;
__thread ThreadCache* tls_cache TCM_INITIAL_EXEC = &g_empty_cache;
__thread int64_t tls_sample_left TCM_INITIAL_EXEC = 0;
__thread uint64_t tls_sample_rng TCM_INITIAL_EXEC = 0;
// Set once the thread-exit hook ran: later allocations of this thread bypass the cache
// (a new cache would never be returned).
static __thread bool tls_exiting TCM_INITIAL_EXEC = false;

static pthread_key_t g_exit_key;

static void OnThreadExit(void* arg) {
  auto* tc = static_cast<ThreadCache*>(arg);
  tls_exiting = true;
  tls_cache = &g_empty_cache;
  g_caches.Destroy(tc);
  // A lot may just have become free: the page heap's surplus rule released the bulk while
  // the cache's spans came back; this lets idle transfer caches and runs go too.
  g_scavenger.Tick();
}

void InitThreadExitHook() {
  if (pthread_key_create(&g_exit_key, OnThreadExit) != 0) Crash("pthread_key_create failed");
}

static void ArmCountdown(int64_t* left, uint64_t* rng);

// Returns the calling thread's real cache, creating it; nullptr while the thread exits
// or when metadata memory ran out (callers then go straight to the central lists).
static ThreadCache* GetOrCreateCache() {
  ThreadCache* tc = tls_cache;
  if (TCM_LIKELY(tc != &g_empty_cache)) return tc;
  EnsureInitialized();
  if (tls_exiting) return nullptr;
  tc = g_caches.Create(&g_arena, g_central, &g_central_shards);
  if (tc == nullptr) return nullptr;
  tc->rng_ = reinterpret_cast<uintptr_t>(tc) ^ Scavenger::NowNs();
  ArmCountdown(&tc->sample_left_, &tc->rng_);
  tls_cache = tc;  // before setspecific, which may itself call malloc
  pthread_setspecific(g_exit_key, tc);
  return tc;
}

[[noreturn]] static void InvalidPointer(const char* who, const void* p) {
  Crash("%s: invalid pointer %p", who, p);
}

void ArmBlockStartTest(bool hardened) {
  static_assert(kNumClasses <= PageMap::kClassSlots);
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    if (hardened) {
      g_pagemap.ArmBlockStartTest(cl, SizeMap::kDivisionMagic[cl]);
    } else {
      g_pagemap.PassEveryBlock(cl);
    }
  }
}

void DeallocateNotSmallBlockStart(void* p, size_t cl) noexcept {
  if (cl == 0) return DeallocateSlow(p);
  return NotABlockStart(p, cl, "free()");
}

TCM_NO_IPA void NotABlockStart(void* p, size_t cl, const char* who) noexcept {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  const size_t size = SizeMap::ClassSize(cl);
  Crash("%s: invalid pointer %p (%zu bytes into a block of size class %zu, %zu bytes)", who, p,
        static_cast<size_t>(g_pagemap.SpanOffset(addr, cl)) % size, cl, size);
}

// ---- large objects: whole page runs ----

// record_length: the run's length goes into its first page's class-map entry
// (PageMap::SetLargeLength), for realloc's fast path; sampled runs are not recorded (their
// usable size is the sample's, not the run's).
static Span* AllocateLargeSpan(size_t size, size_t align_pages, bool record_length = true) {
  if (size > kMaxAllocation) return nullptr;
  EnsureInitialized();
  Length n = Length::FromBytesRoundUp(size == 0 ? 1 : size);
  Span* span;
  bool new_memory;
  {
    SpinLockHolder h(g_pageheap.lock());
    span = align_pages > 1 ? g_pageheap.NewAligned(n, Length{align_pages}) : g_pageheap.New(n);
    if (span != nullptr && record_length) g_pagemap.SetLargeLength(span->start, span->length.n);
    new_memory = g_pageheap.TakeNewMemoryCarved();
  }
  // The heap grows resident: the central lists' kept empty spans go back first.
  if (TCM_UNLIKELY(new_memory)) NewMemoryWasCarved();
  return span;
}

// TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD: report big allocations with a stack trace; the
// threshold grows by 1/8 after each report, so a program cannot flood stderr.
static std::atomic<size_t> g_next_report{0};  // 0 = reporting off

void SetLargeAllocReportThreshold(size_t bytes) { g_next_report.store(bytes, std::memory_order_relaxed); }

static void MaybeReportLarge(size_t size, const void* p) {
  size_t threshold = g_next_report.load(std::memory_order_relaxed);
  if (threshold == 0) return;
  if (size < threshold) return;
  if (!g_next_report.compare_exchange_strong(threshold, threshold + threshold / 8)) return;
  void* pcs[32];
  int depth = os::GetStackTrace(pcs, 32, 2);
  char buf[1024];
  Printer out(buf, sizeof(buf));
  out.Printf("tcmalloc: large alloc %zu bytes == %p @ ", size, p);
  for (int i = 0; i < depth; ++i) out.Printf(" %p", pcs[i]);
  out.Printf("\n");
  os::WriteStderr(buf, out.written());
}

static void* AllocateLarge(size_t size, size_t align_pages) {
  Span* span = AllocateLargeSpan(size, align_pages);
  if (span == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  MaybeReportLarge(size, span->start_ptr());
  return span->start_ptr();
}

// Small object of class cl without a thread cache (thread exit, no metadata memory).
static void* AllocateFromCentral(size_t cl) {
  void* start;
  void* end;
  if (CentralForCaller(cl).RemoveRange(&start, &end, 1) == 0) return nullptr;
  return start;
}

// ---- sampling ----

// What the caller asked for. memalign & co. allocate a rounded class size (or page run);
// the sample record and the hooks report the request, not the rounding. It travels down as
// an argument: a thread-local would still be set while the hooks run, and a malloc made by
// a hook would then be taken for the aligned request (issue 16, defect 1).
struct Request {
  size_t size;
  size_t align;  // 0 = malloc's alignment
};

// The countdown (ThreadCache::sample_left_ in per-thread mode, tls_sample_left in per-CPU
// mode; both charged by malloc's fast path) runs to the nearest of three events: the next
// heap sample (TCMALLOC_SAMPLE_PARAMETER), the next guarded sample
// (TCMALLOC_GUARDED_SAMPLE_RATE), and the next housekeeping tick, which comes every
// Scavenger::kHousekeepingBytes of allocation so that maintenance gets its turn even when a
// program only ever hits its cache. Each keeps its bytes-to-go here (a thread uses one mode
// only, so one set is enough); when the countdown expires all three are charged with what
// was allocated since it was armed. The fast path costs nothing more than the sampling
// countdown did: same subtraction, branch.
static constexpr int64_t kSamplerOff = int64_t{1} << 62;  // bytes-to-go of a sampler that is off
static __thread int64_t tls_heap_left TCM_INITIAL_EXEC = kSamplerOff;
static __thread int64_t tls_guard_left TCM_INITIAL_EXEC = kSamplerOff;
static __thread int64_t tls_tick_left TCM_INITIAL_EXEC = 0;
static __thread int64_t tls_armed TCM_INITIAL_EXEC = 0;

enum : unsigned { kHeapSampleDue = 1, kGuardedDue = 2 };

// Next gap of a sampler whose mean is *setting (<= 0: off).
static int64_t NextGap(uint64_t* rng, const int64_t* setting) {
  const int64_t mean = __atomic_load_n(setting, __ATOMIC_RELAXED);
  return mean > 0 ? NextSampleGap(rng, mean) : kSamplerOff;
}

static void Rearm(int64_t* left) {
  int64_t next = tls_tick_left;
  if (tls_heap_left < next) next = tls_heap_left;
  if (tls_guard_left < next) next = tls_guard_left;
  tls_armed = next;
  *left = next;
}

// Guarded sampling's CPU bound: a guarded block costs ~30 us (two stack captures, two
// mprotect and an madvise), so its count per second must not follow the allocation rate
// alone. Programs that allocate without touching the memory reach 100 GB/s of "allocation"
// (t-test1 at 4 KiB: 64 guarded blocks per 40 ms run at the default 64 MiB, 2.2% of its
// time). So guarded blocks are also at least rate / kGuardedBytesPerNs ns apart, process-
// wide: the rate a program allocating 10 GB/s would see (6.7 ms, 150 a second at the
// default), which no real program outruns; a rate of 1 (tests: every block) is not limited.
static constexpr int64_t kGuardedBytesPerNs = 10;
static constinit std::atomic<uint64_t> g_next_guarded_ns{0};

static bool GuardedSpacingAllows(int64_t rate, uint64_t now) {
  const uint64_t next = g_next_guarded_ns.load(std::memory_order_relaxed);
  if (now < next) return false;
  // A lost race lets two threads through at once: the bound is on the rate, not exact.
  g_next_guarded_ns.store(now + static_cast<uint64_t>(rate / kGuardedBytesPerNs), std::memory_order_relaxed);
  return true;
}

// Starts a thread's countdown *left (its random state *rng).
static void ArmCountdown(int64_t* left, uint64_t* rng) {
  tls_heap_left = NextGap(rng, &g_options.sample_parameter);
  tls_guard_left = NextGap(rng, &g_options.guarded_sample_rate);
  tls_tick_left = Scavenger::kHousekeepingBytes;
  Rearm(left);
}

// The owner's side of "idle caches shrink" in per-thread mode: every kThreadCacheIdleNs the
// thread's own cache gives back half of what it never needed since the previous collection
// (the design's L/2 low-water rule), so a thread that once cached megabytes and now does
// light work drains them. Only the owner may touch its lists, hence here and not in the
// maintenance pass (which drains idle CPUs' caches in per-CPU mode).
static constexpr uint64_t kThreadCacheIdleNs = 1'000'000'000;
static __thread uint64_t tls_cache_collected_ns TCM_INITIAL_EXEC = 0;

static void ShrinkIdleThreadCache(ThreadCache* tc, uint64_t now) {
  if (now - tls_cache_collected_ns < kThreadCacheIdleNs) return;
  if (tls_cache_collected_ns != 0) tc->Scavenge();  // the first call only starts the clock
  tls_cache_collected_ns = now;
}

// The countdown expired after `consumed` bytes since it was armed: charges the three
// events with them; the tick, if that was its turn, starts its next interval.
static void ChargeConsumed(int64_t consumed) {
  tls_heap_left -= consumed;
  tls_guard_left -= consumed;
  tls_tick_left -= consumed;
  if (tls_tick_left < 0) tls_tick_left = Scavenger::kHousekeepingBytes;
}

// A sampler that was off when its countdown was armed and is on now: it needs its first
// gap (the slow path gives it one).
static bool TurnedOnSinceArmed(int64_t left, const int64_t* setting) {
  return left > kSamplerOff / 2 && __atomic_load_n(setting, __ATOMIC_RELAXED) > 0;
}

// Which samplers want this allocation, which the fast path did not serve (0: none). The
// fast path charged the countdown only when it went negative there (and then left). When
// the countdown expires, runs the housekeeping tick and stores its time in *ticked (else 0).
// The one function both front ends' slow paths call for their countdown.
static unsigned SampleDue(int64_t* left, uint64_t* rng, size_t size, uint64_t* ticked, uint64_t now = 0) {
  *ticked = 0;
  if (*left >= 0) {
    *left -= static_cast<int64_t>(size);
    if (*left >= 0) return 0;
  }
  *ticked = g_scavenger.Tick(now);  // a clock read; a maintenance pass if the last one is old enough
  ChargeConsumed(tls_armed - *left);  // *left is negative: overshot by that much
  unsigned due = 0;
  const int64_t period = __atomic_load_n(&g_options.sample_parameter, __ATOMIC_RELAXED);
  const int64_t rate = __atomic_load_n(&g_options.guarded_sample_rate, __ATOMIC_RELAXED);
  // A sampler turned on at run time starts with a gap like any other, not a sample; one
  // turned off stops at its next expiry.
  if (tls_heap_left > kSamplerOff / 2) {
    if (period > 0) tls_heap_left = NextSampleGap(rng, period);
  } else if (tls_heap_left < 0) {
    if (period > 0) due |= kHeapSampleDue;
    tls_heap_left = NextGap(rng, &g_options.sample_parameter);
  }
  if (tls_guard_left > kSamplerOff / 2) {
    if (rate > 0) tls_guard_left = NextSampleGap(rng, rate);
  } else if (tls_guard_left < 0) {
    if (rate > 0 && GuardedSpacingAllows(rate, *ticked)) due |= kGuardedDue;
    tls_guard_left = NextGap(rng, &g_options.guarded_sample_rate);
  }
  Rearm(left);
  return due;
}

static unsigned SampleDue(ThreadCache* tc, size_t size) {
  uint64_t ticked;
  const unsigned due = SampleDue(&tc->sample_left_, &tc->rng_, size, &ticked);
  if (ticked != 0) ShrinkIdleThreadCache(tc, ticked);
  return due;
}

// Per-CPU mode: the thread-local countdown. A thread's first call seeds it (rng 0 = not
// yet), so a new thread's first allocation is not sampled by construction. Each expiry
// also tells the CPU cache that this CPU is in use.
static unsigned SampleDueTls(size_t size) {
  if (TCM_UNLIKELY(tls_sample_rng == 0)) {
    tls_sample_rng = ((reinterpret_cast<uintptr_t>(&tls_sample_left) * 0x9e3779b97f4a7c15ull) ^ Scavenger::NowNs()) | 1;
    ArmCountdown(&tls_sample_left, &tls_sample_rng);
  }
  // Before the tick: the pass it may run must not take this CPU for idle. One clock read
  // for both (blocks of 32 KiB tick every other call: a second read was 0.7% of t-test1).
  uint64_t now = 0;
  if (tls_sample_left < static_cast<int64_t>(size)) g_cpu_cache.MarkActive(now = Scavenger::NowNs());
  uint64_t ticked;
  return SampleDue(&tls_sample_left, &tls_sample_rng, size, &ticked, now);
}

// The tick without the slow path's walk to it (hooks, initialisation, the samplers' cases):
// from 64 KiB up every malloc ticks (fastpath pair 128 KiB: 22.5-23 -> 18-18.6 ns). The
// coarse clock moves every few ms: while it reads what this thread's last tick read, the
// CPU was marked active and the pass found not due at that time already, so both are
// skipped (-> 14.6-14.8 ns; 64 KiB 14-14.7 -> 10.4; gperftools 7); a thread that moved to
// another CPU within that time marks it at its next tick.
static __thread uint64_t tls_last_tick_ns TCM_INITIAL_EXEC = 0;

// The clock read and the tick of both TickOnly variants (tc: per-thread mode's cache,
// nullptr in per-CPU mode), after their countdown is re-armed: a tail call that keeps no
// value of theirs live across its calls, so they save no registers (callgrind, per-thread
// fastpath pair 65536: TickOnly 31 -> 20 instructions a call, plus 7 here).
TCM_NOINLINE static bool TickIfClockMoved(ThreadCache* tc) {
  const uint64_t now = Scavenger::NowNs();
  if (now == tls_last_tick_ns) return true;
  tls_last_tick_ns = now;
  if (tc == nullptr) g_cpu_cache.MarkActive(now);  // before the tick: its pass must not take this CPU for idle
  g_scavenger.Tick(now);
  if (tc != nullptr) ShrinkIdleThreadCache(tc, now);
  return true;
}

// Both TickOnly variants once their countdown `left` expired after `consumed` bytes: false
// when a sampler is due, or one was turned on since its countdown was armed (the slow path
// gives it its first gap); else the tick's turn: charge, re-arm, tick.
static TCM_ALWAYS_INLINE bool TickAfter(int64_t consumed, int64_t* left, ThreadCache* tc) {
  if (tls_heap_left - consumed < 0 || tls_guard_left - consumed < 0) return false;
  if (TurnedOnSinceArmed(tls_heap_left, &g_options.sample_parameter) ||
      TurnedOnSinceArmed(tls_guard_left, &g_options.guarded_sample_rate))
    return false;
  ChargeConsumed(consumed);
  Rearm(left);
  return TickIfClockMoved(tc);
}

bool TickOnly(size_t size) noexcept {
  if (TCM_UNLIKELY(tls_sample_rng == 0)) return false;  // the slow path starts the countdown
  // The fast path gave the request back to the countdown before calling: charged here.
  return TickAfter(tls_armed - (tls_sample_left - static_cast<int64_t>(size)), &tls_sample_left, nullptr);
}

bool TickOnly(ThreadCache* tc) noexcept {
  // The fast path charged the request already: consumed counts it.
  return TickAfter(tls_armed - tc->sample_left_, &tc->sample_left_, tc);
}

// Our own code's address range, so stacks can start at the program's frame.
static uintptr_t g_text_lo = 0, g_text_hi = 0;
static std::atomic<int> g_text_state{0};  // 0 unknown, 1 shared library, 2 static link

int CaptureUserStack(void** pcs, int max_depth) {
  if (g_text_state.load(std::memory_order_acquire) == 0) {
    uintptr_t lo, hi;
    bool main_program = true;
    if (os::ModuleTextRange(reinterpret_cast<const void*>(&CaptureUserStack), &lo, &hi, &main_program) &&
        !main_program) {
      g_text_lo = lo;
      g_text_hi = hi;
      g_text_state.store(1, std::memory_order_release);
    } else {
      g_text_state.store(2, std::memory_order_release);
    }
  }
  void* raw[os::kMaxStackDepth + 8];
  int depth = os::GetStackTrace(raw, os::kMaxStackDepth + 8, 0);
  int first = 0;
  if (g_text_state.load(std::memory_order_relaxed) == 1) {
    while (first < depth && reinterpret_cast<uintptr_t>(raw[first]) >= g_text_lo &&
           reinterpret_cast<uintptr_t>(raw[first]) < g_text_hi)
      ++first;
  } else {
    first = depth < 3 ? depth : 3;  // statically linked: our frames are not told apart by address
  }
  int n = depth - first;
  if (n > max_depth) n = max_depth;
  for (int i = 0; i < n; ++i) pcs[i] = raw[first + i];
  return n;
}

// A sampled allocation: its own page run, carrying the sample's record.
TCM_NOINLINE static void* AllocateSampled(Request request) {
  void* pcs[os::kMaxStackDepth];
  const int depth = CaptureUserStack(pcs, os::kMaxStackDepth);
  const size_t size = request.size;
  const size_t align = request.align;
  // The run holds the class size an unsampled allocation would have had (a class can be
  // larger than its request rounded up to pages), and the block reports that size, so
  // GetAllocatedSize agrees with nallocx whether or not the block was sampled.
  const size_t usable = GoodSize(size, align);
  Span* span = AllocateLargeSpan(usable > size ? usable : size, align > kPageSize ? align >> kPageShift : 1,
                                 /*record_length=*/false);
  if (span == nullptr) return nullptr;
  const int64_t period = __atomic_load_n(&g_options.sample_parameter, __ATOMIC_RELAXED);
  // Without a record (no metadata memory) it is simply an unsampled large block.
  span->sample = g_samples.Add(&g_arena, size, usable, align, period, pcs, depth);
  return span->start_ptr();
}

// ---- faults: guarded blocks, and our own code tripping over a corrupted free list ----

// Our library's code, when it is a shared library (a static link cannot tell our code from
// the program's): a fault there can only come from metadata the program overwrote, most
// often a forged thread-cache link (a write after free, or a block freed while in use).
// Looked up in the handler, not at start-up: the first malloc may come from inside the
// dynamic loader, and most programs never fault.
static void OnFault(const void* addr, const void* pc) {
  g_guarded.OnFault(addr);  // does not return if addr is a guarded block's
  uintptr_t lo = 0, hi = 0;
  bool main_program = true;
  if (!os::ModuleTextRange(reinterpret_cast<const void*>(&OnFault), &lo, &hi, &main_program) || main_program) return;
  const uintptr_t at = reinterpret_cast<uintptr_t>(pc);
  if (at < lo || at >= hi) return;
  // A non-canonical address (what a forged, encoded link usually decodes to) faults with
  // no address.
  if (addr == nullptr)
    Crash("fault at pc %p inside the allocator (a wild address): a free list was corrupted by a write after "
          "free, a double free or a free of a block still in use",
          pc);
  Crash("fault at pc %p reading %p inside the allocator: a free list was corrupted by a write after free, a "
        "double free or a free of a block still in use",
        pc, addr);
}

void InstallFaultReporting() {
  static std::atomic<bool> installed{false};
  if (installed.load(std::memory_order_acquire) || installed.exchange(true)) return;
  if (!os::InstallFaultHandler(OnFault)) Log("could not install the SIGSEGV handler for fault reports");
}

// A block on a guarded page (core/guarded_alloc.h), or nullptr if this one cannot be
// (too big, an aligned request, every slot taken): it is then allocated normally.
TCM_NOINLINE static void* AllocateGuarded(Request request) {
  if (request.size > GuardedPool::kSlotBytes || request.align != 0) return nullptr;
  InstallFaultReporting();
  void* pcs[GuardedPool::kStackDepth];
  const int depth = CaptureUserStack(pcs, GuardedPool::kStackDepth);
  return g_guarded.Allocate(request.size, SizeMap::ClassSize(SizeMap::ClassIndex(request.size)), &g_arena, pcs,
                            depth);
}

TCM_NOINLINE static void DeallocateGuarded(void* p) {
  void* pcs[GuardedPool::kStackDepth];
  const int depth = CaptureUserStack(pcs, GuardedPool::kStackDepth);
  g_guarded.Deallocate(p, pcs, depth);
}

// A sampler wants this allocation: a heap sample wins (the profile must stay unbiased; the
// guarded one comes next time). nullptr: allocate it normally.
static void* AllocateSampledOrGuarded(unsigned due, Request request) {
  if ((due & kHeapSampleDue) != 0) return AllocateSampled(request);
  return AllocateGuarded(request);
}

// Per-CPU mode's slow path of malloc: sampling, large objects, and the CPU cache's miss.
static void* AllocateFromCpuCache(size_t size, Request request) {
  if (const unsigned due = SampleDueTls(size); TCM_UNLIKELY(due != 0)) {
    if (void* p = AllocateSampledOrGuarded(due, request)) return p;
  }
  if (size > kMaxSize) return AllocateLarge(size, 1);
  const size_t cl = SizeMap::ClassIndex(size);
  void* result = g_cpu_cache.Pop(cl);
  if (result == nullptr) result = g_cpu_cache.AllocateMiss(cl);
  if (result == nullptr) errno = ENOMEM;
  return result;
}

// size: what to allocate (a class size for an aligned request); request: what was asked.
static void* AllocateUnhooked(size_t size, Request request) {
  if (TCM_UNLIKELY(size > kMaxAllocation)) {  // also keeps the sampling countdown in range
    errno = ENOMEM;
    return nullptr;
  }
  EnsureInitialized();
  if (g_cpu_cache.active()) return AllocateFromCpuCache(size, request);
  ThreadCache* tc = GetOrCreateCache();
  if (tc != nullptr) {
    if (const unsigned due = SampleDue(tc, size); TCM_UNLIKELY(due != 0)) {
      if (void* p = AllocateSampledOrGuarded(due, request)) return p;
    }
  }
  if (size > kMaxSize) return AllocateLarge(size, 1);
  const size_t cl = SizeMap::ClassIndex(size);
  void* result;
  if (tc == nullptr) {
    result = AllocateFromCentral(cl);
  } else if ((result = PopFromCache(tc, cl)) == nullptr) {
    result = tc->FetchFromCentral(cl);
  }
  if (result == nullptr) errno = ENOMEM;
  return result;
}

static size_t AlignedClass(size_t size, size_t align);

static void* AllocateSlowFor(size_t size, Request request) {
  g_scavenger.OnSlowPath();
  if (TCM_LIKELY(!HooksActive())) return AllocateUnhooked(size, request);
  // The heap checker's tail pad (malloc_hook.h): here, where every hooked small allocation
  // passes (the limits are 0 while hooks are installed), so no fast path tests for it.
  const size_t asked = request.size;
  const size_t pad = HookedTailPad();
  if (request.align == 0 && size < kMaxAllocation) {
    size += pad;
    request.size = size;
  } else if (request.align != 0 && asked + pad <= kMaxSize) {
    if (const size_t cl = AlignedClass(asked + pad, request.align)) size = SizeMap::ClassSize(cl);
  }
  void* result = AllocateUnhooked(size, request);
  InvokeNewHooks(result, asked);
  return result;
}

void* AllocateSlow(size_t size) noexcept { return AllocateSlowFor(size, Request{size, 0}); }

// Frees a page-run object. Validates p against its span under the page heap lock.
static void DeallocateLarge(void* p) {
  const PageId page = PageId::FromPtr(p);
  if ((reinterpret_cast<uintptr_t>(p) & (kPageSize - 1)) != 0) InvalidPointer("free()", p);
  Span* span = g_pagemap.GetSpan(page);
  if (span == nullptr) InvalidPointer("free()", p);
  SampleRecord* sample;
  bool surplus_released;
  {
    SpinLockHolder h(g_pageheap.lock());
    if (span->start != page || span->sizeclass != 0) InvalidPointer("free()", p);
    if (span->location != Span::kInUse) Crash("free(): invalid pointer %p (double free)", p);
    sample = span->sample;
    span->sample = nullptr;
    g_pagemap.SetClass(page, 0, page);  // the recorded length (SetLargeLength) goes first
    g_pageheap.Delete(span);
    surplus_released = g_pageheap.TakeSurplusReleased();
  }
  if (sample != nullptr) g_samples.Remove(sample);
  // A huge block freed: the kept spans go too (one in a huge page keeps it from being
  // released whole).
  if (TCM_UNLIKELY(surplus_released)) SurplusWasReleased();
}

void CollectGarbage(ThreadCache* tc, size_t freed_size) noexcept {
  g_scavenger.OnSlowPath();
  tc->CheckSize(freed_size);
}

void DeallocateSlow(void* p) noexcept {
  if (TCM_UNLIKELY(HooksActive())) InvokeDeleteHooks(p);
  if (p == nullptr) return;
  g_scavenger.OnSlowPath();
  // Guarded blocks are in no span: the pagemap gives them class 0, so they arrive here.
  if (TCM_UNLIKELY(g_guarded.Contains(p))) return DeallocateGuarded(p);
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  // Before initialisation nothing is ours (and the class map is not set up yet).
  if ((addr >> kAddressBits) != 0 || !g_pagemap.initialized()) InvalidPointer("free()", p);
  const auto [cl, block_start] = LookUpSmallBlock(addr);
  if (cl == 0) return DeallocateLarge(p);
  if (!block_start) return NotABlockStart(p, cl, "free()");
  if (g_cpu_cache.active()) {
    if (g_cpu_cache.IsTopObject(cl, p)) Crash("free(): invalid pointer %p (double free)", p);
    if constexpr (kDebugBuild) {
      DebugCheckBlockStart(p, cl);
      DebugPoison(p, SizeMap::ClassSize(cl));
    }
    if (!g_cpu_cache.Push(cl, p)) g_cpu_cache.DeallocateMiss(cl, p);
    return;
  }
  ThreadCache* tc = tls_cache;
  if (p == tc->heads_[cl]) Crash("free(): invalid pointer %p (double free)", p);
  if constexpr (kDebugBuild) {
    DebugCheckBlockStart(p, cl);
    DebugPoison(p, SizeMap::ClassSize(cl));
  }
  tc = GetOrCreateCache();
  if (tc == nullptr) {
    SetLink(p, nullptr);
    CentralForCaller(cl).InsertRange(p, 1);
    return;
  }
  tc->PushSlow(p, cl);
}

// The per-CPU path that loads the rseq offset (allocation.h: "Two variants").
void DeallocatePerCpuLoadedOffset(void* p) noexcept { DeallocatePerCpuAt<false>(p); }

void DeallocatePerCpuMiss(void* p, size_t cl) noexcept {
  if (g_cpu_cache.IsTopObject(cl, p)) Crash("free(): invalid pointer %p (double free)", p);
  g_scavenger.OnSlowPath();
  g_cpu_cache.DeallocateMiss(cl, p);
}

// ---- debug build checks ----

void DebugPoison(void* p, size_t size) {
  // The first word is the free-list link.
  size_t n = size < kPoisonBytes ? size : kPoisonBytes;
  if (n > sizeof(void*)) memset(static_cast<char*>(p) + sizeof(void*), kFreedPattern, n - sizeof(void*));
}

void DebugCheckPoison(void* p, size_t size) {
  size_t n = size < kPoisonBytes ? size : kPoisonBytes;
  const unsigned char* b = static_cast<const unsigned char*>(p);
  for (size_t i = sizeof(void*); i < n; ++i)
    if (b[i] != kFreedPattern) Crash("heap corruption: %p (%zu-byte block) was written after it was freed", p, size);
}

void DebugCheckBlockStart(void* p, size_t cl) {
  const Block b = FindBlock(g_pagemap, reinterpret_cast<uintptr_t>(p));
  if (!b.found() || b.cl != cl) InvalidPointer("free()", p);
  if (b.start != reinterpret_cast<uintptr_t>(p)) Crash("free(): invalid pointer %p (not the start of a block)", p);
}

void VerifyHeap() {
  EnsureInitialized();
  ForEachCentral([](CentralFreeList& c, size_t) { c.Verify(); });
  // The calling thread's cache: every object is a block of the list's class.
  ThreadCache* tc = tls_cache;
  if (tc != &g_empty_cache) {
    for (size_t cl = 1; cl < kNumClasses; ++cl) {
      uint32_t n = 0;
      for (void* o = tc->heads_[cl]; o != nullptr; o = GetLink(o)) {
        TCM_CHECK(g_pagemap.ClassOf(reinterpret_cast<uintptr_t>(o)) == cl);
        TCM_CHECK(++n <= tc->Length(cl));
      }
      TCM_CHECK(n == tc->Length(cl));
    }
  }
  // Every object cached on a CPU is a block of its array's class (racy with other threads'
  // pops and pushes, but any object that was ever in an array has that class).
  for (int cpu = 0; cpu < g_cpu_cache.num_cpus(); ++cpu) {
    for (size_t cl = 1; cl < kNumClasses && g_cpu_cache.CpuBytes(cpu) != 0; ++cl)
      g_cpu_cache.ForEachObject(cpu, cl, [cl](void* o) { TCM_CHECK(g_pagemap.ClassOf(reinterpret_cast<uintptr_t>(o)) == cl); });
  }
  SpinLockHolder h(g_pageheap.lock());
  g_pageheap.Verify();
  // Every in-use span is found by a pagemap walk, with its pages mapped as promised.
  size_t in_use = 0;
  g_pageheap.ForEachSpanFrom(PageId{0}, [&](Span* s) {
    if (s->location == Span::kInUse) {
      ++in_use;
      TCM_CHECK(g_pagemap.GetSpan(s->last()) == s);
      if (s->sizeclass != 0)
        for (Length i{0}; i < s->length; i = i + Length{1})
          TCM_CHECK(g_pagemap.ClassOf((s->start + i).addr()) == s->sizeclass);
    }
    return true;
  });
  TCM_CHECK(in_use == g_pageheap.stats().in_use_spans);
  const PageHeapStats& st = g_pageheap.stats();
  TCM_CHECK(st.free_bytes + st.unmapped_bytes <= st.system_bytes);
}

// ---- the rest of the API ----

// The smallest class that holds `size` and whose size is a multiple of `align` (its objects
// sit at multiples of their size from a page-aligned span start, hence aligned); 0 if none.
// REQUIRES size <= kMaxSize, 16 < align < kPageSize.
static size_t AlignedClass(size_t size, size_t align) {
  for (size_t cl = SizeMap::ClassIndex(size < align ? align : size); cl < kNumClasses; ++cl)
    if (SizeMap::ClassSize(cl) % align == 0) return cl;
  return 0;
}

void* AllocateAligned(size_t align, size_t size) {
  if (align <= 16) {
    // Every class >= 16 B is a multiple of 16; only the 8-byte class needs bumping.
    if (align == 16 && size < 16) size = 16;
    return Allocate(size);
  }
  if (size <= kMaxSize && align < kPageSize) {
    if (const size_t cl = AlignedClass(size, align)) {
      // Allocate()'s fast path for class cl; its miss carries the request to the slow path.
      const size_t class_size = SizeMap::ClassSize(cl);
      ThreadCache* tc = tls_cache;
      // The empty cache's lists are empty, so its countdown is never written.
      if (TCM_LIKELY(class_size < g_alloc_limit) && tc->heads_[cl] != nullptr &&
          (tc->sample_left_ -= static_cast<int64_t>(class_size)) >= 0)
        return PopFromCache(tc, cl);
      return AllocateSlowFor(class_size, Request{size, align});
    }
  }
  if (size > kMaxAllocation || align > kMaxAllocation) {
    errno = ENOMEM;
    return nullptr;
  }
  size_t align_pages = align <= kPageSize ? 1 : align >> kPageShift;
  void* result = AllocateLarge(size + HookedTailPad(), align_pages);  // the checker's pad, hooks see size
  if (TCM_UNLIKELY(HooksActive())) InvokeNewHooks(result, size);
  return result;
}

size_t UsableSize(const void* p, const char* who) {
  size_t n = OwnedSize(p);
  if (n == 0) InvalidPointer(who, p);
  return n;
}

// A large block grows into the free pages right after it, or gives back its tail, without
// copying (what makes realloc loops cheap). Sampled blocks keep their record as they are.
static bool ResizeLargeInPlace(void* p, size_t size) {
  const Length want = Length::FromBytesRoundUp(size);
  SpinLockHolder h(g_pageheap.lock());
  Span* span = g_pagemap.GetSpan(PageId::FromPtr(p));
  if (span == nullptr || span->location != Span::kInUse || span->sizeclass != 0 || span->sample != nullptr)
    return false;
  if (want < span->length) {
    g_pageheap.ShrinkInPlace(span, want);
  } else if (!g_pageheap.ExtendInPlace(span, want)) {
    return false;
  }
  g_pagemap.SetLargeLength(span->start, span->length.n);
  return true;
}

// A block of `old` usable bytes serves a realloc to `size` where it is when the request
// (and the heap checker's tail pad) fits and would not waste more than half of it.
static bool FitsInPlace(size_t size, size_t old, size_t pad) { return size <= old - pad && size >= old / 2; }

// A block that does not serve the request where it is: a new one, the contents, the old one
// freed. Reallocate's small-block path comes here directly (no hooks, no pad, not in place:
// ReallocateSlow's tests would all fail), 90 -> 74 instructions a move with the
// allocation and the free (callgrind, t-test1 1 1000000 64 1000: 96 710 of its 142 811
// reallocs move).
static TCM_NOINLINE void* ReallocateMove(void* p, size_t size, size_t old) noexcept {
  void* fresh = nullptr;
  if (size > old && size < old + old / 4) {
    // Growing by small steps (a realloc loop): leave headroom so the next steps fit.
    fresh = Allocate(old + old / 4);
  }
  if (fresh == nullptr) fresh = Allocate(size);
  if (fresh == nullptr) return nullptr;  // errno set; the old block is untouched
  memcpy(fresh, p, size < old ? size : old);
  Deallocate(p);
  return fresh;
}

// Everything but the common in-place case: kept apart so that case saves no registers.
static TCM_NOINLINE void* ReallocateSlow(void* p, size_t size, size_t old) {
  const size_t pad = HookedTailPad();  // old >= 8 > pad
  // In place as above, or a large block resized where it is. Hooks (the heap profiler) see
  // such a resize as the old block freed and a new one of the new size allocated there.
  const bool in_place = FitsInPlace(size, old, pad) ||
                        (old > kMaxSize && size > kMaxSize && size <= kMaxAllocation && ResizeLargeInPlace(p, size + pad));
  if (in_place) {
    if (TCM_UNLIKELY(HooksActive())) {
      InvokeDeleteHooks(p);
      InvokeNewHooks(p, size);
    }
    return p;
  }
  return ReallocateMove(p, size, old);
}

// Reports and aborts; returns a pointer so Reallocate's fast path reaches it by a tail
// jump (a plain call gave the in-place path a stack frame: five instructions more).
// TCM_NO_IPA: GCC would otherwise see that it never returns and make the jump a call again.
TCM_NO_IPA static void* ReallocInteriorPointer(void* p, size_t cl) noexcept {
  NotABlockStart(p, cl, "realloc()");
  return nullptr;
}

// Everything but the class path below: nullptr, size 0, large and guarded blocks, pointers
// not ours, hooks. Out of line so that the class path, which only ever jumps on, keeps no
// stack frame (with this inline, GCC gave the whole of Reallocate one: five more).
static TCM_NOINLINE void* ReallocateOther(void* p, size_t size) noexcept {
  if (p == nullptr) return Allocate(size);
  if (size == 0) {
    // glibc's behaviour: free and return NULL.
    Deallocate(p);
    return nullptr;
  }
  // A small block under hooks (size 0 went through free()'s own test above).
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  if ((addr >> kAddressBits) == 0 && g_pagemap.initialized()) {
    if (const auto [cl, block_start] = LookUpSmallBlock(addr); cl != 0 && !block_start) return ReallocInteriorPointer(p, cl);
  }
  const size_t old = UsableSize(p, "realloc()");
  if (TCM_LIKELY(!HooksActive()) && FitsInPlace(size, old, 0)) return p;
  return ReallocateSlow(p, size, old);
}

void* Reallocate(void* p, size_t size) noexcept {
  // A small block of ours while the free fast paths are open (so no hooks, no tail pad, and
  // the class map is set up): its class says its size, read as free() reads it, without
  // OwnedSize's call and frame, its guarded-pool test (guarded blocks are class 0 in the
  // map, like nullptr and large blocks) or the hooks test. An in-place realloc took 71
  // instructions with the test's loop, 40 this way (callgrind, tests/profiler pair_loop N
  // realloc), 44 with the block-start test; t-test1, where 142 811 of its 1 000 000 calls
  // are reallocs, ran 118.0 -> 113.8 M instructions (t-test1 1 1000000 64 1000 under
  // callgrind, per-thread mode).
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  if (TCM_LIKELY(addr < (g_free_limit | g_cpu_free_limit) && size != 0)) {
    const auto [cl, block_start] = LookUpSmallBlock(addr);
    if (TCM_LIKELY(block_start)) {
      const size_t old = SizeMap::ClassSize(cl);
      if (TCM_LIKELY(FitsInPlace(size, old, 0))) return p;
      return ReallocateMove(p, size, old);
    }
    if (cl != 0) return ReallocInteriorPointer(p, cl);
    // A large block's first byte whose recorded length still fits the request: answered from
    // the entry just loaded (PageMap::SetLargeLength), not from the span record.
    if (const size_t pages = g_pagemap.LargeLength(addr); pages != 0 && (addr & (kPageSize - 1)) == 0) {
      if (FitsInPlace(size, pages << kPageShift, 0)) return p;
    }
  }
  return ReallocateOther(p, size);
}

void* ZeroedSizeOverflows() noexcept {
  errno = ENOMEM;
  return nullptr;
}

void* AllocateZeroedLarge(size_t total) noexcept {
  Span* span = AllocateLargeSpan(total < kMaxAllocation ? total + HookedTailPad() : total, 1);
  if (span == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  // Pages fresh from the OS (or released and not touched since) already read as zero:
  // skipping the memset keeps big callocs from faulting in memory nobody uses.
  if (!span->fresh) memset(span->start_ptr(), 0, total);
  MaybeReportLarge(total, span->start_ptr());
  if (TCM_UNLIKELY(HooksActive())) InvokeNewHooks(span->start_ptr(), total);
  return span->start_ptr();
}

size_t GoodSize(size_t size, size_t align) {
  if (align <= 16 && size <= kMaxSize) {
    if (align == 16 && size < 16) size = 16;
    return SizeMap::ClassSize(SizeMap::ClassIndex(size));
  }
  if (size <= kMaxSize && align < kPageSize) {
    if (const size_t cl = AlignedClass(size, align)) return SizeMap::ClassSize(cl);
  }
  if (size > kMaxAllocation) return 0;
  return Length::FromBytesRoundUp(size == 0 ? 1 : size).bytes();
}

HeapTotals ComputeTotals() {
  HeapTotals t{};
  // The tiers are summed one after another; a maintenance pass (another thread's tick, the
  // background thread) moving free objects from a tier not yet summed to one already summed
  // would make them count as in use meanwhile (mallinfo once read 254 KiB of a program's
  // just-freed 10 MiB as in use in CI). A pass due meanwhile is skipped, not waited for.
  SpinLockHolder no_pass(g_scavenger.pass_lock());
  size_t span_records_unbacked = 0;
  {
    SpinLockHolder h(g_pageheap.lock());
    const PageHeapStats& s = g_pageheap.stats();
    t.system_bytes = s.system_bytes;
    t.pageheap_free_bytes = s.free_bytes;
    t.unmapped_bytes = s.unmapped_bytes;
    t.in_use_spans = s.in_use_spans;
    span_records_unbacked = g_pageheap.record_totals().unbacked_bytes;
  }
  ForEachCentral([&t](const CentralFreeList& c, size_t cl) {
    // The tail of each span that holds no whole object belongs to the central list too:
    // the application never sees it, so it must not count as in use.
    const size_t tail = SizeMap::ClassPages(cl) * kPageSize - SizeMap::ObjectsPerSpan(cl) * SizeMap::ClassSize(cl);
    t.central_free_bytes += c.free_objects() * SizeMap::ClassSize(cl) + c.num_spans() * tail;
    t.transfer_cache_bytes += c.transfer_objects() * SizeMap::ClassSize(cl);
  });
  t.thread_cache_bytes = g_caches.TotalCachedBytes();
  t.cpu_cache_bytes = g_cpu_cache.TotalBytes();
  t.thread_caches = g_caches.count();
  // Arena chunks, plus the class map's bytes that can be touched: one per managed page;
  // less the pages of span records and bitmaps that are not backed (released, or not used
  // yet).
  t.metadata_bytes = g_arena.bytes_reserved() - span_records_unbacked + t.system_bytes / kPageSize;
  size_t free_total = t.pageheap_free_bytes + t.unmapped_bytes + t.central_free_bytes +
                      t.transfer_cache_bytes + t.thread_cache_bytes + t.cpu_cache_bytes;
  t.in_use_bytes = t.system_bytes > free_total ? t.system_bytes - free_total : 0;
  return t;
}

size_t ReleaseToSystem(size_t bytes) {
  EnsureInitialized();
  ForEachCentral([](CentralFreeList& c, size_t) {
    c.FlushTransferCache();
    c.ReleaseKeptSpans();
  });
  SpinLockHolder h(g_pageheap.lock());
  return g_pageheap.ReleaseAtLeastNPages(Length::FromBytesRoundUp(bytes)).bytes();
}

size_t CallingThreadCacheSize() {
  if (g_cpu_cache.active()) return 0;  // no thread owns a cache in per-CPU mode
  ThreadCache* tc = tls_cache;
  return tc == &g_empty_cache ? 0 : tc->OwnSize();  // the caller owns it
}

void ReleaseCallingThreadCache(bool destroy) {
  // Per-CPU mode: a thread going idle likely leaves its CPU idle too.
  if (g_cpu_cache.active()) {
    g_cpu_cache.DrainCurrent();
    return;
  }
  ThreadCache* tc = tls_cache;
  if (tc == &g_empty_cache) return;
  if (!destroy) {
    tc->ReleaseAll();
    return;
  }
  tls_cache = &g_empty_cache;
  pthread_setspecific(g_exit_key, nullptr);
  g_caches.Destroy(tc);
}

size_t OwnedSize(const void* p) {
  if (g_guarded.Contains(p)) return g_guarded.UsableSize(p);
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  // A small object: its page's class says its size, from the class map free() reads, which
  // stays in cache. FindBlock reads the span record, a cache miss per call for blocks
  // spread over many spans: 10% of t-test1 at 4 KiB, which reallocs one call in eight
  // (gperftools' realloc also asks only the class). It answers the same for every byte of
  // an in-use small-object span except its tail, which holds no whole object: a pointer
  // there is an interior pointer like any other, which free()'s batch check reports
  // (hardened builds), as it reports the others.
  if (!g_pagemap.initialized()) return 0;  // before initialisation nothing is ours
  if ((addr >> kAddressBits) == 0) {
    if (const size_t cl = g_pagemap.ClassOf(addr); cl != 0) return SizeMap::ClassSize(cl);
  }
  const Block b = FindBlock(g_pagemap, addr);
  // A page run only by its start (what free() accepts); small objects were answered above.
  if (!b.found() || (b.cl == 0 && b.start != reinterpret_cast<uintptr_t>(p))) return 0;
  // A sampled block reports the size an unsampled one would have had (AllocateSampled).
  if (b.cl == 0 && b.span->sample != nullptr) return b.span->sample->allocated;
  return b.size;
}

size_t ReleaseFreeMemory() {
  EnsureInitialized();
  g_cpu_cache.DrainAll();
  // Objects parked in transfer caches may be all that keeps some spans alive.
  ForEachCentral([](CentralFreeList& c, size_t) {
    c.FlushTransferCache();
    c.ReleaseKeptSpans();
  });
  SpinLockHolder h(g_pageheap.lock());
  g_pageheap.ReleaseSpanRecords(/*keep_reserve=*/false);  // metadata, not counted as heap bytes released
  return g_pageheap.ReleaseAtLeastNPages(Length{~uintptr_t{0} >> 1}).bytes();
}

}  // namespace tcm
