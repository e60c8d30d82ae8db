/* xmalloc-like producer/consumer: one thread allocates, another frees.
 *
 * Usage: xmalloc [pairs=1] [objects=2000000] [size=64] [batch=256] [seed=1]
 * Each pair is a producer that mallocs `objects` blocks (sizes uniform in [size/2, size], so
 * several size classes are in play) and hands them over in batches of `batch` to its consumer,
 * which frees them. Every free is remote: a per-thread cache fills on the consumer side and
 * drains on the producer side, so this measures the path between thread caches and the shared
 * lists -- the case gperftools users report as 40x slower than glibc (REFERENCE.md, #1448).
 * At most kMaxQueued batches wait in a queue, so memory stays bounded whoever is faster.
 * ops counts frees; the figure to compare is frees per wall-second. */
#include <pthread.h>

#include "bench_util.h"

enum { kMaxQueued = 64 };

typedef struct Batch {
  struct Batch *next;
  uint64_t count;
  void *objs[];  /* the batch is itself malloc'd by the producer and freed by the consumer */
} Batch;

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t not_empty, not_full;
  Batch *head, *tail;
  uint64_t queued;
  int producer_done;
  uint64_t objects, size, batch, seed;
} Pair;

static void push(Pair *q, Batch *b) {
  pthread_mutex_lock(&q->mu);
  while (q->queued >= kMaxQueued) pthread_cond_wait(&q->not_full, &q->mu);
  b->next = NULL;
  if (q->tail) q->tail->next = b; else q->head = b;
  q->tail = b;
  ++q->queued;
  pthread_cond_signal(&q->not_empty);
  pthread_mutex_unlock(&q->mu);
}

/* Returns NULL once the producer is done and the queue is drained. */
static Batch *pop(Pair *q) {
  pthread_mutex_lock(&q->mu);
  while (q->head == NULL && !q->producer_done) pthread_cond_wait(&q->not_empty, &q->mu);
  Batch *b = q->head;
  if (b) {
    q->head = b->next;
    if (q->head == NULL) q->tail = NULL;
    --q->queued;
    pthread_cond_signal(&q->not_full);
  }
  pthread_mutex_unlock(&q->mu);
  return b;
}

static void *producer(void *arg) {
  Pair *q = (Pair *)arg;
  bench_rng rng;
  bench_rng_seed(&rng, q->seed);
  uint64_t lo = q->size / 2 ? q->size / 2 : 1;
  for (uint64_t done = 0; done < q->objects;) {
    uint64_t n = q->objects - done < q->batch ? q->objects - done : q->batch;
    Batch *b = (Batch *)malloc(sizeof(Batch) + n * sizeof(void *));
    if (b == NULL) bench_die("xmalloc: out of memory");
    for (uint64_t i = 0; i < n; ++i) {
      size_t sz = (size_t)(lo + bench_rng_below(&rng, q->size - lo + 1));
      unsigned char *p = (unsigned char *)malloc(sz);
      if (p == NULL) bench_die("xmalloc: out of memory");
      p[0] = 1;  /* a producer initialises what it hands over */
      b->objs[i] = p;
    }
    b->count = n;
    push(q, b);
    done += n;
  }
  pthread_mutex_lock(&q->mu);
  q->producer_done = 1;
  pthread_cond_signal(&q->not_empty);
  pthread_mutex_unlock(&q->mu);
  return NULL;
}

static void *consumer(void *arg) {
  Pair *q = (Pair *)arg;
  for (Batch *b; (b = pop(q)) != NULL;) {
    for (uint64_t i = 0; i < b->count; ++i) {
      if (((unsigned char *)b->objs[i])[0] != 1) bench_die("xmalloc: object corrupted");
      free(b->objs[i]);
    }
    free(b);
  }
  return NULL;
}

int main(int argc, char **argv) {
  uint64_t pairs = bench_arg(argc, argv, 1, 1);
  uint64_t objects = bench_arg(argc, argv, 2, 2000000);
  uint64_t size = bench_arg(argc, argv, 3, 64);
  uint64_t batch = bench_arg(argc, argv, 4, 256);
  uint64_t seed = bench_arg(argc, argv, 5, 1);
  if (pairs == 0 || size == 0 || batch == 0) bench_die("pairs, size, batch must be > 0");

  Pair *qs = (Pair *)calloc(pairs, sizeof *qs);
  pthread_t *tids = (pthread_t *)calloc(2 * pairs, sizeof *tids);
  if (qs == NULL || tids == NULL) bench_die("out of memory");
  double w0 = bench_wall(), c0 = bench_cpu();
  for (uint64_t i = 0; i < pairs; ++i) {
    Pair *q = &qs[i];
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    q->objects = objects;
    q->size = size;
    q->batch = batch;
    q->seed = seed * 104729u + i;
    if (pthread_create(&tids[2 * i], NULL, producer, q) != 0 ||
        pthread_create(&tids[2 * i + 1], NULL, consumer, q) != 0)
      bench_die("pthread_create failed");
  }
  for (uint64_t i = 0; i < 2 * pairs; ++i) pthread_join(tids[i], NULL);
  double w1 = bench_wall(), c1 = bench_cpu();
  free(tids);
  free(qs);
  bench_report(pairs * objects, w1 - w0, c1 - c0);
  printf(" pairs=%llu size=%llu\n", (unsigned long long)pairs, (unsigned long long)size);
  return 0;
}
