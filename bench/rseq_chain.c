// What the per-CPU pair loop's shape costs on this machine, without the allocator: a pop
// and a push on one array of pointers with a header {current, end, begin}, each as a
// per-CPU fast path does it (store a critical-section descriptor into glibc's rseq area,
// load the CPU number, find the header from it), run as a malloc/free pair loop. The
// push finds its header by the popped pointer's class, looked up in one of three ways:
//   const     the class is known (a sized delete would be)
//   one-load  one load that depends on the pointer (a flat class table)
//   two-load  two (root, then leaf: the pagemap's ClassOf)
// The ns per pair of each says what the free's look-up adds to the chain one pair carries
// to the next (the class picks the header the next pop reads).
//
//   rseq_chain [PAIRS=50M]
// No restartable sequence is ever entered: the descriptor names a range the loop never
// runs in, so the kernel has nothing to restart.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/rseq.h>
#include <time.h>

struct Header {  // as the per-CPU slab's (cpu_cache.h SlabHeader)
  uint32_t current;
  uint16_t end;
  uint16_t begin;
};

enum { kSlots = 1 << 16, kClass = 5, kPagesPerLeaf = 1 << 20 };
static uint64_t g_slabs[2 * kSlots] __attribute__((aligned(4096)));  // two CPUs' worth
static uint8_t g_leaf[kPagesPerLeaf];   // class of each 8 KiB page
static uint8_t* g_root[8];              // the two-load table's first level
static uint64_t* volatile g_slab_base = g_slabs;
static int g_lookup;                    // 0 const, 1 one-load, 2 two-load

// A descriptor for a range no code of this loop is in: valid for the kernel, never entered.
__asm__(".text\n.p2align 4\nrseq_chain_start: nop\n.long 0x53053053\nrseq_chain_abort: ud2\n");
extern char rseq_chain_start[], rseq_chain_abort[];
static struct rseq_cs g_cs __attribute__((aligned(32)));

static volatile struct rseq* Area(void) {
  return (volatile struct rseq*)((char*)__builtin_thread_pointer() + __rseq_offset);
}

static volatile struct Header* HeaderOf(volatile struct rseq* area, size_t cl) {
  area->rseq_cs = (uint64_t)(uintptr_t)&g_cs;
  const uint32_t cpu = area->cpu_id & 1;
  return (volatile struct Header*)&g_slab_base[(size_t)cpu * kSlots + cl];
}

__attribute__((noinline)) static void* Pop(void) {
  volatile struct Header* h = HeaderOf(Area(), kClass);
  const uint32_t c = h->current;
  if ((uint16_t)c <= h->begin) return NULL;
  uint64_t* slab = (uint64_t*)(h - kClass);
  void* p = (void*)slab[c - 1];
  h->current = c - 1;
  return p;
}

__attribute__((noinline)) static int Push(void* p) {
  const uintptr_t page = (uintptr_t)p >> 13;
  size_t cl = kClass;
  if (g_lookup == 1) cl = g_leaf[page & (kPagesPerLeaf - 1)];
  if (g_lookup == 2) cl = g_root[((uintptr_t)p >> 33) & 7][page & (kPagesPerLeaf - 1)];
  volatile struct Header* h = HeaderOf(Area(), cl);
  const uint32_t c = h->current;
  if ((uint16_t)c >= h->end) return 0;
  uint64_t* slab = (uint64_t*)(h - cl);
  if ((void*)slab[c - 1] == p) return 0;  // the double free in a row the real push refuses
  slab[c] = (uint64_t)(uintptr_t)p;
  h->current = c + 1;
  return 1;
}

int main(int argc, char** argv) {
  const long pairs = argc > 1 ? atol(argv[1]) : 50000000;
  g_cs.start_ip = (uintptr_t)rseq_chain_start;
  g_cs.post_commit_offset = 1;
  g_cs.abort_ip = (uintptr_t)rseq_chain_abort;
  for (int i = 0; i < 8; ++i) g_root[i] = g_leaf;
  for (size_t i = 0; i < kPagesPerLeaf; ++i) g_leaf[i] = kClass;
  for (int cpu = 0; cpu < 2; ++cpu) {
    uint64_t* slab = g_slabs + (size_t)cpu * kSlots;
    struct Header* h = (struct Header*)&slab[kClass];
    h->begin = 200;
    h->end = 400;
    h->current = 300;
    for (int i = 200; i < 300; ++i) slab[i] = (uint64_t)(uintptr_t)&slab[i];
  }
  static const char* const kNames[] = {"const", "one-load", "two-load"};
  for (g_lookup = 0; g_lookup < 3; ++g_lookup) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long failed = 0;
    for (long i = 0; i < pairs; ++i) failed += !Push(Pop());
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)pairs;
    printf("lookup=%s ns_per_pair=%.2f%s\n", kNames[g_lookup], ns, failed ? " (a push failed)" : "");
  }
  Area()->rseq_cs = 0;
  return 0;
}
