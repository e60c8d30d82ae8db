// Build: g++ -O2 bench/results/alloc-locality-2026-12-02.cc -o /tmp/loc; run: LD_PRELOAD=LIB /tmp/loc DEPTH
// (bench/README.md, thirty-second session: the locality count of binary trees' nodes).
// Allocation locality: build a tree of 16-byte nodes (binary trees' shape), free it, build
// again, and report how often consecutive allocations of the rebuilt trees share a 4 KiB page.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <unordered_set>
struct Node { Node* l; Node* r; };
static std::vector<uintptr_t>* g_rec;
static Node* Make(int d) {
  Node* n = static_cast<Node*>(malloc(sizeof(Node)));
  if (g_rec) g_rec->push_back(reinterpret_cast<uintptr_t>(n));
  if (d > 0) { n->l = Make(d - 1); n->r = Make(d - 1); } else { n->l = n->r = nullptr; }
  return n;
}
static void Free(Node* n) { if (n->l) { Free(n->l); Free(n->r); } free(n); }
int main(int argc, char** argv) {
  int depth = argc > 1 ? atoi(argv[1]) : 16;
  std::vector<uintptr_t> rec; rec.reserve((size_t{2} << depth) * 4);
  Node* longlived = Make(depth);   // like binary trees' long-lived tree
  for (int round = 0; round < 4; ++round) {
    if (round == 3) g_rec = &rec;
    Node* t = Make(depth);
    g_rec = nullptr;
    Free(t);
  }
  size_t same = 0; std::unordered_set<uintptr_t> pages;
  for (size_t i = 1; i < rec.size(); ++i) same += (rec[i] >> 12) == (rec[i-1] >> 12);
  size_t windows = 0, pages_sum = 0;
  for (size_t i = 0; i + 256 <= rec.size(); i += 256) { std::unordered_set<uintptr_t> w; for (size_t j = i; j < i + 256; ++j) w.insert(rec[j] >> 12); pages_sum += w.size(); ++windows; }
  for (auto a : rec) pages.insert(a >> 12);
  printf("allocs %zu same-page-as-previous %.3f pages-per-256-allocs %.1f distinct-pages %zu\n", rec.size(), (double)same / (rec.size() - 1), (double)pages_sum / windows, pages.size());
  Free(longlived);
}
