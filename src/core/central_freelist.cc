#include "core/central_freelist.h"

#include "base/log.h"
#include "core/size_classes.h"

namespace tcm {

static inline void*& NextOf(void* obj) { return *static_cast<void**>(obj); }

void CentralFreeList::Init(uint8_t cl, PageHeap* heap, PageMap* pagemap) {
  cl_ = cl;
  size_ = static_cast<uint32_t>(SizeMap::ClassSize(cl));
  objects_per_span_ = static_cast<uint32_t>(SizeMap::ObjectsPerSpan(cl));
  heap_ = heap;
  pagemap_ = pagemap;
  transfer_.Init(size_, static_cast<int>(SizeMap::NumToMove(cl)));
}

void CentralFreeList::InsertRange(void* start, void* end, int n) {
  if (n == transfer_.batch() && transfer_.TryInsert(start, end)) return;
  InsertRange(start, n);
}

void CentralFreeList::FlushTransferCache() {
  transfer_.Drain([this](void* head, void*, int n) { InsertRange(head, n); });
}

void CentralFreeList::FlushTransferCacheIfIdle() {
  transfer_.DrainIfIdle([this](void* head, void*, int n) { InsertRange(head, n); });
}

// Debug build: new objects carry the freed-object pattern too, so the check on hand-out
// (allocation.h) holds for every object.
void CentralFreeList::PoisonNew(void* obj) {
  size_t n = size_ < 256 ? size_ : 256;
  if (n > sizeof(void*)) __builtin_memset(static_cast<char*>(obj) + sizeof(void*), 0xfd, n - sizeof(void*));
}

bool CentralFreeList::Populate() {
  lock_.Unlock();
  Span* span;
  {
    SpinLockHolder h(heap_->lock());
    span = heap_->New(Length{SizeMap::ClassPages(cl_)});
    if (span != nullptr) heap_->RegisterSizeClass(span, cl_);
  }
  if (span == nullptr) {
    lock_.Lock();
    return false;
  }
  // Thread the objects in address order; the span is not visible to anyone yet.
  char* p = static_cast<char*>(span->start_ptr());
  void* head = p;
  for (uint32_t i = 1; i < objects_per_span_; ++i) {
    if constexpr (kDebugBuild) PoisonNew(p);
    NextOf(p) = p + size_;
    p += size_;
  }
  if constexpr (kDebugBuild) PoisonNew(p);
  NextOf(p) = nullptr;
  span->objects = head;
  span->refcount = 0;
  lock_.Lock();
  nonempty_.PushFront(span);
  free_objects_ += objects_per_span_;
  ++num_spans_;
  return true;
}

int CentralFreeList::RemoveRange(void** start, void** end, int n) {
  if (n == transfer_.batch() && transfer_.TryRemove(start, end)) return n;
  SpinLockHolder h(&lock_);
  void* head = nullptr;
  void* tail = nullptr;
  int got = 0;
  while (got < n) {
    Span* span = nonempty_.first();
    if (span == nullptr) {
      if (!Populate()) break;
      continue;
    }
    // Take as many as possible from this span at once.
    while (got < n && span->objects != nullptr) {
      void* obj = span->objects;
      span->objects = NextOf(obj);
      ++span->refcount;
      if (tail == nullptr) head = obj; else NextOf(tail) = obj;
      tail = obj;
      ++got;
    }
    if (span->objects == nullptr) {
      SpanList::Remove(span);
      empty_.PushFront(span);
    }
  }
  free_objects_ -= static_cast<size_t>(got);
  if (got > 0) NextOf(tail) = nullptr;
  *start = head;
  *end = tail;
  return got;
}

void CentralFreeList::InsertRange(void* start, int n) {
  Span* to_release = nullptr;  // chained through ->next, released after dropping lock_
  {
    SpinLockHolder h(&lock_);
    void* obj = start;
    for (int i = 0; i < n; ++i) {
      void* next = NextOf(obj);
      Span* span = pagemap_->GetSpan(PageId::FromPtr(obj));
      if (TCM_UNLIKELY(span == nullptr || span->sizeclass != cl_ || span->refcount == 0))
        Crash("free(): invalid pointer %p (double free or corrupted free list)", obj);
      if (span->objects == nullptr) {
        SpanList::Remove(span);
        nonempty_.PushFront(span);
      }
      NextOf(obj) = span->objects;
      span->objects = obj;
      ++free_objects_;
      if (--span->refcount == 0) {
        SpanList::Remove(span);
        free_objects_ -= objects_per_span_;
        --num_spans_;
        span->next = to_release;
        to_release = span;
      }
      obj = next;
    }
  }
  if (to_release != nullptr) {
    SpinLockHolder h(heap_->lock());
    while (to_release != nullptr) {
      Span* next = to_release->next;
      heap_->Delete(to_release);
      to_release = next;
    }
  }
}

void CentralFreeList::Verify() {
  SpinLockHolder h(&lock_);
  size_t free_count = 0, spans = 0;
  for (SpanList* list : {&nonempty_, &empty_}) {
    for (Span* s = list->first(); s != nullptr; s = list->NextOf(s)) {
      ++spans;
      TCM_CHECK(s->location == Span::kInUse && s->sizeclass == cl_);
      size_t in_span = 0;
      for (void* o = s->objects; o != nullptr; o = NextOf(o)) {
        TCM_CHECK(pagemap_->GetSpan(PageId::FromPtr(o)) == s);
        TCM_CHECK((static_cast<char*>(o) - static_cast<char*>(s->start_ptr())) % size_ == 0);
        ++in_span;
        TCM_CHECK(in_span <= objects_per_span_);
      }
      TCM_CHECK(in_span + s->refcount == objects_per_span_);
      TCM_CHECK((list == &empty_) == (in_span == 0));
      free_count += in_span;
    }
  }
  TCM_CHECK(free_count == free_objects_);
  TCM_CHECK(spans == num_spans_);
}

}  // namespace tcm
