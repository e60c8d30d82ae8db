/* peak_stats: where an allocator's memory is at a program's RSS peak. Runs t-test1's
 * single-threaded loop (random malloc/realloc/free over BINS bins, sizes uniform in
 * [1, MAX_SIZE], one byte written per 4 KiB page) and, every 5000 operations, reads VmRSS;
 * at each new high it asks the preloaded allocator for its MallocExtension statistics
 * (MallocExtension_GetStats, looked up with dlsym, so any allocator runs: others print
 * only the RSS figures). At the end it prints the statistics taken at the highest RSS
 * and the bytes the program had requested then.
 *
 * Usage: LD_PRELOAD=<lib> peak_stats [max_size=65536] [ops=200000] [bins=1000] [seed=1]
 * Not a run.py workload: bench/README.md ("Thirteenth session") reads it by hand. */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "bench_util.h"

typedef void (*GetStatsFn)(char *buffer, int length);

static long rss_kib(void) {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f == NULL) return 0;
  if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  fclose(f);
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void touch(unsigned char *p, size_t size) {
  for (size_t off = 0; off < size; off += 4096) p[off] = 1;
  p[size - 1] = 1;
}

int main(int argc, char **argv) {
  const uint64_t max_size = bench_arg(argc, argv, 1, 65536);
  const uint64_t ops = bench_arg(argc, argv, 2, 200000);
  const uint64_t nbins = bench_arg(argc, argv, 3, 1000);
  bench_rng rng;
  bench_rng_seed(&rng, bench_arg(argc, argv, 4, 1));
  GetStatsFn get_stats = (GetStatsFn)dlsym(RTLD_DEFAULT, "MallocExtension_GetStats");
  unsigned char **p = calloc(nbins, sizeof(*p));
  size_t *size = calloc(nbins, sizeof(*size));
  static char stats[1 << 16];
  if (p == NULL || size == NULL) bench_die("peak_stats: out of memory");
  long peak = 0;
  size_t requested_at_peak = 0;
  for (uint64_t i = 0; i < ops; ++i) {
    const uint64_t k = bench_rng_below(&rng, nbins);
    const uint64_t r = bench_rng_next(&rng);
    const size_t want = 1 + (size_t)((r >> 8) % max_size);
    if (p[k] == NULL || (r & 3) == 0) {
      unsigned char *q = p[k] == NULL ? malloc(want) : realloc(p[k], want);
      if (q == NULL) bench_die("peak_stats: out of memory");
      p[k] = q;
      size[k] = want;
      touch(q, want);
    } else {
      free(p[k]);
      p[k] = NULL;
      size[k] = 0;
    }
    if (i % 5000 != 0) continue;
    const long now = rss_kib();
    if (now <= peak) continue;
    peak = now;
    requested_at_peak = 0;
    for (uint64_t j = 0; j < nbins; ++j) requested_at_peak += size[j];
    if (get_stats != NULL) get_stats(stats, (int)sizeof(stats));
  }
  printf("peak_rss_kib=%ld requested_kib_at_peak=%zu max_size=%llu ops=%llu\n", peak, requested_at_peak / 1024,
         (unsigned long long)max_size, (unsigned long long)ops);
  if (get_stats != NULL) fputs(stats, stdout);
  for (uint64_t j = 0; j < nbins; ++j) free(p[j]);
  free(p);
  free(size);
  return 0;
}
