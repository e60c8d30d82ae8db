/* False-sharing checks: does the allocator give different threads blocks in one cache line?
 *
 * Usage: cache_thrash thrash|scratch [threads=2] [iters=1000] [size=8] [writes=10000]
 *   thrash   each thread repeatedly mallocs a small block, writes it `writes` times, frees it.
 *            An allocator that carves consecutive small blocks for different threads out of
 *            one cache line makes the cores fight over that line (active false sharing).
 *   scratch  the main thread allocates one small block per thread, back to back, and hands
 *            them out; each thread frees its block first and then does the thrash loop. An
 *            allocator that lets the freeing thread reuse the block keeps the threads on one
 *            line (passive false sharing); one that returns it to its owner does not.
 * With no false sharing wall time stays flat as threads are added (up to the core count).
 * ops counts writes. */
#include <pthread.h>

#include "bench_util.h"

typedef struct {
  void *initial;  /* scratch: the block handed over by the main thread, else NULL */
  uint64_t iters, size, writes;
  pthread_barrier_t *start;
} Arg;

static void *worker(void *p) {
  Arg *a = (Arg *)p;
  pthread_barrier_wait(a->start);
  free(a->initial);
  for (uint64_t i = 0; i < a->iters; ++i) {
    /* volatile: every write must reach the cache line; otherwise the compiler keeps the
     * byte in a register and there is nothing to share. */
    volatile unsigned char *b = (volatile unsigned char *)malloc(a->size);
    if (b == NULL) bench_die("cache_thrash: out of memory");
    for (uint64_t w = 0; w < a->writes; ++w) b[w % a->size] = (unsigned char)w;
    free((void *)b);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2 || (strcmp(argv[1], "thrash") != 0 && strcmp(argv[1], "scratch") != 0)) {
    fprintf(stderr, "usage: %s thrash|scratch [threads] [iters] [size] [writes]\n", argv[0]);
    return 2;
  }
  int scratch = strcmp(argv[1], "scratch") == 0;
  uint64_t threads = bench_arg(argc, argv, 2, 2);
  uint64_t iters = bench_arg(argc, argv, 3, 1000);
  uint64_t size = bench_arg(argc, argv, 4, 8);
  uint64_t writes = bench_arg(argc, argv, 5, 10000);
  if (threads == 0 || size == 0) bench_die("threads and size must be > 0");

  pthread_t *tids = (pthread_t *)calloc(threads, sizeof *tids);
  Arg *args = (Arg *)calloc(threads, sizeof *args);
  if (tids == NULL || args == NULL) bench_die("out of memory");
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
  for (uint64_t t = 0; t < threads; ++t) {
    args[t].initial = scratch ? malloc(size) : NULL;
    args[t].iters = iters;
    args[t].size = size;
    args[t].writes = writes;
    args[t].start = &start;
  }
  for (uint64_t t = 0; t < threads; ++t)
    if (pthread_create(&tids[t], NULL, worker, &args[t]) != 0) bench_die("pthread_create");
  pthread_barrier_wait(&start);
  double w0 = bench_wall(), c0 = bench_cpu();
  for (uint64_t t = 0; t < threads; ++t) pthread_join(tids[t], NULL);
  double w1 = bench_wall(), c1 = bench_cpu();
  free(args);
  free(tids);
  bench_report(threads * iters * writes, w1 - w0, c1 - c0);
  printf(" mode=%s threads=%llu size=%llu\n", argv[1], (unsigned long long)threads,
         (unsigned long long)size);
  return 0;
}
