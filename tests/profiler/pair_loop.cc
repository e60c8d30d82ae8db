// N malloc(32)+free pairs, for counting instructions under callgrind (callgrind_test.py).
// The loop is all the program does after start-up, so the instruction difference between
// two values of N divided by their difference is the cost of one pair, loop included.
#include <cstdlib>

int main(int argc, char** argv) {
  const long n = argc > 1 ? atol(argv[1]) : 0;
  for (long i = 0; i < n; ++i) {
    void* p = malloc(32);
    // The pointer escapes into an empty asm: the pair cannot be optimised away.
    asm volatile("" : : "r"(p) : "memory");
    free(p);
  }
  return 0;
}
