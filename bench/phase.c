/* The design doc's two-phase program: one thread allocates `mib` MiB of small objects
 * (16..512 bytes) and frees them; then a second thread does the same. An allocator whose
 * memory cannot move between threads (per-thread arenas) doubles its footprint in phase 2.
 * Once both threads have exited, the program goes on quietly and we see whether the memory
 * went back to the system without any call into the allocator but malloc and free:
 *
 *   after=hits   light work: a malloc/free pair of 64..575 bytes every millisecond for a
 *                second (only thread-cache hits: no allocator slow path is ever needed)
 *   after=sleep  no allocation at all for five seconds (only a background thread can help)
 *
 * Usage: phase [mib=300] [after=hits]
 * Reports rss_phase1_mib, rss_phase2_mib (after each phase, everything freed), rss_idle_mib
 * (at the end of the quiet period) and idle_s_to_20mib (seconds into the quiet period until
 * RSS was <= 20 MiB, checked every 10 ms; -1 = never); ops counts mallocs of both phases. */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

static uint64_t g_bytes;

static void *phase(void *arg) {
  (void)arg;
  bench_rng r;
  bench_rng_seed(&r, 42);
  uint64_t cap = g_bytes / 16 + 1, n = 0, total = 0;
  void **objs = (void **)malloc(cap * sizeof(void *));
  if (objs == NULL) bench_die("phase: out of memory");
  while (total < g_bytes && n < cap) {
    size_t size = 16 + (size_t)bench_rng_below(&r, 497); /* small objects, 16..512 bytes */
    char *p = (char *)malloc(size);
    if (p == NULL) bench_die("phase: out of memory");
    p[0] = (char)size;
    p[size - 1] = (char)size;
    objs[n++] = p;
    total += size;
  }
  for (uint64_t i = 0; i < n; ++i) free(objs[i]);
  free(objs);
  return (void *)(uintptr_t)n;
}

static uint64_t run_phase(void) {
  pthread_t t;
  void *ret;
  if (pthread_create(&t, NULL, phase, NULL) != 0) bench_die("phase: pthread_create");
  pthread_join(t, &ret);
  return (uint64_t)(uintptr_t)ret;
}

int main(int argc, char **argv) {
  g_bytes = bench_arg(argc, argv, 1, 300) << 20;
  const int sleep_only = argc > 2 && strcmp(argv[2], "sleep") == 0;
  if (argc > 2 && !sleep_only && strcmp(argv[2], "hits") != 0) bench_die("phase: after= must be hits or sleep");
  double w0 = bench_wall(), c0 = bench_cpu();
  uint64_t ops = run_phase();
  long rss1 = bench_rss_bytes();
  ops += run_phase();
  long rss2 = bench_rss_bytes();
  double w1 = bench_wall(), c1 = bench_cpu();
  bench_rng r;
  bench_rng_seed(&r, 7);
  const int steps = sleep_only ? 500 : 1000;                   /* 5 s or 1 s */
  struct timespec pause = {0, sleep_only ? 10000000 : 1000000}; /* 10 ms or 1 ms */
  double to_20mib = -1;
  const double quiet0 = bench_wall();
  for (int i = 0; i < steps; ++i) {
    if (!sleep_only) {
      void *a = malloc(64 + (size_t)bench_rng_below(&r, 512));
      bench_escape(a);
      free(a);
    }
    nanosleep(&pause, NULL);
    if (to_20mib < 0 && (sleep_only || i % 10 == 9) && bench_rss_bytes() <= (20L << 20))
      to_20mib = bench_wall() - quiet0;
  }
  long rss3 = bench_rss_bytes();
  bench_report(ops, w1 - w0, c1 - c0);
  printf(" rss_phase1_mib=%.1f rss_phase2_mib=%.1f rss_idle_mib=%.1f idle_s_to_20mib=%.2f\n", (double)rss1 / 1048576.0,
         (double)rss2 / 1048576.0, (double)rss3 / 1048576.0, to_20mib);
  return 0;
}
