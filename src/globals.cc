#include "globals.h"

#include <pthread.h>

#include <atomic>

#include "allocation.h"
#include "base/log.h"
#include "platform/os.h"

#include <cstdlib>

namespace tcm {

static void* AllocPagemapNode(size_t bytes) { return g_arena.Alloc(bytes, 64); }

constinit SystemAllocator g_system;
constinit Arena g_arena;
constinit PageMap g_pagemap{&AllocPagemapNode};
constinit PageHeap g_pageheap{&g_pagemap, &g_system, &g_arena};
constinit CentralFreeList g_central[kNumClasses];
constinit ThreadCacheRegistry g_caches;
constinit Scavenger g_scavenger;

static constinit SpinLock g_init_lock;
static std::atomic<bool> g_initialized{false};

// Lock order (outermost first): registry, central lists by class, page heap, arena.
// Transfer-cache locks are leaves (nothing is taken under them, and they are never taken
// under another allocator lock), so they can come last.
void LockAll() {
  g_caches.lock()->Lock();
  for (size_t cl = 1; cl < kNumClasses; ++cl) g_central[cl].lock()->Lock();
  g_pageheap.lock()->Lock();
  g_arena.lock()->Lock();
  for (size_t cl = 1; cl < kNumClasses; ++cl) g_central[cl].transfer_cache()->lock()->Lock();
}

void UnlockAll() {
  for (size_t cl = 1; cl < kNumClasses; ++cl) g_central[cl].transfer_cache()->lock()->Unlock();
  g_arena.lock()->Unlock();
  g_pageheap.lock()->Unlock();
  for (size_t cl = kNumClasses - 1; cl >= 1; --cl) g_central[cl].lock()->Unlock();
  g_caches.lock()->Unlock();
}

void ResetLocksInChild() {
  // Only the forking thread survives; it held every lock, so all of them are free again.
  g_arena.ResetLockAfterFork();
  g_pageheap.ResetLockAfterFork();
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    g_central[cl].ResetLockAfterFork();
    g_central[cl].transfer_cache()->ResetLockAfterFork();
  }
  g_caches.ResetLockAfterFork();
  g_scavenger.AfterForkInChild();
}

// Environment knobs of the scavenger. Read from /proc/self/environ: the first malloc may
// come before libc has set up `environ`.
static void ReadReleaseOptions() {
  char buf[64];
  if (os::GetEnv("TCMALLOC_RELEASE_RATE", buf, sizeof(buf))) {
    char* end = nullptr;
    double rate = strtod(buf, &end);
    if (end == buf || *end != '\0' || !(rate >= 0) || rate > 1e9)
      Log("TCMALLOC_RELEASE_RATE=%s is not a rate >= 0; using the default 1.0", buf);
    else
      g_scavenger.set_release_rate(rate);
  }
  if (os::GetEnv("TCMALLOC_DISABLE_MEMORY_RELEASE", buf, sizeof(buf)) && buf[0] != '\0' && buf[0] != '0')
    g_scavenger.set_release_rate(0);
  // The thread itself starts at a later slow path: creating threads inside the very first
  // malloc (possibly during libc's own start-up) is asking for trouble.
  if (os::GetEnv("TCMALLOC_BACKGROUND_RELEASE", buf, sizeof(buf)) && buf[0] != '\0' && buf[0] != '0')
    g_scavenger.RequestBackgroundThread();
}

void EnsureInitialized() {
  if (TCM_LIKELY(g_initialized.load(std::memory_order_acquire))) return;
  SpinLockHolder h(&g_init_lock);
  if (g_initialized.load(std::memory_order_relaxed)) return;
  for (size_t cl = 1; cl < kNumClasses; ++cl)
    g_central[cl].Init(static_cast<uint8_t>(cl), &g_pageheap, &g_pagemap);
  InitThreadExitHook();
  ReadReleaseOptions();
  g_pageheap.set_clock(Scavenger::NowNs());
  // Handlers registered now run last in the prepare phase (pthread_atfork runs them in
  // reverse order), so other libraries' prepare handlers may still allocate.
  pthread_atfork(LockAll, UnlockAll, ResetLocksInChild);
  g_initialized.store(true, std::memory_order_release);
}

}  // namespace tcm
