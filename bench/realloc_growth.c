/* realloc growth: a buffer grown in small steps, as string builders and naive vectors do.
 *
 * Usage: realloc_growth [iters=20] [final=1M] [step=64]
 * Each iteration grows one buffer from `step` to `final` bytes, `step` bytes per realloc,
 * writing the new tail each time, then frees it. An allocator that can grow in place (class
 * slack, neighbouring free pages, mremap for huge blocks) copies little; one that cannot copies
 * O(final^2 / class spacing). `moves` counts reallocs that returned a new address. ops counts
 * realloc calls. */
#include "bench_util.h"

int main(int argc, char **argv) {
  uint64_t iters = bench_arg(argc, argv, 1, 20);
  uint64_t final_size = bench_arg(argc, argv, 2, 1 << 20);
  uint64_t step = bench_arg(argc, argv, 3, 64);
  if (step == 0 || final_size < step) bench_die("need 0 < step <= final");

  uint64_t ops = 0, moves = 0;
  double w0 = bench_wall(), c0 = bench_cpu();
  for (uint64_t i = 0; i < iters; ++i) {
    unsigned char *buf = NULL;
    for (uint64_t size = step; size <= final_size; size += step) {
      unsigned char *nb = (unsigned char *)realloc(buf, size);
      if (nb == NULL) bench_die("realloc_growth: out of memory");
      /* The previous tail must have survived the move. */
      if (buf != NULL && nb[size - step - 1] != (unsigned char)(size - step)) bench_die("lost");
      moves += nb != buf;
      memset(nb + size - step, (unsigned char)size, step);
      buf = nb;
      ++ops;
    }
    free(buf);
  }
  double w1 = bench_wall(), c1 = bench_cpu();
  bench_report(ops, w1 - w0, c1 - c0);
  printf(" moves=%llu move_frac=%.4f\n", (unsigned long long)moves,
         ops ? (double)moves / (double)ops : 0.0);
  return 0;
}
