/* Huge pages: how much of a big heap is backed by 2 MiB pages, what that buys a TLB-bound
 * walk, and what stays resident (and on huge pages) after most of the heap is freed.
 *
 * Usage: hugepage coverage [MiB=1024]
 *          MiB of live objects: log-uniform 16 B..4 KiB, plus four large blocks of MiB/32
 *          each; every byte is touched. Reports coverage = AnonHugePages / heap RSS, read
 *          from /proc/self/smaps_rollup (heap RSS = anonymous RSS minus this program's own
 *          bookkeeping arrays, which are mapped directly, advised MADV_NOHUGEPAGE and
 *          subtracted).
 *        hugepage tlb [MiB=1024] [idle_ms=1000]
 *          MiB of 64..256-byte nodes allocated one after another and linked in a random
 *          order; the list is walked twice (walk_ns_per_node: the TLB-bound figure). Then 75%
 *          of the heap is freed in random order — the nodes of 48 of 64 allocation-order
 *          groups, chosen at random, freed shuffled together — and the program idles for
 *          idle_ms doing one malloc/free pair per millisecond (so allocators that maintain
 *          themselves on allocation calls get the chance). Reports RSS after the idle
 *          period over the bytes still in use (rss_over_inuse) and the huge page share of
 *          that RSS (after_coverage). HUGEPAGE_STATS=1: the allocator's malloc_stats() on
 *          stderr just before that RSS is read (where the remaining memory sits).
 * ops counts objects allocated. */
#define _GNU_SOURCE
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench_util.h"

typedef struct {
  long rss_anon_kib, anon_huge_kib;
} smaps;

static smaps read_smaps(void) {
  smaps s = {0, 0};
  FILE *f = fopen("/proc/self/smaps_rollup", "r");
  if (f == NULL) return s;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "Anonymous:", 10) == 0) s.rss_anon_kib = atol(line + 10);
    if (strncmp(line, "AnonHugePages:", 14) == 0) s.anon_huge_kib = atol(line + 14);
  }
  fclose(f);
  return s;
}

/* Bookkeeping memory outside the heap: never on huge pages, subtracted from the figures. */
static void *aux_alloc(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) bench_die("mmap of a bookkeeping array failed");
  madvise(p, bytes, MADV_NOHUGEPAGE);
  memset(p, 0, bytes); /* resident from the start, so its size is known */
  return p;
}

static size_t log_uniform(bench_rng *r, size_t lo, size_t hi) {
  /* 16..4096: pick a power-of-two band uniformly, then a size inside it. */
  unsigned bands = 0;
  while ((lo << bands) < hi) ++bands;
  size_t base = lo << bench_rng_below(r, bands);
  return base + bench_rng_below(r, base);
}

static double mib(long kib) { return (double)kib / 1024.0; }

static int coverage(uint64_t heap_mib) {
  const size_t target = (size_t)heap_mib << 20;
  const size_t large = target / 32, nlarge = 4;
  const size_t max_objects = target / 16 + 1;
  void **objs = (void **)aux_alloc(max_objects * sizeof(void *));
  const size_t aux_kib = max_objects * sizeof(void *) / 1024;
  bench_rng r;
  bench_rng_seed(&r, 42);
  double w0 = bench_wall(), c0 = bench_cpu();
  size_t total = 0, n = 0;
  for (size_t i = 0; i < nlarge; ++i) {
    char *p = (char *)malloc(large);
    if (p == NULL) bench_die("out of memory");
    memset(p, 1, large);
    objs[n++] = p;
    total += large;
  }
  while (total < target && n < max_objects) {
    size_t sz = log_uniform(&r, 16, 4096);
    char *p = (char *)malloc(sz);
    if (p == NULL) bench_die("out of memory");
    memset(p, 1, sz);
    objs[n++] = p;
    total += sz;
  }
  double w1 = bench_wall(), c1 = bench_cpu();
  smaps s = read_smaps();
  long heap_kib = s.rss_anon_kib - (long)aux_kib;
  bench_report(n, w1 - w0, c1 - c0);
  const double cov = heap_kib > 0 ? (double)s.anon_huge_kib / (double)heap_kib : 0.0;
  printf(" requested_mib=%.1f heap_rss_mib=%.1f anon_huge_mib=%.1f coverage=%.4f small_page_frac=%.4f\n",
         (double)total / 1048576.0, mib(heap_kib), mib(s.anon_huge_kib), cov, 1.0 - cov);
  for (size_t i = 0; i < n; ++i) free(objs[i]);
  return 0;
}

typedef struct node {
  struct node *next;
  uint32_t size;
} node;

