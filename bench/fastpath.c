/* Fast-path microbenchmarks on one thread.
 *
 *   pair  SIZE ITERS           malloc(SIZE) then free it, ITERS times: the thread-cache hit
 *                              path both ways, the figure the design doc quotes in ns per pair.
 *   batch SIZE ITERS [N=1000]  malloc N blocks of SIZE, then free all N, ITERS times: the free
 *                              list drains and refills, so the cache-to-central transfer path
 *                              runs every few dozen calls instead of never.
 *
 * ops counts malloc+free pairs in both modes, so `ns_per_pair` compares across modes, and
 * bench/run.py's callgrind mode divides instruction counts by the same unit. The memory is
 * deliberately not touched: this is the cost of the allocator calls alone. */
#include "bench_util.h"

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s pair|batch SIZE ITERS [BATCH=1000]\n", argv[0]);
    return 2;
  }
  int batch_mode = strcmp(argv[1], "batch") == 0;
  if (!batch_mode && strcmp(argv[1], "pair") != 0) bench_die("mode must be pair or batch");
  size_t size = (size_t)bench_arg(argc, argv, 2, 32);
  uint64_t iters = bench_arg(argc, argv, 3, 1000000);
  uint64_t n = batch_mode ? bench_arg(argc, argv, 4, 1000) : 1;
  void **slots = (void **)malloc(n * sizeof *slots);
  /* One block of the size stays live throughout, as some always would in a real program.
   * Without it the pair loop empties its page on every free, and allocators that retire empty
   * pages (mimalloc) would be measured on that rare path instead of their fast path. */
  void *anchor = malloc(size);
  if (slots == NULL || anchor == NULL) bench_die("out of memory");

  double w0 = bench_wall(), c0 = bench_cpu();
  if (!batch_mode) {
    for (uint64_t i = 0; i < iters; ++i) {
      void *p = malloc(size);
      bench_escape(p);
      free(p);
    }
  } else {
    for (uint64_t i = 0; i < iters; ++i) {
      for (uint64_t j = 0; j < n; ++j) {
        slots[j] = malloc(size);
        bench_escape(slots[j]);
      }
      for (uint64_t j = 0; j < n; ++j) free(slots[j]);
    }
  }
  double w1 = bench_wall(), c1 = bench_cpu();
  free(anchor);
  free(slots);

  uint64_t pairs = iters * n;
  bench_report(pairs, w1 - w0, c1 - c0);
  printf(" size=%zu ns_per_pair=%.2f\n", size, pairs ? (w1 - w0) * 1e9 / (double)pairs : 0.0);
  return 0;
}
