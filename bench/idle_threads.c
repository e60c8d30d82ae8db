/* Many threads that each churn a few hundred blocks and then wait: how much memory do the
 * allocator's front-end caches keep for threads that went idle?
 *
 * Usage: idle_threads [threads=1000] [blocks=256] [min=8] [max=1032]
 * Each thread allocates `blocks` blocks of random sizes in [min, max], frees them, and then
 * waits on a barrier with all the others. While all of them wait, the program reports its RSS
 * growth and, where the allocator has it (tcmalloc's MallocExtension C API, looked up with
 * dlsym), tcmalloc.current_total_thread_cache_bytes: the bytes its thread or CPU caches hold.
 * Threads use 64 KiB stacks so the thread count, not stack memory, is what is measured. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>

#include "bench_util.h"

static pthread_barrier_t g_churned, g_release;
static uint64_t g_blocks, g_min, g_max;

static void *worker(void *arg) {
  bench_rng rng;
  bench_rng_seed(&rng, (uint64_t)(uintptr_t)arg + 1);
  void **v = (void **)malloc(g_blocks * sizeof(void *));
  if (v == NULL) bench_die("idle_threads: out of memory");
  for (uint64_t i = 0; i < g_blocks; ++i) {
    size_t n = (size_t)(g_min + bench_rng_below(&rng, g_max - g_min + 1));
    v[i] = malloc(n);
    if (v[i] == NULL) bench_die("idle_threads: out of memory");
    memset(v[i], 0x5a, n < 64 ? n : 64);
  }
  for (uint64_t i = 0; i < g_blocks; ++i) free(v[i]);
  free(v);
  pthread_barrier_wait(&g_churned);  /* now idle until the main thread measured */
  pthread_barrier_wait(&g_release);
  return NULL;
}

int main(int argc, char **argv) {
  const uint64_t threads = bench_arg(argc, argv, 1, 1000);
  g_blocks = bench_arg(argc, argv, 2, 256);
  g_min = bench_arg(argc, argv, 3, 8);
  g_max = bench_arg(argc, argv, 4, 1032);
  if (threads == 0 || g_blocks == 0 || g_min == 0 || g_max < g_min) bench_die("idle_threads: bad arguments");
  int (*get_property)(const char *, size_t *) =
      (int (*)(const char *, size_t *))dlsym(RTLD_DEFAULT, "MallocExtension_GetNumericProperty");
  pthread_t *tids = (pthread_t *)malloc(threads * sizeof(pthread_t));
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_barrier_init(&g_churned, NULL, (unsigned)threads + 1);
  pthread_barrier_init(&g_release, NULL, (unsigned)threads + 1);
  const long rss0 = bench_rss_bytes();
  const double w0 = bench_wall(), c0 = bench_cpu();
  for (uint64_t t = 0; t < threads; ++t)
    if (pthread_create(&tids[t], &attr, worker, (void *)(uintptr_t)t) != 0) bench_die("idle_threads: pthread_create");
  pthread_barrier_wait(&g_churned);
  const double wall = bench_wall() - w0, cpu = bench_cpu() - c0;
  const long rss1 = bench_rss_bytes();
  size_t cached = 0;
  const int have = get_property != NULL && get_property("tcmalloc.current_total_thread_cache_bytes", &cached);
  pthread_barrier_wait(&g_release);
  for (uint64_t t = 0; t < threads; ++t) pthread_join(tids[t], NULL);
  bench_report(threads * g_blocks * 2, wall, cpu);
  printf(" rss_growth_mib=%.1f", (double)(rss1 - rss0) / 1048576.0);
  if (have) printf(" frontend_cache_mib=%.2f", (double)cached / 1048576.0);
  printf("\n");
  return 0;
}
