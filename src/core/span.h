// Span: a run of contiguous pages, the page heap's unit of ownership.
//
// A span is exactly one of: free in the page heap (kNormal: backed by memory, kReturned:
// released to the OS), or in use — either one large object (sizeclass 0) or carved into
// objects of one size class and owned by that class's central free list.
#ifndef TCMALLOC_SPAN_H_
#define TCMALLOC_SPAN_H_

#include <cstdint>

#include "base/config.h"

namespace tcm {

class CentralFreeList;

struct Span {
  enum Location : uint8_t { kInUse = 0, kNormal = 1, kReturned = 2 };

  PageId start;
  Length length;
  // Doubly linked list membership: a page heap free list or a central free list's span list.
  Span* next;
  Span* prev;
  // Best-fit tree links while on the page heap's large free structure.
  Span* left;
  Span* right;
  // Small-object spans: the span's free list when it has no bitmap (free_bits below), and
  // the count of objects handed out.
  void* objects;
  uint32_t refcount;
  uint8_t sizeclass;
  Location location;
  bool in_tree;
  // For large in-use spans: true while the pages have never been written (fresh from the
  // OS or released), so calloc can skip zeroing them.
  bool fresh;
  // Small-object spans: every object free, kept on its central list for the list's next
  // allocations instead of going back to the page heap (counted in the list's budget).
  bool kept;
  // Small-object spans: 1 + the cursor slot of the CPU that last took objects from it
  // (CentralFreeList::SpanFor), 0 for none yet (in the padding after `kept`).
  uint8_t taker;
  // Small-object spans without a bitmap: how many objects have been carved from the start
  // of the span. Objects past it were never handed out and are free without being on the
  // list at `objects`, so a new span costs no pass over its memory (in the padding after
  // `kept`: the record stays 112 bytes).
  uint32_t carved;
  // When a free span went idle (page heap clock), used for gradual release.
  uint64_t free_since;
  // Free spans: the page heap's count of frees when it was freed (merged runs keep the
  // older count; fresh memory 0). Tells a run freed during a maintenance pass from one
  // freed just before it, which the coarse clock stamps alike.
  uint64_t free_seq;
  // A sampled allocation's record (sampler.h); nullptr for every other span.
  struct SampleRecord* sample;
  // Small-object spans: the central list (of the class's shards) that carved the span and
  // holds it on its lists; objects freed through another shard come back to it.
  CentralFreeList* owner;
  // Small-object spans: one bit per object, set while the object is free: the span's free
  // objects themselves (central_freelist.cc), and a double free that reaches the span is
  // caught. nullptr for 8-byte objects and when metadata memory ran out: such a span keeps
  // its free objects on the list at `objects` (then only the counts are checked).
  uint64_t* free_bits;

  void* start_ptr() const { return start.ptr(); }
  uintptr_t start_addr() const { return start.addr(); }
  PageId last() const { return start + length - Length{1}; }
  PageId end() const { return start + length; }
};

// Span records are 112 bytes (1.4% of a one-page span): record_pool.h packs them into pages.
static_assert(sizeof(Span) == 112);

// Intrusive circular doubly linked list of spans with a sentinel. constexpr-friendly: an
// empty list has null links and is normalised on first use.
class SpanList {
 public:
  constexpr SpanList() = default;
  SpanList(const SpanList&) = delete;
  SpanList& operator=(const SpanList&) = delete;

  bool empty() const { return head_.next == nullptr || head_.next == &head_; }
  Span* first() { return empty() ? nullptr : head_.next; }
  Span* last() { return empty() ? nullptr : head_.prev; }
  // Iteration: for (Span* s = l.first(); s != nullptr; s = l.NextOf(s)).
  Span* NextOf(Span* s) { return s->next == &head_ ? nullptr : s->next; }
  void PushFront(Span* s) {
    Normalize();
    s->next = head_.next;
    s->prev = &head_;
    head_.next->prev = s;
    head_.next = s;
  }
  static void Remove(Span* s) {
    s->prev->next = s->next;
    s->next->prev = s->prev;
    s->next = s->prev = nullptr;
  }
  size_t Count() {
    size_t n = 0;
    for (Span* s = first(); s != nullptr; s = NextOf(s)) ++n;
    return n;
  }

 private:
  void Normalize() {
    if (head_.next == nullptr) head_.next = head_.prev = &head_;
  }
  Span head_{};
};

}  // namespace tcm

#endif  // TCMALLOC_SPAN_H_
