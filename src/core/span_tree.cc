#include "core/span_tree.h"

namespace tcm {

// Recursion depth is O(log n) expected for a treap; n is the number of free large runs.
Span* SpanTree::InsertAt(Span* root, Span* s) {
  if (root == nullptr) return s;
  if (Less(s, root)) {
    root->left = InsertAt(root->left, s);
    if (Priority(root->left) > Priority(root)) {  // rotate right
      Span* l = root->left;
      root->left = l->right;
      l->right = root;
      return l;
    }
  } else {
    root->right = InsertAt(root->right, s);
    if (Priority(root->right) > Priority(root)) {  // rotate left
      Span* r = root->right;
      root->right = r->left;
      r->left = root;
      return r;
    }
  }
  return root;
}

Span* SpanTree::RemoveAt(Span* root, Span* s) {
  if (root == s) {
    // Merge the two subtrees by priority.
    Span* l = s->left;
    Span* r = s->right;
    if (l == nullptr) return r;
    if (r == nullptr) return l;
    if (Priority(l) > Priority(r)) {
      s->left = l->right;
      l->right = RemoveAt(s, s);
      return l;
    }
    s->right = r->left;
    r->left = RemoveAt(s, s);
    return r;
  }
  if (Less(s, root)) root->left = RemoveAt(root->left, s);
  else root->right = RemoveAt(root->right, s);
  return root;
}

void SpanTree::Insert(Span* s) {
  s->left = s->right = nullptr;
  s->in_tree = true;
  root_ = InsertAt(root_, s);
  ++size_;
}

void SpanTree::Remove(Span* s) {
  root_ = RemoveAt(root_, s);
  s->left = s->right = nullptr;
  s->in_tree = false;
  --size_;
}

Span* SpanTree::BestFit(Length n) const {
  Span* best = nullptr;
  for (Span* cur = root_; cur != nullptr;) {
    if (cur->length >= n) {
      best = cur;  // candidate; a smaller (or lower-addressed equal) one may be to the left
      cur = cur->left;
    } else {
      cur = cur->right;
    }
  }
  return best;
}

}  // namespace tcm
