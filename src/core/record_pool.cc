#include "core/record_pool.h"

#include "platform/os.h"

namespace tcm {

void RecordPool::PageList::Push(PageInfo* p) {
  p->prev = nullptr;
  p->next = first;
  if (first != nullptr) first->prev = p;
  first = p;
  ++count;
}

void RecordPool::PageList::Remove(PageInfo* p) {
  if (p->prev != nullptr) p->prev->next = p->next;
  else first = p->next;
  if (p->next != nullptr) p->next->prev = p->prev;
  p->next = p->prev = nullptr;
  --count;
}

void RecordPool::Move(PageInfo* p, State to) {
  if (p->state != State::kFull) ListOf(p->state).Remove(p);
  p->state = to;
  if (to != State::kFull) ListOf(to).Push(p);
}

bool RecordPool::AddBlock(Arena* arena) {
  // Both from the arena: the pages as a mapping of their own (>= Arena::kOwnMapping),
  // untouched until used; the descriptors carved from a chunk.
  char* pages = static_cast<char*>(arena->Alloc(kPagesPerBlock * kPageBytes, kPageBytes));
  if (pages == nullptr) return false;
  auto* block = static_cast<Block*>(arena->Alloc(sizeof(Block), alignof(Block)));
  if (block == nullptr) return false;  // (the pages stay reserved, never used)
  block->next = blocks_list_;
  blocks_list_ = block;
  ++blocks_;
  // Pushed from the last page down, so New takes them in address order.
  for (size_t i = kPagesPerBlock; i-- > 0;) {
    PageInfo* p = &block->pages[i];
    p->page = pages + i * kPageBytes;
    p->state = State::kUnbacked;
    unbacked_.Push(p);
  }
  return true;
}

void RecordPool::SetUpPage(PageInfo* p, size_t record_bytes) {
  *reinterpret_cast<PageInfo**>(p->page) = p;
  char* r = p->page + kPageHeader;
  p->free = r;
  const size_t per_page = RecordsPerPage(record_bytes);
  for (size_t i = 1; i < per_page; ++i, r += record_bytes) *reinterpret_cast<void**>(r) = r + record_bytes;
  *reinterpret_cast<void**>(r) = nullptr;
  p->used = 0;
}

void* RecordPool::New(Arena* arena, size_t record_bytes) {
  per_page_ = RecordsPerPage(record_bytes);
  PageInfo* p = dense_.first;
  if (p == nullptr) p = sparse_.first;
  if (p == nullptr) p = empty_.first;
  if (p == nullptr) {
    if (unbacked_.first == nullptr && !AddBlock(arena)) return nullptr;
    p = unbacked_.first;
    SetUpPage(p, record_bytes);  // released pages read as zeros: the page is set up again
    Move(p, State::kEmpty);
  }
  return TakeFrom(p, record_bytes);
}

void* RecordPool::TakeFrom(PageInfo* p, size_t record_bytes) {
  void* r = p->free;
  p->free = *static_cast<void**>(r);
  ++p->used;
  ++in_use_;
  if (const State to = StateFor(p, per_page_); to != p->state) Move(p, to);
  __builtin_memset(r, 0, record_bytes);
  return r;
}

void RecordPool::Delete(void* r) {
  const uintptr_t page = reinterpret_cast<uintptr_t>(r) & ~uintptr_t{kPageBytes - 1};
  PageInfo* p = *reinterpret_cast<PageInfo**>(page);
  *static_cast<void**>(r) = p->free;
  p->free = r;
  --p->used;
  --in_use_;
  if (const State to = StateFor(p, per_page_); to != p->state) Move(p, to);
}

size_t RecordPool::Release(size_t keep_pages) {
  size_t released = 0;
  for (Block* b = blocks_list_; b != nullptr && empty_.count > keep_pages; b = b->next) {
    // Runs of adjacent empty pages, each released with one call.
    for (size_t i = 0; i < kPagesPerBlock && empty_.count > keep_pages;) {
      if (b->pages[i].state != State::kEmpty) {
        ++i;
        continue;
      }
      size_t n = 0;
      while (i + n < kPagesPerBlock && b->pages[i + n].state == State::kEmpty && empty_.count - n > keep_pages) ++n;
      if (!os::ReleasePages(b->pages[i].page, n * kPageBytes)) return released;
      for (size_t k = 0; k < n; ++k) Move(&b->pages[i + k], State::kUnbacked);
      released += n * kPageBytes;
      i += n;
    }
  }
  released_bytes_ += released;
  return released;
}

size_t RecordPool::CollectSparse(void** out, size_t max, size_t max_used, size_t record_bytes,
                                 bool (*movable)(const void*)) {
  const size_t per_page = RecordsPerPage(record_bytes);
  if (per_page > 64) return 0;
  size_t n = 0;
  for (PageInfo* p = sparse_.first; p != nullptr; p = p->next) {
    if (p->used > max_used) continue;
    if (n + p->used > max) break;
    uint64_t free_slots = 0;
    for (void* f = p->free; f != nullptr; f = *static_cast<void**>(f))
      free_slots |= uint64_t{1} << ((static_cast<char*>(f) - p->page - kPageHeader) / record_bytes);
    // A page with a record that cannot move would not empty: not worth moving the others
    // (and the pages after it get their turn).
    const size_t start = n;
    for (size_t i = 0; i < per_page; ++i) {
      if ((free_slots >> i & 1) != 0) continue;
      void* const r = p->page + kPageHeader + i * record_bytes;
      if (movable != nullptr && !movable(r)) {
        n = start;
        break;
      }
      out[n++] = r;
    }
  }
  return n;
}

void* RecordPool::NewForMove(size_t record_bytes) {
  PageInfo* p = dense_.first;
  if (p == nullptr) p = empty_.first;
  if (p == nullptr && (p = unbacked_.first) != nullptr) {
    SetUpPage(p, record_bytes);
    Move(p, State::kEmpty);
  }
  return p == nullptr ? nullptr : TakeFrom(p, record_bytes);
}

}  // namespace tcm
