/* Larson-like server workload: objects outlive the thread that allocated them.
 *
 * Usage: larson [lanes=2] [generations=20] [steps=10000] [slots=1000] [min=8] [max=1000]
 *               [seed=1]
 * Each lane owns an array of `slots` live blocks. A lane runs as a chain of `generations`
 * short-lived threads: each thread does `steps` times "free a random slot's block, allocate a
 * new one of random size", then starts its successor and exits. So nearly every free is of a
 * block some earlier (now dead) thread allocated, and thread caches are created and torn down
 * constantly -- what a server that hands connections to fresh threads does to its allocator.
 * ops counts allocator calls (two per step). */
#include <pthread.h>

#include "bench_util.h"

/* One cache line a lane (aligned and padded): the lanes' threads run side by side, and a
 * lane's fields written on every step (before 2026-11-28, the PRNG state) shared a line
 * with the other lane's, so every step of both lanes fought over it: two lanes took 3x the
 * time a step of one lane, and the figure swung by +-20% with how the threads interleaved. */
typedef struct {
  unsigned char **slots;
  uint64_t nslots, steps, generations_left, min, max;
  bench_rng rng;  /* handed down the chain so the whole lane is one random sequence */
} __attribute__((aligned(64))) Lane;

static pthread_mutex_t g_done_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_done_cv = PTHREAD_COND_INITIALIZER;
static uint64_t g_lanes_done;

static unsigned char *new_block(const Lane *l, bench_rng *rng) {
  size_t size = (size_t)(l->min + bench_rng_below(rng, l->max - l->min + 1));
  unsigned char *p = (unsigned char *)malloc(size);
  if (p == NULL) bench_die("larson: out of memory");
  /* Touch both ends so the benchmark is not a pure pointer shuffle: a real server writes what
   * it allocates, and the pages must be faulted in. */
  p[0] = (unsigned char)size;
  p[size - 1] = (unsigned char)size;
  return p;
}

static void start_thread(Lane *l);

static void *generation(void *arg) {
  Lane *l = (Lane *)arg;
  bench_rng rng = l->rng;  /* in a register while the generation runs */
  for (uint64_t i = 0; i < l->steps; ++i) {
    uint64_t k = bench_rng_below(&rng, l->nslots);
    free(l->slots[k]);
    l->slots[k] = new_block(l, &rng);
  }
  l->rng = rng;
  if (--l->generations_left > 0) {
    start_thread(l);
  } else {
    pthread_mutex_lock(&g_done_mu);
    ++g_lanes_done;
    pthread_cond_signal(&g_done_cv);
    pthread_mutex_unlock(&g_done_mu);
  }
  return NULL;
}

/* Detached: nobody joins a generation; the lane's last one reports completion instead. */
static void start_thread(Lane *l) {
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &attr, generation, l) != 0) bench_die("pthread_create failed");
  pthread_attr_destroy(&attr);
}

int main(int argc, char **argv) {
  uint64_t lanes = bench_arg(argc, argv, 1, 2);
  uint64_t generations = bench_arg(argc, argv, 2, 20);
  uint64_t steps = bench_arg(argc, argv, 3, 10000);
  uint64_t nslots = bench_arg(argc, argv, 4, 1000);
  uint64_t min = bench_arg(argc, argv, 5, 8);
  uint64_t max = bench_arg(argc, argv, 6, 1000);
  uint64_t seed = bench_arg(argc, argv, 7, 1);
  if (lanes == 0 || generations == 0 || nslots == 0 || min == 0 || max < min)
    bench_die("need lanes, generations, slots > 0 and 0 < min <= max");

  Lane *ls = NULL;
  if (posix_memalign((void **)&ls, 64, lanes * sizeof *ls) != 0) bench_die("out of memory");
  memset(ls, 0, lanes * sizeof *ls);
  for (uint64_t t = 0; t < lanes; ++t) {
    Lane *l = &ls[t];
    l->slots = (unsigned char **)malloc(nslots * sizeof *l->slots);
    if (l->slots == NULL) bench_die("out of memory");
    l->nslots = nslots;
    l->steps = steps;
    l->generations_left = generations;
    l->min = min;
    l->max = max;
    bench_rng_seed(&l->rng, seed * 7919u + t);
    for (uint64_t k = 0; k < nslots; ++k) l->slots[k] = new_block(l, &l->rng);
  }

  double w0 = bench_wall(), c0 = bench_cpu();
  for (uint64_t t = 0; t < lanes; ++t) start_thread(&ls[t]);
  pthread_mutex_lock(&g_done_mu);
  while (g_lanes_done < lanes) pthread_cond_wait(&g_done_cv, &g_done_mu);
  pthread_mutex_unlock(&g_done_mu);
  double w1 = bench_wall(), c1 = bench_cpu();

  for (uint64_t t = 0; t < lanes; ++t) {
    for (uint64_t k = 0; k < nslots; ++k) free(ls[t].slots[k]);
    free(ls[t].slots);
  }
  free(ls);
  bench_report(2 * lanes * generations * steps, w1 - w0, c1 - c0);
  printf(" lanes=%llu generations=%llu\n", (unsigned long long)lanes,
         (unsigned long long)generations);
  return 0;
}