static void shuffle(void **a, size_t n, bench_rng *r) {
  for (size_t i = n; i > 1; --i) {
    size_t j = bench_rng_below(r, i);
    void *t = a[i - 1];
    a[i - 1] = a[j];
    a[j] = t;
  }
}

static int tlb(uint64_t heap_mib, uint64_t idle_ms) {
  const size_t target = (size_t)heap_mib << 20;
  const size_t max_nodes = target / 64 + 1;
  node **nodes = (node **)aux_alloc(max_nodes * sizeof(node *));
  void **order = (void **)aux_alloc(max_nodes * sizeof(void *));
  bench_rng r;
  bench_rng_seed(&r, 7);
  double w0 = bench_wall(), c0 = bench_cpu();
  size_t total = 0, n = 0;
  while (total < target && n < max_nodes) {
    uint32_t sz = 64 + (uint32_t)bench_rng_below(&r, 193);
    node *p = (node *)malloc(sz);
    if (p == NULL) bench_die("out of memory");
    memset(p, 0, sz);
    p->size = sz;
    nodes[n++] = p;
    total += sz;
  }
  /* Link in a random order: each step of the walk lands anywhere in the heap. */
  for (size_t i = 0; i < n; ++i) order[i] = nodes[i];
  shuffle(order, n, &r);
  for (size_t i = 0; i + 1 < n; ++i) ((node *)order[i])->next = (node *)order[i + 1];
  ((node *)order[n - 1])->next = NULL;
  double w1 = bench_wall(), c1 = bench_cpu();
  smaps built = read_smaps();
  const long aux_kib = (long)(2 * max_nodes * sizeof(void *) / 1024);

  /* The TLB-bound part: two walks over the whole list. */
  double t0 = bench_wall();
  uint64_t sum = 0;
  for (int rep = 0; rep < 2; ++rep)
    for (node *p = (node *)order[0]; p != NULL; p = p->next) sum += p->size;
  double t1 = bench_wall();
  if (sum != 2 * (uint64_t)total) bench_die("walk lost nodes");

  /* Free 75%: 48 of 64 allocation-order groups, their nodes freed in one shuffled stream. */
  const size_t groups = 64, group_len = (n + groups - 1) / groups;
  unsigned char keep[64];
  for (size_t g = 0; g < groups; ++g) keep[g] = g < groups / 4;
  for (size_t g = groups; g > 1; --g) { /* shuffle the kept flags */
    size_t j = bench_rng_below(&r, g);
    unsigned char t = keep[g - 1];
    keep[g - 1] = keep[j];
    keep[j] = t;
  }
  size_t nfree = 0, in_use = 0;
  for (size_t i = 0; i < n; ++i) {
    if (keep[i / group_len]) {
      in_use += nodes[i]->size;
    } else {
      order[nfree++] = nodes[i];
    }
  }
  shuffle(order, nfree, &r);
  for (size_t i = 0; i < nfree; ++i) free(order[i]);
  /* The short idle period: light traffic, one pair per millisecond. */
  for (uint64_t t = 0; t < idle_ms; ++t) {
    char *p = (char *)malloc(64 + t % 512);
    if (p == NULL) bench_die("out of memory");
    p[0] = 1;
    bench_escape(p);
    free(p);
    usleep(1000);
  }
  if (getenv("HUGEPAGE_STATS") != NULL) malloc_stats();
  smaps after = read_smaps();
  long heap_after = after.rss_anon_kib - aux_kib;
  long heap_built = built.rss_anon_kib - aux_kib;
  bench_report(n, w1 - w0, c1 - c0);
  const double after_cov = heap_after > 0 ? (double)after.anon_huge_kib / (double)heap_after : 0.0;
  printf(" walk_s=%.4f walk_ns_per_node=%.2f built_heap_rss_mib=%.1f built_coverage=%.4f in_use_mib=%.1f"
         " after_heap_rss_mib=%.1f rss_over_inuse=%.3f after_coverage=%.4f after_small_page_frac=%.4f\n",
         t1 - t0, (t1 - t0) * 1e9 / (2.0 * (double)n), mib(heap_built),
         heap_built > 0 ? (double)built.anon_huge_kib / (double)heap_built : 0.0, (double)in_use / 1048576.0,
         mib(heap_after), (double)heap_after * 1024.0 / (double)in_use, after_cov, 1.0 - after_cov);
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "coverage";
  uint64_t heap_mib = bench_arg(argc, argv, 2, 1024);
  if (heap_mib == 0) bench_die("MiB must be > 0");
  if (strcmp(mode, "coverage") == 0) return coverage(heap_mib);
  if (strcmp(mode, "tlb") == 0) return tlb(heap_mib, bench_arg(argc, argv, 3, 1000));
  bench_die("usage: hugepage coverage|tlb [MiB] [idle_ms]");
  return 1;
}
