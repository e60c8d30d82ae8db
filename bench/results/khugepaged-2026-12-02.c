/* How fast khugepaged takes over a heap prefix that was advised MADV_HUGEPAGE but not
 * collapsed (bench/README, "Thirty-fourth session"): 256 MiB of 16-2015 byte blocks, every
 * byte written, then AnonHugePages and Anonymous from /proc/self/smaps_rollup every 10 s for
 * two minutes.
 *   gcc -O2 -o /tmp/khp bench/results/khugepaged-2026-12-02.c
 *   LD_PRELOAD=build/src/libtcmalloc_minimal.so /tmp/khp */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void report(int seconds) {
  FILE *f = fopen("/proc/self/smaps_rollup", "r");
  char line[256];
  long huge = 0, anon = 0;
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "AnonHugePages:", 14) == 0) huge = atol(line + 14);
    if (strncmp(line, "Anonymous:", 10) == 0) anon = atol(line + 10);
  }
  if (f != NULL) fclose(f);
  printf("t=%ds anonymous %ld MiB, on huge pages %ld MiB\n", seconds, anon >> 10, huge >> 10);
  fflush(stdout);
}

int main(void) {
  size_t total = 0;
  unsigned seed = 1;
  while (total < (256u << 20)) {
    seed = seed * 1103515245u + 12345u;
    const size_t n = 16 + (seed >> 16) % 2000;
    char *p = malloc(n);
    if (p == NULL) return 1;
    memset(p, 1, n);
    total += n;
  }
  for (int i = 0; i <= 12; ++i) {
    report(i * 10);
    if (i < 12) sleep(10);
  }
  return 0;
}
