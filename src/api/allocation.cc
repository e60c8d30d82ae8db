// Slow paths of the front end: thread-cache creation and teardown, large objects, aligned
// allocation, realloc/calloc, pointer validation and the heap totals.
#include "api/allocation.h"

#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "platform/fault_handler.h"
#include "platform/os.h"
#include "platform/stack_trace.h"

namespace tcm {

constinit ThreadCache g_empty_cache;
__thread ThreadCache* tls_cache TCM_INITIAL_EXEC = &g_empty_cache;
// Set once the thread-exit hook ran: later allocations of this thread bypass the cache
// (a new cache would never be returned).
static __thread bool tls_exiting TCM_INITIAL_EXEC = false;

static pthread_key_t g_exit_key;

static void OnThreadExit(void* arg) {
  auto* tc = static_cast<ThreadCache*>(arg);
  tls_exiting = true;
  tls_cache = &g_empty_cache;
  g_caches.Destroy(tc);
}

void InitThreadExitHook() {
  if (pthread_key_create(&g_exit_key, OnThreadExit) != 0) Crash("pthread_key_create failed");
}

static void ArmSampling(ThreadCache* tc);

// Returns the calling thread's real cache, creating it; nullptr while the thread exits
// or when metadata memory ran out (callers then go straight to the central lists).
static ThreadCache* GetOrCreateCache() {
  ThreadCache* tc = tls_cache;
  if (TCM_LIKELY(tc != &g_empty_cache)) return tc;
  EnsureInitialized();
  if (tls_exiting) return nullptr;
  tc = g_caches.Create(&g_arena, g_central);
  if (tc == nullptr) return nullptr;
  tc->rng_ = reinterpret_cast<uintptr_t>(tc) ^ Scavenger::NowNs();
  ArmSampling(tc);
  tls_cache = tc;  // before setspecific, which may itself call malloc
  pthread_setspecific(g_exit_key, tc);
  return tc;
}

[[noreturn]] static void InvalidPointer(const char* who, const void* p) {
  Crash("%s: invalid pointer %p", who, p);
}

// ---- large objects: whole page runs ----

static Span* AllocateLargeSpan(size_t size, size_t align_pages) {
  if (size > kMaxAllocation) return nullptr;
  EnsureInitialized();
  Length n = Length::FromBytesRoundUp(size == 0 ? 1 : size);
  SpinLockHolder h(g_pageheap.lock());
  return align_pages > 1 ? g_pageheap.NewAligned(n, Length{align_pages}) : g_pageheap.New(n);
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
  if (g_central[cl].RemoveRange(&start, &end, 1) == 0) return nullptr;
  return start;
}

// ---- sampling ----

// What memalign & co. asked for, while they allocate through a rounded class size: the
// sample record and the hooks report the request, not the rounding (0 = not aligned).
static __thread size_t tls_requested_align TCM_INITIAL_EXEC = 0;
static __thread size_t tls_requested_size TCM_INITIAL_EXEC = 0;

// Two samplers share the fast path's one countdown (tc->sample_left_): heap sampling
// (TCMALLOC_SAMPLE_PARAMETER) and guarded sampling (TCMALLOC_GUARDED_SAMPLE_RATE). Each
// keeps its own bytes-to-go here; the countdown is armed with the nearer of the two, and
// when it runs out both are charged with what was allocated since it was armed.
static __thread int64_t tls_heap_left TCM_INITIAL_EXEC = 0;
static __thread int64_t tls_guard_left TCM_INITIAL_EXEC = 0;
static __thread int64_t tls_armed TCM_INITIAL_EXEC = 0;

enum : unsigned { kHeapSampleDue = 1, kGuardedDue = 2 };

// Next gap for a sampler with mean `mean` (<= 0: off, look at the setting again later).
static int64_t NextGap(ThreadCache* tc, const int64_t* mean_setting) {
  const int64_t mean = __atomic_load_n(mean_setting, __ATOMIC_RELAXED);
  return mean > 0 ? NextSampleGap(&tc->rng_, mean) : kSamplingOffRecheck;
}

static void Rearm(ThreadCache* tc) {
  tls_armed = tls_heap_left < tls_guard_left ? tls_heap_left : tls_guard_left;
  tc->sample_left_ = tls_armed;
}

static void ArmSampling(ThreadCache* tc) {
  tls_heap_left = NextGap(tc, &g_options.sample_parameter);
  tls_guard_left = NextGap(tc, &g_options.guarded_sample_rate);
  Rearm(tc);
}

// Which samplers want this allocation, which the fast path did not serve (0 = none). The
// fast path charged the countdown only when it went negative there (and then left).
static unsigned SampleDue(ThreadCache* tc, size_t size) {
  if (tc->sample_left_ >= 0) {
    tc->sample_left_ -= static_cast<int64_t>(size);
    if (tc->sample_left_ >= 0) return 0;
  }
  const int64_t consumed = tls_armed - tc->sample_left_;
  tls_heap_left -= consumed;
  tls_guard_left -= consumed;
  unsigned due = 0;
  if (tls_heap_left < 0) {
    if (__atomic_load_n(&g_options.sample_parameter, __ATOMIC_RELAXED) > 0) due |= kHeapSampleDue;
    tls_heap_left = NextGap(tc, &g_options.sample_parameter);
  }
  if (tls_guard_left < 0) {
    if (__atomic_load_n(&g_options.guarded_sample_rate, __ATOMIC_RELAXED) > 0) due |= kGuardedDue;
    tls_guard_left = NextGap(tc, &g_options.guarded_sample_rate);
  }
  Rearm(tc);
  return due;
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
TCM_NOINLINE static void* AllocateSampled(size_t size) {
  void* pcs[os::kMaxStackDepth];
  const int depth = CaptureUserStack(pcs, os::kMaxStackDepth);
  const size_t align = tls_requested_align;
  if (align != 0) size = tls_requested_size;
  Span* span = AllocateLargeSpan(size, align > kPageSize ? align >> kPageShift : 1);
  if (span == nullptr) return nullptr;
  const int64_t period = __atomic_load_n(&g_options.sample_parameter, __ATOMIC_RELAXED);
  // Without a record (no metadata memory) it is simply an unsampled large block.
  span->sample = g_samples.Add(&g_arena, size, span->length.bytes(), align, period, pcs, depth);
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
TCM_NOINLINE static void* AllocateGuarded(size_t size) {
  if (size > GuardedPool::kSlotBytes || tls_requested_align != 0) return nullptr;
  InstallFaultReporting();
  void* pcs[GuardedPool::kStackDepth];
  const int depth = CaptureUserStack(pcs, GuardedPool::kStackDepth);
  return g_guarded.Allocate(size, SizeMap::ClassSize(SizeMap::ClassIndex(size)), &g_arena, pcs, depth);
}

TCM_NOINLINE static void DeallocateGuarded(void* p) {
  void* pcs[GuardedPool::kStackDepth];
  const int depth = CaptureUserStack(pcs, GuardedPool::kStackDepth);
  g_guarded.Deallocate(p, pcs, depth);
}

static void* AllocateUnhooked(size_t size) {
  if (TCM_UNLIKELY(size > kMaxAllocation)) {  // also keeps the sampling countdown in range
    errno = ENOMEM;
    return nullptr;
  }
  ThreadCache* tc = GetOrCreateCache();
  if (tc != nullptr) {
    if (const unsigned due = SampleDue(tc, size); TCM_UNLIKELY(due != 0)) {
      // A heap sample wins: the profile must stay unbiased; the guarded one comes next time.
      if ((due & kHeapSampleDue) != 0) {
        if (void* p = AllocateSampled(size)) return p;
      } else if (void* p = AllocateGuarded(size)) {
        return p;
      }
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

void* AllocateSlow(size_t size) noexcept {
  g_scavenger.OnSlowPath();
  void* result = AllocateUnhooked(size);
  if (TCM_UNLIKELY(HooksActive())) InvokeNewHooks(result, tls_requested_align != 0 ? tls_requested_size : size);
  return result;
}

// Frees a page-run object. Validates p against its span under the page heap lock.
static void DeallocateLarge(void* p) {
  const PageId page = PageId::FromPtr(p);
  if ((reinterpret_cast<uintptr_t>(p) & (kPageSize - 1)) != 0) InvalidPointer("free()", p);
  Span* span = g_pagemap.GetSpan(page);
  if (span == nullptr) InvalidPointer("free()", p);
  SampleRecord* sample;
  {
    SpinLockHolder h(g_pageheap.lock());
    if (span->start != page || span->sizeclass != 0) InvalidPointer("free()", p);
    if (span->location != Span::kInUse) Crash("free(): invalid pointer %p (double free)", p);
    sample = span->sample;
    span->sample = nullptr;
    g_pageheap.Delete(span);
  }
  if (sample != nullptr) g_samples.Remove(sample);
}

void CollectGarbage(ThreadCache* tc) noexcept {
  g_scavenger.OnSlowPath();
  tc->CheckSize();
}

void DeallocateSlow(void* p) noexcept {
  if (TCM_UNLIKELY(HooksActive())) InvokeDeleteHooks(p);
  if (p == nullptr) return;
  g_scavenger.OnSlowPath();
  // Guarded blocks are in no span: the pagemap gives them class 0, so they arrive here.
  if (TCM_UNLIKELY(g_guarded.Contains(p))) return DeallocateGuarded(p);
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  if (addr >> kAddressBits) InvalidPointer("free()", p);
  const size_t cl = g_pagemap.ClassOf(addr);
  if (cl == 0) return DeallocateLarge(p);
  ThreadCache* tc = tls_cache;
  if (p == tc->lists_[cl].head) Crash("free(): invalid pointer %p (double free)", p);
  if constexpr (kDebugBuild) {
    DebugCheckBlockStart(p, cl);
    DebugPoison(p, SizeMap::ClassSize(cl));
  }
  tc = GetOrCreateCache();
  if (tc == nullptr) {
    *static_cast<void**>(p) = nullptr;
    g_central[cl].InsertRange(p, 1);
    return;
  }
  tc->PushSlow(p, cl);
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
  Span* span = g_pagemap.GetSpan(PageId::FromPtr(p));
  if (span == nullptr || span->sizeclass != cl) InvalidPointer("free()", p);
  size_t offset = static_cast<size_t>(static_cast<char*>(p) - static_cast<char*>(span->start_ptr()));
  if (offset % SizeMap::ClassSize(cl) != 0) Crash("free(): invalid pointer %p (not the start of a block)", p);
}

void VerifyHeap() {
  EnsureInitialized();
  for (size_t cl = 1; cl < kNumClasses; ++cl) g_central[cl].Verify();
  // The calling thread's cache: every object is a block of the list's class.
  ThreadCache* tc = tls_cache;
  if (tc != &g_empty_cache) {
    for (size_t cl = 1; cl < kNumClasses; ++cl) {
      uint32_t n = 0;
      for (void* o = tc->lists_[cl].head; o != nullptr; o = *static_cast<void**>(o)) {
        TCM_CHECK(g_pagemap.ClassOf(reinterpret_cast<uintptr_t>(o)) == cl);
        TCM_CHECK(++n <= tc->lists_[cl].length);
      }
      TCM_CHECK(n == tc->lists_[cl].length);
    }
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
      tls_requested_align = align;  // only read on slow paths (sampling, hooks)
      tls_requested_size = size;
      void* p = Allocate(SizeMap::ClassSize(cl));
      tls_requested_align = 0;
      return p;
    }
  }
  if (size > kMaxAllocation || align > kMaxAllocation) {
    errno = ENOMEM;
    return nullptr;
  }
  size_t align_pages = align <= kPageSize ? 1 : align >> kPageShift;
  void* result = AllocateLarge(size, align_pages);
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
    return true;
  }
  return g_pageheap.ExtendInPlace(span, want);
}

void* Reallocate(void* p, size_t size) {
  if (p == nullptr) return Allocate(size);
  if (size == 0) {
    // glibc's behaviour: free and return NULL.
    Deallocate(p);
    return nullptr;
  }
  const size_t old = UsableSize(p, "realloc()");
  // Stay in place when the block fits and would not waste more than half of it, or when a
  // large block can be resized where it is. Hooks (the heap profiler) see such a resize as
  // the old block freed and a new one of the new size allocated at the same address.
  const bool in_place = (size <= old && size >= old / 2) ||
                        (old > kMaxSize && size > kMaxSize && size <= kMaxAllocation && ResizeLargeInPlace(p, size));
  if (in_place) {
    if (TCM_UNLIKELY(HooksActive())) {
      InvokeDeleteHooks(p);
      InvokeNewHooks(p, size);
    }
    return p;
  }
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

void* AllocateZeroed(size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  if (total <= kMaxSize) {
    void* p = Allocate(total);
    if (p != nullptr) memset(p, 0, total);
    return p;
  }
  Span* span = AllocateLargeSpan(total, 1);
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
  {
    SpinLockHolder h(g_pageheap.lock());
    const PageHeapStats& s = g_pageheap.stats();
    t.system_bytes = s.system_bytes;
    t.pageheap_free_bytes = s.free_bytes;
    t.unmapped_bytes = s.unmapped_bytes;
    t.in_use_spans = s.in_use_spans;
  }
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    // The tail of each span that holds no whole object belongs to the central list too:
    // the application never sees it, so it must not count as in use.
    const size_t tail = SizeMap::ClassPages(cl) * kPageSize - SizeMap::ObjectsPerSpan(cl) * SizeMap::ClassSize(cl);
    t.central_free_bytes += g_central[cl].free_objects() * SizeMap::ClassSize(cl) + g_central[cl].num_spans() * tail;
    t.transfer_cache_bytes += g_central[cl].transfer_objects() * SizeMap::ClassSize(cl);
  }
  t.thread_cache_bytes = g_caches.TotalCachedBytes();
  t.thread_caches = g_caches.count();
  // Arena chunks, plus the class map's bytes that can be touched: one per managed page.
  t.metadata_bytes = g_arena.bytes_reserved() + t.system_bytes / kPageSize;
  size_t free_total = t.pageheap_free_bytes + t.unmapped_bytes + t.central_free_bytes +
                      t.transfer_cache_bytes + t.thread_cache_bytes;
  t.in_use_bytes = t.system_bytes > free_total ? t.system_bytes - free_total : 0;
  return t;
}

size_t ReleaseToSystem(size_t bytes) {
  EnsureInitialized();
  for (size_t cl = 1; cl < kNumClasses; ++cl) g_central[cl].FlushTransferCache();
  SpinLockHolder h(g_pageheap.lock());
  return g_pageheap.ReleaseAtLeastNPages(Length::FromBytesRoundUp(bytes)).bytes();
}

size_t CallingThreadCacheSize() {
  ThreadCache* tc = tls_cache;
  return tc == &g_empty_cache ? 0 : tc->size();
}

void ReleaseCallingThreadCache(bool destroy) {
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
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  if (p == nullptr || (addr >> kAddressBits) != 0) return 0;
  const size_t cl = g_pagemap.ClassOf(addr);
  if (cl != 0) return SizeMap::ClassSize(cl);
  if (g_guarded.Contains(p)) return g_guarded.UsableSize(p);
  const PageId page = PageId::FromAddr(addr);
  Span* span = g_pagemap.GetSpan(page);
  if (span == nullptr || span->start != page || (addr & (kPageSize - 1)) != 0 ||
      span->location != Span::kInUse || span->sizeclass != 0)
    return 0;
  return span->length.bytes();
}

size_t ReleaseFreeMemory() {
  EnsureInitialized();
  // Chains parked in transfer caches may be all that keeps some spans alive.
  for (size_t cl = 1; cl < kNumClasses; ++cl) g_central[cl].FlushTransferCache();
  SpinLockHolder h(g_pageheap.lock());
  return g_pageheap.ReleaseAtLeastNPages(Length{~uintptr_t{0} >> 1}).bytes();
}

}  // namespace tcm
