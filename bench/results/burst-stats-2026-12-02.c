/* The burst of bench/light_batches (256 MiB of blocks of 64 + 256 i bytes, i = 0..15, each
 * written), then the RSS and, from a preloaded allocator that has it,
 * MallocExtension_GetStats, before anything is freed: where the peak of that workload sits
 * (bench/README, thirty-first session: span tails against class rounding).
 *
 *   gcc -O2 -Ibench -o /tmp/burst bench/results/burst-stats-2026-12-02.c -ldl
 *   LD_PRELOAD=build/src/libtcmalloc_minimal.so /tmp/burst */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "bench_util.h"

typedef void (*GetStatsFn)(char *buffer, int length);

int main(void) {
  size_t sizes[16];
  for (int i = 0; i < 16; ++i) sizes[i] = 64 + 256 * (size_t)i;
  const size_t bytes = (size_t)256 << 20, cap = bytes / 64 + 1;
  void **objs = malloc(cap * sizeof(void *));
  if (objs == NULL) bench_die("burst-stats: out of memory");
  size_t n = 0, total = 0;
  while (total < bytes) {
    const size_t s = sizes[n % 16];
    char *p = malloc(s);
    if (p == NULL) bench_die("burst-stats: out of memory");
    memset(p, 1, s);
    objs[n++] = p;
    total += s;
  }
  printf("rss_kib=%ld requested_kib=%zu objects=%zu\n", bench_rss_bytes() / 1024, total / 1024, n);
  GetStatsFn get_stats = (GetStatsFn)dlsym(RTLD_DEFAULT, "MallocExtension_GetStats");
  static char stats[1 << 17];
  if (get_stats != NULL) {
    get_stats(stats, (int)sizeof(stats));
    fputs(stats, stdout);
  }
  return 0;
}
