// A throwaway shim (bench/README, "Thirty-fourth session"): preloaded in front of an
// allocator, it keeps every sized operator delete in an array and, at the DEFER_N-th
// (default 524287, the nodes of one binary tree of depth 18), frees them all in one loop,
// timing only that loop. binary_trees' free phase minus the loop is the program's own
// traversal with that allocator's layout; the loop is the cost of the frees alone.
//   g++ -O2 -shared -fPIC -o /tmp/defer.so bench/results/defer-free-shim-2026-12-02.cc
//   LD_PRELOAD=/tmp/defer.so:build/src/libtcmalloc_minimal.so taskset -c 1
//       build/bench/binary_trees 18 1 16000000 phases
// (binary_trees frees its nodes with the sized delete only, so the unsized one stays the
// allocator's.)
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <new>

namespace {
void* g_deferred[1 << 20];
long g_count = 0;
double g_loop_s = 0;
long g_loops = 0;

double Now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

long Limit() {
  static const long limit = getenv("DEFER_N") != nullptr ? atol(getenv("DEFER_N")) : 524287;
  return limit;
}

__attribute__((destructor)) void Report() {
  if (g_loops > 0)
    fprintf(stderr, "flush_ns_per_free=%.2f loops=%ld\n", g_loop_s * 1e9 / (static_cast<double>(g_loops) * Limit()),
            g_loops);
}
}  // namespace

void operator delete(void* p, std::size_t) noexcept {
  g_deferred[g_count++] = p;
  if (g_count == Limit() || g_count == (1 << 20)) {
    const double t0 = Now();
    for (long i = 0; i < g_count; ++i) free(g_deferred[i]);
    g_loop_s += Now() - t0;
    g_count = 0;
    ++g_loops;
  }
}
