// What the page size alone can buy a pointer-chasing program on this machine: a dependent
// walk in random order over a region of 128-byte slots, the region backed by 2 MiB pages
// (MADV_HUGEPAGE) or kept on 4 KiB pages (MADV_NOHUGEPAGE). No allocator is involved (the
// region is one mmap), so the ratio of the two is the best any allocator's page placement
// can do against one on 4 KiB pages with the same node layout.
//
//   tlb_bound HUGE [MIB] [STEPS]   HUGE 1 or 0; prints ns per step and AnonHugePages
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double Seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static long AnonHugeKib(void) {
  FILE* f = fopen("/proc/self/smaps_rollup", "r");
  if (f == NULL) return -1;
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "AnonHugePages:", 14) == 0) kib = atol(line + 14);
  fclose(f);
  return kib;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s HUGE(0|1) [MIB=1024] [STEPS=20000000]\n", argv[0]);
    return 2;
  }
  const int huge = atoi(argv[1]);
  const size_t mib = argc > 2 ? strtoull(argv[2], NULL, 10) : 1024;
  const size_t steps = argc > 3 ? strtoull(argv[3], NULL, 10) : 20000000;
  const size_t kHuge = (size_t)2 << 20, kSlot = 128;
  const size_t bytes = mib << 20, slots = bytes / kSlot;
  char* raw = mmap(NULL, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  uint32_t* order = malloc(slots * sizeof *order);
  if (raw == MAP_FAILED || order == NULL || slots < 2) {
    fprintf(stderr, "tlb_bound: out of memory\n");
    return 1;
  }
  char* base = (char*)(((uintptr_t)raw + kHuge - 1) & ~(uintptr_t)(kHuge - 1));
  madvise(base, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  // One cycle through every slot, in a random order (xorshift, fixed seed).
  for (size_t i = 0; i < slots; ++i) order[i] = (uint32_t)i;
  uint64_t x = 88172645463325252ull;
  for (size_t i = slots - 1; i > 0; --i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const size_t j = (size_t)(x % (i + 1));
    const uint32_t t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  for (size_t i = 0; i < slots; ++i)
    *(void**)(base + (size_t)order[i] * kSlot) = base + (size_t)order[(i + 1) % slots] * kSlot;
  free(order);
  void* p = base;
  const double t0 = Seconds();
  for (size_t i = 0; i < steps; ++i) p = *(void**)p;
  const double t1 = Seconds();
  printf("huge=%d mib=%zu ns_per_step=%.1f anon_huge_mib=%ld end=%p\n", huge, mib, (t1 - t0) * 1e9 / (double)steps,
         AnonHugeKib() >> 10, p);
  return 0;
}
