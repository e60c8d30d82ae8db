/* t-test1 / t-test2: random malloc, calloc, realloc and free over an array of "bins", the
 * workload of ptmalloc's README and of the TCMalloc design doc's graphs.
 *
 *   t-test1: every thread owns a private array of bins, so threads share nothing but the
 *            allocator: it measures how well the allocator scales when nothing needs to.
 *   t-test2: all threads share one array of bins (built with -DT_TEST_SHARED=1); a thread
 *            frees blocks other threads allocated, so cross-thread frees and lock traffic
 *            inside the allocator show up.
 *
 * Usage: t-test1|t-test2 [threads=2] [ops_per_thread=1000000] [max_size=10000] [bins=1000]
 *        [seed=1]
 * Each op is exactly one allocator call. A block's size is uniform in [1, max_size]. Blocks
 * carry a tag byte on every 4 KiB page and at the end, checked when freed or reallocated: this
 * touches the memory the way a program would (so fresh pages fault in) without memset costs
 * swamping the allocator, and it catches an allocator that hands out overlapping blocks. */
#include <pthread.h>

#include "bench_util.h"

#ifndef T_TEST_SHARED
#define T_TEST_SHARED 0
#endif

enum { kPage = 4096 };

typedef struct {
  unsigned char *p;
  size_t size;
} Bin;

typedef struct {
  Bin *bins;               /* this thread's bins (t-test1) or the shared array (t-test2) */
  pthread_mutex_t *locks;  /* one per bin in t-test2, NULL in t-test1 */
  uint64_t nbins, ops, max_size, seed;
  pthread_barrier_t *start;
} Worker;

static unsigned char tag_of(const Bin *b) { return (unsigned char)(b->size * 131u + 7u); }

static void fill(Bin *b) {
  unsigned char t = tag_of(b);
  for (size_t off = 0; off < b->size; off += kPage) b->p[off] = t;
  b->p[b->size - 1] = t;
}

static void check(const Bin *b, size_t upto) {
  unsigned char t = tag_of(b);
  for (size_t off = 0; off < upto; off += kPage)
    if (b->p[off] != t) bench_die("t-test: block contents changed while allocated");
  if (upto == b->size && b->p[b->size - 1] != t) bench_die("t-test: block tail changed");
}

/* One allocator call on bin `b`: allocate into an empty bin; otherwise mostly free, sometimes
 * realloc (which must preserve the prefix). */
static void step(Bin *b, bench_rng *rng, uint64_t max_size) {
  uint64_t r = bench_rng_next(rng);
  size_t size = 1 + (size_t)((r >> 8) % max_size);
  if (b->p == NULL) {
    b->p = (r & 7) == 0 ? (unsigned char *)calloc(1, size) : (unsigned char *)malloc(size);
    if (b->p == NULL) bench_die("t-test: out of memory");
    if ((r & 7) == 0 && (b->p[0] != 0 || b->p[size - 1] != 0)) bench_die("calloc not zeroed");
    b->size = size;
    fill(b);
  } else if ((r & 3) == 0) {
    Bin nb;
    check(b, b->size < size ? b->size : size);
    nb.p = (unsigned char *)realloc(b->p, size);
    if (nb.p == NULL) bench_die("t-test: realloc failed");
    nb.size = size;
    if (nb.p[0] != tag_of(b)) bench_die("t-test: realloc lost the contents");
    *b = nb;
    fill(b);
  } else {
    check(b, b->size);
    free(b->p);
    b->p = NULL;
  }
}

static void *worker(void *arg) {
  Worker *w = (Worker *)arg;
  bench_rng rng;
  bench_rng_seed(&rng, w->seed);
  pthread_barrier_wait(w->start);
  for (uint64_t i = 0; i < w->ops; ++i) {
    uint64_t k = bench_rng_below(&rng, w->nbins);
    if (w->locks) pthread_mutex_lock(&w->locks[k]);
    step(&w->bins[k], &rng, w->max_size);
    if (w->locks) pthread_mutex_unlock(&w->locks[k]);
  }
  if (!T_TEST_SHARED) {
    /* Private bins die with their thread, as a thread-local data structure would. */
    for (uint64_t k = 0; k < w->nbins; ++k) free(w->bins[k].p);
    free(w->bins);
  }
  return NULL;
}

int main(int argc, char **argv) {
  uint64_t threads = bench_arg(argc, argv, 1, 2);
  uint64_t ops = bench_arg(argc, argv, 2, 1000000);
  uint64_t max_size = bench_arg(argc, argv, 3, 10000);
  uint64_t nbins = bench_arg(argc, argv, 4, 1000);
  uint64_t seed = bench_arg(argc, argv, 5, 1);
  if (threads == 0 || max_size == 0 || nbins == 0) bench_die("threads, max_size, bins must be > 0");

  pthread_t *tids = (pthread_t *)calloc(threads, sizeof *tids);
  Worker *ws = (Worker *)calloc(threads, sizeof *ws);
  Bin *shared = NULL;
  pthread_mutex_t *locks = NULL;
  pthread_barrier_t start;
  if (T_TEST_SHARED) {
    shared = (Bin *)calloc(nbins, sizeof *shared);
    locks = (pthread_mutex_t *)calloc(nbins, sizeof *locks);
    if (shared == NULL || locks == NULL) bench_die("out of memory");
    for (uint64_t k = 0; k < nbins; ++k) pthread_mutex_init(&locks[k], NULL);
  }
  pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
  for (uint64_t t = 0; t < threads; ++t) {
    ws[t].bins = T_TEST_SHARED ? shared : (Bin *)calloc(nbins, sizeof(Bin));
    if (ws[t].bins == NULL) bench_die("out of memory");
    ws[t].locks = locks;
    ws[t].nbins = nbins;
    ws[t].ops = ops;
    ws[t].max_size = max_size;
    ws[t].seed = seed * 1000003u + t;
    ws[t].start = &start;
    if (pthread_create(&tids[t], NULL, worker, &ws[t]) != 0) bench_die("pthread_create failed");
  }
  pthread_barrier_wait(&start);
  double w0 = bench_wall(), c0 = bench_cpu();
  for (uint64_t t = 0; t < threads; ++t) pthread_join(tids[t], NULL);
  double w1 = bench_wall(), c1 = bench_cpu();

  if (T_TEST_SHARED) {
    for (uint64_t k = 0; k < nbins; ++k) free(shared[k].p);
    free(shared);
    free(locks);
  }
  free(ws);
  free(tids);
  bench_report(threads * ops, w1 - w0, c1 - c0);
  printf(" threads=%llu max_size=%llu bins=%llu\n", (unsigned long long)threads,
         (unsigned long long)max_size, (unsigned long long)nbins);
  return 0;
}
