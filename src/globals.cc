#include "globals.h"

#include <pthread.h>

#include <atomic>

#include "allocation.h"
#include "base/log.h"

namespace tcm {

static void* AllocPagemapNode(size_t bytes) { return g_arena.Alloc(bytes, 64); }

constinit SystemAllocator g_system;
constinit Arena g_arena;
constinit PageMap g_pagemap{&AllocPagemapNode};
constinit PageHeap g_pageheap{&g_pagemap, &g_system, &g_arena};
constinit CentralFreeList g_central[kNumClasses];
constinit ThreadCacheRegistry g_caches;

static constinit SpinLock g_init_lock;
static std::atomic<bool> g_initialized{false};

// Lock order (outermost first): registry, central lists by class, page heap, arena, sbrk.
void LockAll() {
  g_caches.lock()->Lock();
  for (size_t cl = 1; cl < kNumClasses; ++cl) g_central[cl].lock()->Lock();
  g_pageheap.lock()->Lock();
  g_arena.lock()->Lock();
}

void UnlockAll() {
  g_arena.lock()->Unlock();
  g_pageheap.lock()->Unlock();
  for (size_t cl = kNumClasses - 1; cl >= 1; --cl) g_central[cl].lock()->Unlock();
  g_caches.lock()->Unlock();
}

void ResetLocksInChild() {
  // Only the forking thread survives; it held every lock, so all of them are free again.
  g_arena.ResetLockAfterFork();
  g_pageheap.ResetLockAfterFork();
  for (size_t cl = 1; cl < kNumClasses; ++cl) g_central[cl].ResetLockAfterFork();
  g_caches.ResetLockAfterFork();
}

void EnsureInitialized() {
  if (TCM_LIKELY(g_initialized.load(std::memory_order_acquire))) return;
  SpinLockHolder h(&g_init_lock);
  if (g_initialized.load(std::memory_order_relaxed)) return;
  for (size_t cl = 1; cl < kNumClasses; ++cl)
    g_central[cl].Init(static_cast<uint8_t>(cl), &g_pageheap, &g_pagemap);
  InitThreadExitHook();
  // Handlers registered now run last in the prepare phase (pthread_atfork runs them in
  // reverse order), so other libraries' prepare handlers may still allocate.
  pthread_atfork(LockAll, UnlockAll, ResetLocksInChild);
  g_initialized.store(true, std::memory_order_release);
}

}  // namespace tcm
