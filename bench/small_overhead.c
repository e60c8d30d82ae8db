/* Space overhead of tiny objects: hold `count` blocks of `size` bytes and measure RSS.
 *
 * Usage: small_overhead [count=10000000] [size=8]
 * Reports heap_ratio = (RSS with all blocks held - RSS before) / (count * size): 1.0 means no
 * overhead; a boundary-tag allocator with a 16-byte minimum chunk plus header shows 4.0 for
 * 8-byte blocks. The blocks form a linked list through their own first 8 bytes, so holding
 * them needs no pointer array whose memory would pollute the figure. ops counts mallocs. */
#include "bench_util.h"

int main(int argc, char **argv) {
  uint64_t count = bench_arg(argc, argv, 1, 10000000);
  uint64_t size = bench_arg(argc, argv, 2, 8);
  if (size < sizeof(void *)) bench_die("size must hold a pointer");

  long rss0 = bench_rss_bytes();
  void *head = NULL;
  double w0 = bench_wall(), c0 = bench_cpu();
  for (uint64_t i = 0; i < count; ++i) {
    void **b = (void **)malloc(size);
    if (b == NULL) bench_die("small_overhead: out of memory");
    *b = head;
    head = b;
  }
  double w1 = bench_wall(), c1 = bench_cpu();
  long rss1 = bench_rss_bytes();
  while (head != NULL) {
    void *next = *(void **)head;
    free(head);
    head = next;
  }
  long rss2 = bench_rss_bytes();
  double requested = (double)count * (double)size;
  bench_report(count, w1 - w0, c1 - c0);
  printf(" heap_ratio=%.3f rss_held_mib=%.1f rss_after_free_mib=%.1f\n",
         requested > 0 ? (double)(rss1 - rss0) / requested : 0.0, (double)rss1 / 1048576.0,
         (double)rss2 / 1048576.0);
  return 0;
}
