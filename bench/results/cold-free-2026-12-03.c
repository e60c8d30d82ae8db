/* Frees of cold small blocks (bench/README.md, thirty-eighth session): N blocks of SIZE bytes
 * are allocated and written, put in random order (shuffle=1) or left in allocation order
 * (0), 64 MiB of other memory is written so that neither the blocks nor the allocator's
 * metadata are in the caches, and then every block is freed; prints ns a free, averaged
 * over ROUNDS rounds. A hash table or a graph emptied long after it was built frees like
 * shuffle=1.
 *
 * Build: gcc -O2 -o /tmp/cold_free bench/results/cold-free-2026-12-03.c
 * Usage: LD_PRELOAD=<lib> /tmp/cold_free N ROUNDS SHUFFLE SIZE   (e.g. 2000000 4 1 16) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static char evict[64 << 20];

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s N ROUNDS SHUFFLE SIZE\n", argv[0]);
    return 2;
  }
  const long n = atol(argv[1]);
  const int rounds = atoi(argv[2]), shuffle = atoi(argv[3]);
  const size_t size = (size_t)atol(argv[4]);
  void **v = malloc((size_t)n * sizeof(void *));
  if (v == NULL || n < 1 || rounds < 1 || size < sizeof(long)) return 2;
  double freeing = 0;
  srandom(1);
  for (int r = 0; r < rounds; r++) {
    for (long i = 0; i < n; i++) {
      v[i] = malloc(size);
      if (v[i] == NULL) return 1;
      *(long *)v[i] = i;
    }
    if (shuffle)
      for (long i = n - 1; i > 0; i--) {
        const long j = random() % (i + 1);
        void *t = v[i];
        v[i] = v[j];
        v[j] = t;
      }
    for (long k = 0; k < (long)sizeof evict; k += 64) evict[k]++;
    const double t0 = now();
    for (long i = 0; i < n; i++) free(v[i]);
    freeing += now() - t0;
  }
  printf("free %.2f ns\n", freeing / rounds / (double)n * 1e9);
  return 0;
}
