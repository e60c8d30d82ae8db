// N malloc(32)+free pairs, for counting instructions under callgrind (callgrind_test.py).
// The loop is all the program does after start-up, so the instruction difference between
// two values of N divided by their difference is the cost of one pair, loop included.
// `pair_loop N realloc`: N reallocs of one block between 40 and 48 bytes (one size class,
// so each stays in place): the cost of realloc's size look-up. `pair_loop N SIZE`: pairs of
// SIZE bytes instead of 32 (from 64 KiB up every malloc runs the housekeeping tick).
// `pair_loop N calloc`: N calloc(4, 8)+free pairs: calloc's own cost over malloc's.
//
// The clock stands still for the allocator: this program's clock_gettime interposes libc's
// for the library, which calls libc's by its dynamic symbol where the process has no vDSO,
// as under valgrind (with one, it calls the vDSO's own: platform/vdso.h). The maintenance passes run every
// 100 ms of the clock, so with a clock that moves their number follows how fast valgrind
// runs the loop, and a loaded machine counted 0.1 more a pair (60.31 alone, 60.40 beside
// another test) from the passes and the refills after them. Frozen, the first tick runs
// the one pass the loop sees, whatever N is, and the difference is the pairs' alone.
#include <time.h>

#include <cstdlib>
#include <cstring>

extern "C" int clock_gettime(clockid_t, struct timespec* ts) noexcept {
  ts->tv_sec = 1000;
  ts->tv_nsec = 0;
  return 0;
}

int main(int argc, char** argv) {
  const long n = argc > 1 ? atol(argv[1]) : 0;
  if (argc > 2 && strcmp(argv[2], "realloc") == 0) {
    void* p = malloc(40);
    for (long i = 0; i < n; ++i) {
      p = realloc(p, (i & 1) != 0 ? 40 : 48);
      asm volatile("" : : "r"(p) : "memory");
    }
    free(p);
    return 0;
  }
  if (argc > 2 && strcmp(argv[2], "calloc") == 0) {
    for (long i = 0; i < n; ++i) {
      void* p = calloc(4, 8);
      asm volatile("" : : "r"(p) : "memory");
      free(p);
    }
    return 0;
  }
  const size_t size = argc > 2 ? strtoul(argv[2], nullptr, 10) : 32;
  for (long i = 0; i < n; ++i) {
    void* p = malloc(size);
    // The pointer escapes into an empty asm: the pair cannot be optimised away.
    asm volatile("" : : "r"(p) : "memory");
    free(p);
  }
  return 0;
}
