#include "api/globals.h"

#include <pthread.h>

#include <atomic>

#include "api/allocation.h"
#include "api/malloc_hook.h"
#include "base/log.h"
#include "core/freelist_link.h"
#include "platform/os.h"
#include "platform/rseq.h"

#include <cstdlib>

namespace tcm {

static void* AllocPagemapNode(size_t bytes) { return g_arena.Alloc(bytes, 64); }

constinit Options g_options;
constinit SystemAllocator g_system;
constinit Arena g_arena;
constinit PageMap g_pagemap;  // all zero (.bss) until EnsureInitialized runs Init
constinit PageHeap g_pageheap;  // connected in EnsureInitialized (page_heap.h: .bss)
constinit CentralFreeList g_central[kMaxCentralShards * kNumClasses];
// Read on every central-list access, written once a class: a line of its own.
alignas(64) constinit CentralShards g_central_shards;

CentralFreeList& CentralForCaller(size_t cl) {
  return CentralOf(g_central, &g_central_shards, os::RseqCurrentCpu(), cl);
}

// Every list is set up when a thread first needs it (CentralOf), shard 0's too: a list is
// ~480 bytes of static data, and setting up all of a shard at once wrote (and kept
// resident) 11 pages in every process, 44 KiB, where a program that uses a few classes
// now writes a page or two. The lock makes a list's set-up happen once.
static constinit SpinLock g_list_set_up_lock;

// The empty spans the central lists may keep for their next allocations
// (central_freelist.h, "Kept spans"), all lists together: 4 MiB a shard held the spans of
// two threads building and freeing trees of 2-8 MiB (binary trees at depth 16 and 18;
// 1 MiB a shard gave back only half the gain).
static constexpr size_t kKeptSpanBytesPerShard = size_t{4} << 20;
constinit ByteBudget g_kept_spans;

static void SetUpList(const CentralFreeList* list) {
  const size_t index = static_cast<size_t>(list - g_central);
  SpinLockHolder h(&g_list_set_up_lock);
  CentralFreeList& c = g_central[index];
  if (c.ready()) return;
  c.Init(static_cast<uint8_t>(index % kNumClasses), &g_pageheap, &g_pagemap, g_options.hardened, &g_kept_spans);
  // A class starts on shard 0's list alone; that list watches for hand-offs between shards.
  if (index < kNumClasses && g_central_shards.count > 1) c.WatchHandoffs(g_central_shards.count);
}

// The shard-0 list of class cl went back and forth between shards (central_freelist.h, "Shards"):
// from now on each CPU's misses of the class go to its own shard's list.
static void MarkClassSharded(size_t cl) { g_central_shards.sharded[cl].store(true, std::memory_order_relaxed); }

size_t ShardedClasses() {
  size_t n = 0;
  for (size_t cl = 1; cl < kNumClasses; ++cl) n += g_central_shards.sharded[cl].load(std::memory_order_relaxed);
  return n;
}
constinit ThreadCacheRegistry g_caches;
constinit CpuCache g_cpu_cache;
constinit Scavenger g_scavenger;
constinit SampleRegistry g_samples;
constinit GuardedPool g_guarded;

// The scavenger's front-end neighbour, called once per maintenance pass (any thread, no
// allocator lock held): give back what the front end holds idle and return the bytes.
// Per-CPU mode: CPUs whose threads went quiet give their caches back, so what they held
// can reach the spans (and the page heap) in the same pass. Thread caches are owned by
// their threads and shrink on their own housekeeping tick (api/allocation.cc) and at exit.
static size_t ShrinkIdleFrontEnd(uint64_t now_ns) { return g_cpu_cache.Maintain(now_ns); }

// The page heap's surplus rule fired (spans a list gave back, a large block freed): every
// list's kept spans go back too, and none are kept until the next maintenance pass opens
// the budget again (central_freelist.h, "Kept spans").
// Runs with no lock held; giving kept spans back can fire the rule again, and that call
// finds the sweep under way and returns.
static constinit std::atomic<bool> g_kept_sweep_running{false};  // reset in a fork child
static void KeptSpansBack() {
  if (g_kept_spans.used() == 0) return;  // nothing kept: no sweep over every list
  if (g_kept_sweep_running.exchange(true, std::memory_order_acquire)) return;
  ForEachCentral([](CentralFreeList& c, size_t) {
    if (c.kept_spans() != 0) c.ReleaseKeptSpans();
  });
  g_kept_sweep_running.store(false, std::memory_order_release);
}
static void KeptSpansOut() {
  g_kept_spans.Close();
  KeptSpansBack();
}

static constinit SpinLock g_init_lock;
static std::atomic<bool> g_initialized{false};

// Lock order (outermost first): registry, per-CPU caches by CPU, list set-up, central
// lists by shard and class (none is ever taken under another), page heap, samples,
// guarded pool, arena.
// Transfer-cache locks are leaves (nothing is taken under them, and they are never taken
// under another allocator lock), so they can come last.
void LockAll() {
  g_caches.lock()->Lock();
  g_cpu_cache.LockAll();
  g_list_set_up_lock.Lock();  // no list becomes ready (or half ready) across fork
  ForEachCentral([](CentralFreeList& c, size_t) { c.lock()->Lock(); });
  g_pageheap.lock()->Lock();
  g_samples.lock()->Lock();
  g_guarded.lock()->Lock();
  g_arena.lock()->Lock();
  ForEachCentral([](CentralFreeList& c, size_t) { c.transfer_cache()->lock()->Lock(); });
}

void UnlockAll() {
  ForEachCentral([](CentralFreeList& c, size_t) { c.transfer_cache()->lock()->Unlock(); });
  g_arena.lock()->Unlock();
  g_guarded.lock()->Unlock();
  g_samples.lock()->Unlock();
  g_pageheap.lock()->Unlock();
  ForEachCentral([](CentralFreeList& c, size_t) { c.lock()->Unlock(); });
  g_list_set_up_lock.Unlock();
  g_cpu_cache.UnlockAll();
  g_caches.lock()->Unlock();
}

void ResetLocksInChild() {
  // Only the forking thread survives; it held every lock, so all of them are free again.
  g_arena.ResetLockAfterFork();
  g_pageheap.ResetLockAfterFork();
  g_samples.ResetLockAfterFork();
  g_guarded.ResetLockAfterFork();
  ForEachCentral([](CentralFreeList& c, size_t) {
    c.ResetLockAfterFork();
    c.transfer_cache()->ResetLockAfterFork();
  });
  g_list_set_up_lock.ResetAfterFork();
  g_caches.ResetLockAfterFork();
  g_cpu_cache.ResetLocksAfterFork();
  g_kept_sweep_running.store(false, std::memory_order_relaxed);  // the sweeping thread is gone
  // The child is a new process for membarrier: register it again for the drains' fences.
  if (g_cpu_cache.active()) os::RegisterRseqFence();
  g_scavenger.AfterForkInChild();
}

// Batch between the front end and the central lists when TCMALLOC_TRANSFER_NUM_OBJ is not
// set. Per-thread caches keep gperftools' 32 (their list sizing grows by batches). A
// per-CPU miss costs a lock, a look at the budget and a critical section whatever it moves:
// at 128, binary trees (depth 19) took 1.00-1.01 s against 1.07, xmalloc 96-101 M ops/s
// against 83-87, batch 256 153-159 against 144-148, t-test1 64 KiB +4%, the rest equal.
inline constexpr int64_t kPerThreadBatch = 32;
inline constexpr int64_t kPerCpuBatch = 128;

// Applies the environment flags to the components. Runs once, before any cache exists.
// per_cpu: whether per-CPU caches will be tried (chosen before the central lists are set
// up, whose transfer caches hold whole batches).
static void ApplyOptions(const Options& o, bool per_cpu) {
  const int64_t batch = o.transfer_num_obj != 0 ? o.transfer_num_obj : per_cpu ? kPerCpuBatch : kPerThreadBatch;
  SizeMap::SetMaxBatch(static_cast<size_t>(batch));
  g_caches.SetMaxTotal(static_cast<size_t>(o.max_total_thread_cache_bytes));
  g_scavenger.set_release_rate(o.disable_memory_release ? 0 : o.release_rate);
  g_system.set_release_enabled(!o.disable_memory_release);
  g_system.set_enabled(SystemAllocator::kMmap, !o.skip_mmap);
  g_system.set_enabled(SystemAllocator::kSbrk, !o.skip_sbrk);
  if (o.memfs_malloc_path[0] != '\0')
    g_system.ConfigureMemfs(o.memfs_malloc_path, static_cast<size_t>(o.memfs_limit_mb) << 20,
                            o.memfs_abort_on_fail, o.memfs_ignore_mmap_fail, o.memfs_map_private);
  if (o.devmem_start_mb > 0)
    g_system.ConfigureDevmem(o.devmem_device, static_cast<size_t>(o.devmem_start_mb) << 20,
                             static_cast<size_t>(o.devmem_limit_mb) << 20);
  g_pageheap.set_limit(static_cast<size_t>(o.heap_limit_mb) << 20);
  g_pageheap.set_aggressive_decommit(o.aggressive_decommit);
  // Hugepage-aware unless switched off, or THP is unavailable (never, or no THP in the
  // kernel: the plain heap is then the better packer of small pages), or memory comes from
  // memfs/devmem (huge pages there are the file system's business).
  g_system.set_thp_mode(os::ReadThpMode());
  g_pageheap.set_hugepage_aware(o.hugepages && g_system.thp_available() && o.memfs_malloc_path[0] == '\0' &&
                                o.devmem_start_mb == 0);
  SetLargeAllocReportThreshold(static_cast<size_t>(o.large_alloc_report_threshold));
  // The thread itself starts at a later slow path: creating threads inside the very first
  // malloc (possibly during libc's own start-up) is asking for trouble.
  if (o.background_release) g_scavenger.RequestBackgroundThread();
}

void EnsureInitialized() {
  if (TCM_LIKELY(g_initialized.load(std::memory_order_acquire))) return;
  SpinLockHolder h(&g_init_lock);
  if (g_initialized.load(std::memory_order_relaxed)) return;
  // The class map first: the free fast paths read it once their limits open (at the end).
  g_pagemap.Init(&AllocPagemapNode);
  // Central-list shards by the CPUs there can be (not per-CPU mode alone: per-thread
  // caches pick their shard by CPU too, when glibc registered rseq).
  g_pageheap.Connect(&g_pagemap, &g_system, &g_arena);
  if (GrowthStacksWanted != nullptr) g_pageheap.set_growth_stacks(&GrowthStacksWanted);
  g_central_shards.count = CentralShardsFor(os::NumPossibleCpus());
  // The scavenger first, so the release rate set from the options reaches the page heap.
  g_scavenger.Init(&g_pageheap, g_central, kNumClasses, &ShrinkIdleFrontEnd, g_central_shards.count);
  // Options next: batch sizes shape the central lists' transfer caches, and depend on the
  // front end: per-CPU caches where restartable sequences work (and unless
  // TCMALLOC_PER_CPU_CACHES=0), otherwise the design document's per-thread caches.
  LoadOptions(&g_options);
  const bool per_cpu = g_options.per_cpu_caches && os::InitRseq(/*allow_own=*/true) != os::RseqSource::kNone;
  if (!g_options.per_cpu_caches) os::InitRseq(/*allow_own=*/false);  // glibc's CPU numbers, if any, pick central shards
  ApplyOptions(g_options, per_cpu);
  // The free-list secret before the first object is linked (freelist_link.h).
  InitLinkSecret(os::Random64());
  g_kept_spans.Init(kKeptSpanBytesPerShard * static_cast<size_t>(g_central_shards.count));
  SetCentralSetUp(&SetUpList);
  SetShardClassHook(&MarkClassSharded);
  SetSurplusReleased(&KeptSpansOut);
  // Pages kept empty for one class are reused before the heap grows for another.
  SetNewMemoryCarved(&KeptSpansBack);
  InitThreadExitHook();
  // Hardened: a corrupted free list that makes our own code fault is reported as such.
  if (g_options.hardened) InstallFaultReporting();
  // free() tests for a block's first byte unless TCMALLOC_HARDENED=0 (allocation.h); the
  // rows must be set either way, since an unset row fails every pointer.
  ArmBlockStartTest(g_options.hardened);
  // (If the per-CPU slabs cannot be set up, per-thread caches run with the per-CPU batch.)
  if (per_cpu && g_cpu_cache.Init(&g_arena, g_central, static_cast<size_t>(g_options.max_per_cpu_cache_size),
                                  &g_central_shards))
    SetPerCpuMode(true);
  OpenFreeFastPaths();  // after g_pagemap.Init, and after the mode is chosen
  g_pageheap.set_clock(Scavenger::NowNs());
  g_pageheap.set_clock_source(&Scavenger::NowNs);
  // Handlers registered now run last in the prepare phase (pthread_atfork runs them in
  // reverse order), so other libraries' prepare handlers may still allocate.
  pthread_atfork(LockAll, UnlockAll, ResetLocksInChild);
  g_initialized.store(true, std::memory_order_release);
}

}  // namespace tcm
