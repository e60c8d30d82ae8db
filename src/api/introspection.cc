// The profiler's and the checker's view of the allocator (see introspection.h).
#include "api/introspection.h"

#include "api/allocation.h"
#include "api/globals.h"
#include "core/block_lookup.h"

namespace tcm::introspection {

const Options& AllocatorOptions() {
  EnsureInitialized();
  return g_options;
}

int CaptureUserStack(void** pcs, int max_depth) { return tcm::CaptureUserStack(pcs, max_depth); }

void LockAllocator() { LockAll(); }
void UnlockAllocator() { UnlockAll(); }

static HeapBlock ToHeapBlock(const Block& b) { return HeapBlock{b.start, b.size}; }

// Guarded blocks (guarded sampling) live outside the page heap: asked for first.
static bool FindGuarded(uintptr_t addr, HeapBlock* out) {
  uintptr_t start;
  size_t usable;
  if (!g_guarded.FindLive(addr, &start, &usable)) return false;
  *out = HeapBlock{start, usable};
  return true;
}

HeapBlock FindHeapBlock(uintptr_t addr) {
  HeapBlock guarded;
  if (FindGuarded(addr, &guarded)) return guarded;
  SpinLockHolder h(g_pageheap.lock());
  return ToHeapBlock(FindBlock(g_pagemap, addr));
}

HeapBlock FindHeapBlockWhileLocked(uintptr_t addr) {
  HeapBlock guarded;
  if (FindGuarded(addr, &guarded)) return guarded;
  return ToHeapBlock(FindBlock(g_pagemap, addr));
}

bool IsHeapMemory(uintptr_t addr) {
  if ((addr >> kAddressBits) != 0) return false;
  return g_pagemap.GetSpan(PageId::FromAddr(addr)) != nullptr;
}

void ForEachHeapRun(void (*fn)(uintptr_t lo, uintptr_t hi, void* ctx), void* ctx) {
  g_pageheap.ForEachSpanFrom(PageId{0}, [&](Span* s) {
    fn(s->start_addr(), s->start_addr() + s->length.bytes(), ctx);
    return true;
  });
}

void SetHookedTailPad(size_t bytes) { g_hooked_tail_pad.store(bytes); }

void ForEachAllocatorStatic(void (*fn)(uintptr_t lo, uintptr_t hi, void* ctx), void* ctx) {
  auto range = [&](const void* p, size_t bytes) {
    const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
    fn(lo, lo + bytes, ctx);
  };
  range(&g_central[0], sizeof(g_central));
  range(&g_caches, sizeof(g_caches));
  range(&g_pageheap, sizeof(g_pageheap));
  range(&g_pagemap, sizeof(g_pagemap));
  range(&g_samples, sizeof(g_samples));
  range(&g_arena, sizeof(g_arena));
  range(&g_empty_cache, sizeof(g_empty_cache));
  range(&g_cpu_cache, sizeof(g_cpu_cache));
  // The per-CPU slabs hold pointers to free objects only.
  if (g_cpu_cache.active()) range(g_cpu_cache.slabs_, g_cpu_cache.slab_region_bytes());
  // Metadata (spans, thread caches, transfer cache slots, sample records, guarded slots):
  // its stale words point at objects that may be live since (arena.h).
  g_arena.ForEachChunk(fn, ctx);
}

}  // namespace tcm::introspection
