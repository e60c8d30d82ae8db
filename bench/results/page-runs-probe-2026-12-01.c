// Throwaway probe (bench/README "Twenty-eighth session"): gcc -O2 -pthread, then run with
// LD_PRELOAD=<lib>. Two threads pinned to CPUs 0 and 1 allocate 16-byte blocks in turn (so the class gets
// sharded), then each allocates N more; prints how many runs of consecutive 8 KiB pages
// each thread's blocks of the second phase occupy.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#define N 400000
static void* blocks[2][N];
static pthread_barrier_t bar;
static int cmp(const void* a, const void* b) { uintptr_t x=*(uintptr_t*)a, y=*(uintptr_t*)b; return x<y?-1:x>y; }
static void* run(void* arg) {
  int t = (int)(intptr_t)arg;
  cpu_set_t s; CPU_ZERO(&s); CPU_SET(t, &s); pthread_setaffinity_np(pthread_self(), sizeof s, &s);
  for (int r = 0; r < 3000; ++r) {  // take turns: hand-offs between shards
    pthread_barrier_wait(&bar);
    void* p[300]; for (int i = 0; i < 300; ++i) p[i] = malloc(16);
    for (int i = 0; i < 300; ++i) free(p[i]);
  }
  pthread_barrier_wait(&bar);
  for (int i = 0; i < N; ++i) blocks[t][i] = malloc(16);
  return 0;
}
int main(void) {
  pthread_barrier_init(&bar, 0, 2);
  pthread_t th[2];
  for (int t = 0; t < 2; ++t) pthread_create(&th[t], 0, run, (void*)(intptr_t)t);
  for (int t = 0; t < 2; ++t) pthread_join(th[t], 0);
  for (int t = 0; t < 2; ++t) {
    qsort(blocks[t], N, sizeof(void*), cmp);
    long runs = 1; uintptr_t prev = (uintptr_t)blocks[t][0] >> 13;
    for (int i = 1; i < N; ++i) { uintptr_t pg = (uintptr_t)blocks[t][i] >> 13; if (pg != prev && pg != prev + 1) ++runs; prev = pg; }
    printf("thread %d: %ld runs of pages for %d blocks (%ld pages)\n", t, runs, N, (long)(N * 16 / 8192));
  }
  return 0;
}
