// Binary trees (the benchmarks game's allocation test): perfect trees of 16-byte nodes
// (two std::unique_ptr children) are built, walked and freed, many times over, at depths 4
// to N; one long-lived tree of depth N stays up throughout.
//
// Usage: binary_trees [depth=21] [threads=1] [fixed_nodes=0] [phases]
// The short-lived trees of each depth are split over `threads` threads, so 1 and 2 threads
// do exactly the same work: with an allocator that does not serialise its threads, 2 threads
// on 2 CPUs take about half the time. ops counts nodes allocated (each also freed).
// fixed_nodes > 0: only trees of exactly `depth` (no stretch or long-lived tree), built,
// walked and freed until about fixed_nodes nodes were made; ns a node at one depth shows
// where the front end's capacity ends (trees of up to a few thousand nodes stay in the
// caches, larger ones go through the central lists and spans).
// phases (with fixed_nodes, one thread): the same trees, with building, walking, a visit in
// the destructor's order that frees nothing, and freeing timed apart (ns a node each), and
// the layout of the last tree before it is freed: how many nodes in the walk's order do not
// follow the previous one at the next 16 bytes.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_util.h"

namespace {

struct Node {
  std::unique_ptr<Node> left, right;
};
static_assert(sizeof(Node) == 16);

std::unique_ptr<Node> Make(int depth) {
  auto n = std::make_unique<Node>();
  if (depth > 0) {
    n->left = Make(depth - 1);
    n->right = Make(depth - 1);
  }
  return n;
}

long Check(const Node* n) { return n->left ? 1 + Check(n->left.get()) + Check(n->right.get()) : 1; }

// Nodes in Check's order that are not at the previous node's address + 16.
long LayoutBreaks(const Node* n, uintptr_t* prev) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(n);
  long breaks = *prev != 0 && at != *prev + sizeof(Node) ? 1 : 0;
  *prev = at;
  if (n->left) breaks += LayoutBreaks(n->left.get(), prev) + LayoutBreaks(n->right.get(), prev);
  return breaks;
}

// The destructor's order (right subtree, then left, then the node) with nothing freed: the
// program's own loads of the free phase, so free - visit is what the frees add to them.
long VisitAsFreed(const Node* n) {
  long k = 1;
  if (n->right) k += VisitAsFreed(n->right.get());
  if (n->left) k += VisitAsFreed(n->left.get());
  return k;
}

// The phases mode: make, walk, visit in the destructor's order, and free trees of `depth`,
// each phase timed on its own. A walk (untimed) between the visit and the free gives the
// free the cache the visit had.
void TimePhases(int depth, long trees) {
  double make = 0, walk = 0, visit = 0, free = 0;
  const long per_tree = (1L << (depth + 1)) - 1;
  long breaks = 0;
  uint64_t nodes = 0;
  for (long i = 0; i < trees; ++i) {
    const double t0 = bench_wall();
    auto tree = Make(depth);
    const double t1 = bench_wall();
    nodes += static_cast<uint64_t>(Check(tree.get()));
    const double t2 = bench_wall();
    if (i == trees - 1) {
      uintptr_t prev = 0;
      breaks = LayoutBreaks(tree.get(), &prev);
    }
    const double v0 = bench_wall();
    if (VisitAsFreed(tree.get()) != per_tree) bench_die("binary_trees: wrong node count");
    visit += bench_wall() - v0;
    if (Check(tree.get()) != per_tree) bench_die("binary_trees: wrong node count");
    const double t3 = bench_wall();
    tree.reset();  // ~unique_ptr: right subtree first, then left, then the node
    free += bench_wall() - t3;
    make += t1 - t0;
    walk += t2 - t1;
  }
  const double n = static_cast<double>(nodes);
  printf("depth=%d nodes=%llu make_ns_per_node=%.2f walk_ns_per_node=%.2f visit_ns_per_node=%.2f "
         "free_ns_per_node=%.2f layout_breaks=%ld\n",
         depth, static_cast<unsigned long long>(nodes), make * 1e9 / n, walk * 1e9 / n, visit * 1e9 / n,
         free * 1e9 / n, breaks);
}

// Builds, walks and frees `trees` trees of `depth`, split over `threads` threads; returns
// the nodes made (checked: a wrong count means a damaged tree).
uint64_t MakeTrees(int depth, long trees, int threads) {
  std::vector<long> counts(static_cast<size_t>(threads), 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      long sum = 0;
      for (long i = t; i < trees; i += threads) sum += Check(Make(depth).get());
      counts[static_cast<size_t>(t)] = sum;
    });
  }
  for (auto& th : pool) th.join();
  long total = 0;
  for (long c : counts) total += c;
  if (total != trees * ((1L << (depth + 1)) - 1)) bench_die("binary_trees: wrong node count");
  return static_cast<uint64_t>(total);
}

}  // namespace

int main(int argc, char** argv) {
  const int max_depth = static_cast<int>(bench_arg(argc, argv, 1, 21));
  const int threads = static_cast<int>(bench_arg(argc, argv, 2, 1));
  const uint64_t fixed_nodes = bench_arg(argc, argv, 3, 0);
  if (max_depth < 4 || threads < 1) bench_die("binary_trees: depth >= 4, threads >= 1");
  const double w0 = bench_wall(), c0 = bench_cpu();
  uint64_t nodes = 0;
  if (fixed_nodes > 0 && argc > 4 && std::string_view(argv[4]) == "phases") {
    const uint64_t per_tree = (uint64_t{1} << (max_depth + 1)) - 1;
    TimePhases(max_depth, std::max<long>(1, static_cast<long>(fixed_nodes / per_tree)));
    return 0;
  }
  if (fixed_nodes > 0) {
    const uint64_t per_tree = (uint64_t{1} << (max_depth + 1)) - 1;
    nodes = MakeTrees(max_depth, std::max<long>(1, static_cast<long>(fixed_nodes / per_tree)), threads);
    const double wall = bench_wall() - w0;
    bench_report(nodes, wall, bench_cpu() - c0);
    printf(" depth=%d ns_per_node=%.2f\n", max_depth, wall * 1e9 / static_cast<double>(nodes));
    return 0;
  }
  {
    auto stretch = Make(max_depth + 1);
    nodes += static_cast<uint64_t>(Check(stretch.get()));
  }
  auto long_lived = Make(max_depth);
  nodes += static_cast<uint64_t>(Check(long_lived.get()));
  for (int d = 4; d <= max_depth; d += 2) nodes += MakeTrees(d, 1L << (max_depth - d + 4), threads);
  if (Check(long_lived.get()) != (1L << (max_depth + 1)) - 1) bench_die("binary_trees: long-lived tree damaged");
  bench_report(nodes, bench_wall() - w0, bench_cpu() - c0);
  printf("\n");
  return 0;
}
