// What a free's branches cost a program that frees a big tree (bench/README.md,
// thirty-eighth session), with no allocator at all: perfect trees of 16-byte nodes are laid
// out in a bump region (pre-order, as every allocator here lays them out), then visited in
// std::unique_ptr's destructor order (right subtree, left subtree, node), calling a
// "free" that does nothing but MODE's compares: 0 none, 1/2/3 four/eight/sixteen compares
// whose branch is never taken, 4/5 four/eight that are always taken (to the next
// instruction). Prints ns a node of the visit, averaged over 8 trees.
//
// Build: g++ -O2 -o /tmp/free_branches bench/results/free-branches-2026-12-03.cc
// Usage: /tmp/free_branches DEPTH MODE   (e.g. 20 0 ... 20 5)
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace {

double Now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

struct Node {
  Node* left;
  Node* right;
};

char* bump;

Node* Make(int depth) {
  Node* n = reinterpret_cast<Node*>(bump);
  bump += sizeof(Node);
  n->left = depth > 0 ? Make(depth - 1) : nullptr;
  n->right = depth > 0 ? Make(depth - 1) : nullptr;
  return n;
}

#define NOT_TAKEN "cmpq $0, %0\n\tjb 1f\n\t"
#define TAKEN(i) "cmpq $0, %0\n\tjae 2" #i "f\n2" #i ":\n\t"
__attribute__((noinline)) void None(Node*) { asm volatile(""); }
__attribute__((noinline)) void NotTaken4(Node* n) {
  asm volatile(NOT_TAKEN NOT_TAKEN NOT_TAKEN NOT_TAKEN "1:" ::"r"(n) : "cc");
}
__attribute__((noinline)) void NotTaken8(Node* n) {
  asm volatile(NOT_TAKEN NOT_TAKEN NOT_TAKEN NOT_TAKEN NOT_TAKEN NOT_TAKEN NOT_TAKEN NOT_TAKEN "1:" ::"r"(n) : "cc");
}
__attribute__((noinline)) void NotTaken16(Node* n) {
  asm volatile(NOT_TAKEN NOT_TAKEN NOT_TAKEN NOT_TAKEN NOT_TAKEN NOT_TAKEN NOT_TAKEN NOT_TAKEN NOT_TAKEN NOT_TAKEN
                   NOT_TAKEN NOT_TAKEN NOT_TAKEN NOT_TAKEN NOT_TAKEN NOT_TAKEN "1:" ::"r"(n)
               : "cc");
}
__attribute__((noinline)) void Taken4(Node* n) { asm volatile(TAKEN(1) TAKEN(2) TAKEN(3) TAKEN(4)::"r"(n) : "cc"); }
__attribute__((noinline)) void Taken8(Node* n) {
  asm volatile(TAKEN(1) TAKEN(2) TAKEN(3) TAKEN(4) TAKEN(5) TAKEN(6) TAKEN(7) TAKEN(8)::"r"(n) : "cc");
}

void (*free_node)(Node*);

void Visit(Node* n) {
  if (n->right) Visit(n->right);
  if (n->left) Visit(n->left);
  free_node(n);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s DEPTH MODE\n", argv[0]);
    return 2;
  }
  const int depth = atoi(argv[1]), mode = atoi(argv[2]);
  void (*const modes[])(Node*) = {None, NotTaken4, NotTaken8, NotTaken16, Taken4, Taken8};
  if (depth < 1 || depth > 24 || mode < 0 || mode > 5) return 2;
  free_node = modes[mode];
  const size_t bytes = size_t{1} << 30;
  void* region = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (region == MAP_FAILED) return 1;
  madvise(region, bytes, MADV_HUGEPAGE);
  double visiting = 0;
  long nodes = 0;
  for (int i = 0; i < 8; ++i) {
    bump = static_cast<char*>(region);
    Node* root = Make(depth);
    const double t0 = Now();
    Visit(root);
    visiting += Now() - t0;
    nodes += (2L << depth) - 1;
  }
  printf("mode %d visit %.2f ns a node\n", mode, visiting / static_cast<double>(nodes) * 1e9);
  return 0;
}
