/* The design doc's two-phase program: one thread allocates `mib` MiB of small objects and
 * frees them; then a second thread does the same. An allocator whose memory cannot move
 * between threads (per-thread arenas) doubles its footprint in phase 2. Once both threads
 * have exited, the program goes on with light allocation activity for a second, and we see
 * whether the memory went back to the system.
 *
 * Usage: phase [mib=300]
 * Reports rss_phase1_mib, rss_phase2_mib (after each phase, everything freed) and
 * rss_idle_mib (after a second of light activity); ops counts mallocs of both phases. */
#include <pthread.h>
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
    size_t size = 16 + (size_t)bench_rng_below(&r, 240); /* small objects, 16..255 bytes */
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
  double w0 = bench_wall(), c0 = bench_cpu();
  uint64_t ops = run_phase();
  long rss1 = bench_rss_bytes();
  ops += run_phase();
  long rss2 = bench_rss_bytes();
  double w1 = bench_wall(), c1 = bench_cpu();
  /* Light activity: a small and a large block every millisecond, for a second. */
  struct timespec ms = {0, 1000000};
  for (int i = 0; i < 1000; ++i) {
    void *a = malloc(100), *b = malloc(300 * 1024);
    bench_escape(a);
    bench_escape(b);
    ((char *)b)[0] = 1;
    free(b);
    free(a);
    nanosleep(&ms, NULL);
  }
  long rss3 = bench_rss_bytes();
  bench_report(ops, w1 - w0, c1 - c0);
  printf(" rss_phase1_mib=%.1f rss_phase2_mib=%.1f rss_idle_mib=%.1f\n", (double)rss1 / 1048576.0,
         (double)rss2 / 1048576.0, (double)rss3 / 1048576.0);
  return 0;
}
