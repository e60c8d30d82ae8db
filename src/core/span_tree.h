// SpanTree: the page heap's best-fit structure for free runs of >= kMaxPages pages.
// An intrusive treap ordered by (length, start address); the heap priority is a hash of
// the span's start page, so the shape is deterministic and expected O(log n).
// Not thread-safe: guarded by the page heap lock.
#ifndef TCMALLOC_SPAN_TREE_H_
#define TCMALLOC_SPAN_TREE_H_

#include "core/span.h"

namespace tcm {

class SpanTree {
 public:
  constexpr SpanTree() = default;

  void Insert(Span* s);
  void Remove(Span* s);  // REQUIRES s is in this tree
  // Smallest span with length >= n (lowest address among equals), or nullptr.
  Span* BestFit(Length n) const;
  // The longest span (highest address among equals), or nullptr: the right spine's end.
  Span* Largest() const {
    Span* n = root_;
    while (n != nullptr && n->right != nullptr) n = n->right;
    return n;
  }
  bool empty() const { return root_ == nullptr; }
  size_t size() const { return size_; }

  // In-order visit (by length, then address); f(Span*) must not modify the tree.
  template <typename F>
  void ForEach(F f) const { Visit(root_, f); }

 private:
  static bool Less(const Span* a, const Span* b) {
    return a->length != b->length ? a->length < b->length : a->start < b->start;
  }
  static uint64_t Priority(const Span* s) {
    uint64_t x = s->start.index * 0x9E3779B97F4A7C15ull;
    return x ^ (x >> 29);
  }
  static Span* InsertAt(Span* root, Span* s);
  static Span* RemoveAt(Span* root, Span* s);
  template <typename F>
  static void Visit(Span* n, F& f) {
    if (n == nullptr) return;
    Visit(n->left, f);
    f(n);
    Visit(n->right, f);
  }

  Span* root_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tcm

#endif  // TCMALLOC_SPAN_TREE_H_
