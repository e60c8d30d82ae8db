/* A burst, then light traffic that reaches past the CPU's cache: `mib` MiB of blocks of 16
 * sizes from 64 to 3904 bytes are allocated (each written) and all freed; then for `secs`
 * seconds, every 10 ms, `per` blocks of each size are allocated and freed, as a request
 * handler builds and drops its objects. The CPU's cache holds a few dozen blocks of the
 * larger sizes, so each round moves batches between it and the central lists: an
 * allocator that keeps what its middle tier held after the burst as long as anybody uses
 * it stays at the burst's leftovers.
 *
 * Usage: light_batches [mib=256] [secs=3] [per=300]
 * Reports rss_burst_mib (after the burst was freed) and rss_light_mib (at the end); ops
 * counts mallocs. */
#include <string.h>
#include <time.h>

#include "bench_util.h"

enum { kSizes = 16 };

int main(int argc, char **argv) {
  const uint64_t bytes = bench_arg(argc, argv, 1, 256) << 20;
  const uint64_t secs = bench_arg(argc, argv, 2, 3);
  const uint64_t per = bench_arg(argc, argv, 3, 300);
  size_t sizes[kSizes];
  for (int i = 0; i < kSizes; ++i) sizes[i] = 64 + 256 * (size_t)i;
  const uint64_t cap = bytes / 64 + per + 1;
  void **objs = (void **)malloc(cap * sizeof(void *));
  if (objs == NULL) bench_die("light_batches: out of memory");
  double w0 = bench_wall(), c0 = bench_cpu();
  uint64_t n = 0, total = 0, ops = 0;
  while (total < bytes && n < cap) {
    const size_t s = sizes[n % kSizes];
    char *p = (char *)malloc(s);
    if (p == NULL) bench_die("light_batches: out of memory");
    memset(p, 1, s);
    objs[n++] = p;
    total += s;
  }
  for (uint64_t i = 0; i < n; ++i) free(objs[i]);
  ops += n;
  const long rss_burst = bench_rss_bytes();
  struct timespec pause = {0, 10000000};
  for (uint64_t round = 0; round < secs * 100; ++round) {
    for (int k = 0; k < kSizes; ++k) {
      for (uint64_t i = 0; i < per; ++i) {
        objs[i] = malloc(sizes[k]);
        if (objs[i] == NULL) bench_die("light_batches: out of memory");
        bench_escape(objs[i]);
      }
      for (uint64_t i = 0; i < per; ++i) free(objs[i]);
      ops += per;
    }
    nanosleep(&pause, NULL);
  }
  const long rss_light = bench_rss_bytes();
  bench_report(ops, bench_wall() - w0, bench_cpu() - c0);
  printf(" rss_burst_mib=%.1f rss_light_mib=%.1f\n", (double)rss_burst / 1048576.0, (double)rss_light / 1048576.0);
  free(objs);
  return 0;
}
