/* A free that does nothing (bench/README.md, thirty-eighth session): preloaded in front of an
 * allocator, free, operator delete and sized operator delete return at once and every block
 * leaks, so a program's free phase shows what its own loads and stores cost with frees that
 * cost nothing. MODE_BRANCH=1 at build time adds one load of a global and a branch on it.
 *
 * Build: gcc -O2 -shared -fPIC -o /tmp/noop_free.so bench/results/noop-free-shim-2026-12-03.c
 *        (or with -DMODE_BRANCH=1 -o /tmp/noop_free_branch.so)
 * Usage: LD_PRELOAD="/tmp/noop_free.so <lib>" build/bench/binary_trees 20 1 32000000 phases */
#include <stddef.h>

#if MODE_BRANCH
volatile int noop_free_mode;
#define BODY(p)                                                              \
  do {                                                                       \
    if (__builtin_expect(noop_free_mode == 5, 0)) __asm__ volatile("" ::"r"(p)); \
  } while (0)
#else
#define BODY(p) (void)(p)
#endif

void free(void *p) { BODY(p); }
void _ZdlPvm(void *p, size_t n) {
  (void)n;
  BODY(p);
}
void _ZdlPv(void *p) { BODY(p); }
