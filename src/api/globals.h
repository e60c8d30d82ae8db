// Composition root: every allocator singleton, constinit so it is usable before main and
// after exit, plus the one-time initialisation the slow paths run on first use.
// Core components never include this header; they are handed their neighbours.
#ifndef TCMALLOC_GLOBALS_H_
#define TCMALLOC_GLOBALS_H_

#include "core/arena.h"
#include "core/central_freelist.h"
#include "core/cpu_cache.h"
#include "core/guarded_alloc.h"
#include "core/page_heap.h"
#include "api/options.h"
#include "core/pagemap.h"
#include "core/sampler.h"
#include "core/scavenger.h"
#include "core/size_classes.h"
#include "core/system_alloc.h"
#include "core/thread_cache.h"

namespace tcm {

extern constinit Options g_options;  // as read from the environment at start-up
extern constinit SystemAllocator g_system;
extern constinit Arena g_arena;
extern constinit PageMap g_pagemap TCM_HIDDEN;
extern constinit PageHeap g_pageheap;
// The central lists, [shard][class]: g_central_shards.count shards, of which a class uses
// more than shard 0 once it is sharded (central_freelist.h).
extern constinit CentralFreeList g_central[kMaxCentralShards * kNumClasses];
extern constinit CentralShards g_central_shards;
extern constinit ByteBudget g_kept_spans;  // empty spans the central lists keep, all together
// The central list of class cl for the calling thread's CPU.
CentralFreeList& CentralForCaller(size_t cl);
// Classes whose misses use every shard's list (their shard-0 list went back and forth
// between shards: central_freelist.h, "Shards").
size_t ShardedClasses();
// Every central list set up so far (each on its first use: globals.cc), shard
// by shard, classes 1..kNumClasses-1. One not set up holds nothing and is never written.
template <typename F>
void ForEachCentral(F f) {
  ForEachReadyCentral(g_central, g_central_shards.count, kNumClasses, f);
}
extern constinit ThreadCacheRegistry g_caches;
extern constinit CpuCache g_cpu_cache TCM_HIDDEN;  // active() only in per-CPU mode
extern constinit Scavenger g_scavenger;
extern constinit SampleRegistry g_samples;
extern constinit GuardedPool g_guarded;

// Set-up the front end (allocation.cc) provides and EnsureInitialized calls, declared here
// so the composition root does not include the layer above it.
void InitThreadExitHook();
// Allocations of at least this many bytes are reported on stderr (0 = never).
void SetLargeAllocReportThreshold(size_t bytes);
// Installs the SIGSEGV/SIGBUS handler that reports guarded-block faults and faults inside
// the allocator's own code (chained to the program's handler). Idempotent.
void InstallFaultReporting();

// Whether a heap growth records its stack (MallocExtension::GetHeapGrowthStacks). Defined
// by each library's api/malloc_extension.cc; where that is not linked in: always.
bool GrowthStacksWanted() __attribute__((weak));

// Runs the one-time setup (central lists, thread-exit hook, fork handlers) if needed.
// Cheap after the first call; safe to call from any slow path.
void EnsureInitialized();

// Takes every allocator lock in lock order (around fork) and releases them again.
void LockAll();
void UnlockAll();
void ResetLocksInChild();

}  // namespace tcm

#endif  // TCMALLOC_GLOBALS_H_
