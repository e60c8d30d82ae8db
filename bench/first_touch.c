/* How fast this machine backs fresh anonymous memory, with and without transparent huge
 * pages: maps `mib` MiB (2 MiB aligned), optionally advises MADV_HUGEPAGE, writes one byte
 * every 4 KiB, unmaps; `rounds` times. No allocator is involved: it tells whether a
 * workload's time under a hugepage-aware heap is the machine's (a VM backs a guest's huge
 * pages on their first use: the first round is slow, later ones fast) or ours.
 *
 * Usage: first_touch [huge=0|1] [mib=600] [rounds=3]
 * Prints one line a round: seconds and GB/s. */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/mman.h>

#include "bench_util.h"

int main(int argc, char **argv) {
  const int huge = (int)bench_arg(argc, argv, 1, 0);
  const size_t bytes = (size_t)bench_arg(argc, argv, 2, 600) << 20;
  const int rounds = (int)bench_arg(argc, argv, 3, 3);
  const size_t align = (size_t)2 << 20;
  for (int round = 0; round < rounds; ++round) {
    char *map = mmap(NULL, bytes + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) bench_die("first_touch: mmap failed");
    char *p = (char *)(((uintptr_t)map + align - 1) & ~(uintptr_t)(align - 1));
    if (huge) madvise(p, bytes, MADV_HUGEPAGE);
    const double t0 = bench_wall();
    for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
    const double t = bench_wall() - t0;
    printf("huge=%d round=%d seconds=%.3f gb_per_s=%.2f\n", huge, round, t, (double)bytes / t / 1e9);
    munmap(map, bytes + align);
  }
  return 0;
}
