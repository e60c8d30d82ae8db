/* Large-block churn: allocate a big block, touch every page, free it, again and again.
 *
 * Usage: large_churn [size=1M] [iters=20000]
 * The interesting figure is minor faults per iteration: an allocator that returns the pages
 * to the kernel on every free (munmap, or madvise(DONTNEED) at once) faults the whole block
 * back in next time (size/4096 faults per iteration); one that caches the freed block reuses
 * warm pages and faults almost never. The other side of that trade is RSS held after free,
 * which bench/run.py reports as peak RSS. ops counts iterations. */
#include "bench_util.h"

int main(int argc, char **argv) {
  uint64_t size = bench_arg(argc, argv, 1, 1 << 20);
  uint64_t iters = bench_arg(argc, argv, 2, 20000);
  if (size == 0) bench_die("size must be > 0");

  long f0 = bench_minflt();
  double w0 = bench_wall(), c0 = bench_cpu();
  for (uint64_t i = 0; i < iters; ++i) {
    unsigned char *p = (unsigned char *)malloc(size);
    if (p == NULL) bench_die("large_churn: out of memory");
    for (uint64_t off = 0; off < size; off += 4096) p[off] = (unsigned char)i;
    p[size - 1] = 1;
    bench_escape(p);
    free(p);
  }
  double w1 = bench_wall(), c1 = bench_cpu();
  long faults = bench_minflt() - f0;
  bench_report(iters, w1 - w0, c1 - c0);
  printf(" size=%llu minflt=%ld minflt_per_iter=%.2f\n", (unsigned long long)size, faults,
         iters ? (double)faults / (double)iters : 0.0);
  return 0;
}
