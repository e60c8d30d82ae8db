// Arena: the allocator's own memory for metadata (spans, thread caches, pagemap nodes).
// Nothing inside the allocator uses malloc; everything it needs comes from here.
//
// Memory is carved by bumping a pointer through chunks obtained straight from the OS;
// it is never returned. Requests of kOwnMapping bytes and more (transfer cache arrays,
// slabs, pagemap nodes) get a mapping of their own, whose record lives in the current
// chunk: such a block is mostly untouched until used, and a record at its start would make
// one page of each resident (at start-up ~20 pages, one per array, 80 KiB of the
// baseline RSS). Typed objects that come and go (spans, thread caches) are recycled
// through MetadataFreeList<T>. Locking: Arena has its own lock, taken briefly.
#ifndef TCMALLOC_ARENA_H_
#define TCMALLOC_ARENA_H_

#include <cstddef>
#include <cstdint>

#include "base/spinlock.h"

namespace tcm {

class Arena {
 public:
  constexpr Arena() = default;

  // Zeroed memory aligned to `align` (a power of two <= 4096); nullptr if the OS refused.
  void* Alloc(size_t bytes, size_t align = 16);

  size_t bytes_reserved() const { return reserved_; }  // obtained from the OS
  size_t bytes_used() const { return used_; }          // handed out

  void ResetLockAfterFork() { lock_.ResetAfterFork(); }
  SpinLock* lock() { return &lock_; }

  // Calls fn(lo, hi, ctx) for every chunk obtained so far, newest first. No lock: chunks
  // are only ever added, at the head, and never change or go away (the heap checker calls
  // it with every allocator lock held). Metadata is never a program's reference: stale
  // words in it (a transfer cache slot of a chain since handed out, a dead thread cache's
  // list head) point at objects that may be live, and must not keep them "reachable".
  void ForEachChunk(void (*fn)(uintptr_t lo, uintptr_t hi, void* ctx), void* ctx) const;

 private:
  struct ChunkRecord {  // at the start of a chunk; a mapping's in the chunk in use
    const ChunkRecord* next;
    uintptr_t start;
    size_t bytes;
  };
  static constexpr size_t kChunk = 128 * 1024;
  static constexpr size_t kOwnMapping = 16 * 1024;
  // Bump allocation from the current chunk (a new one when it does not fit). REQUIRES lock_.
  void* CarveLocked(size_t bytes, size_t align);
  // A mapping of its own for bytes (>= kOwnMapping; page-aligned). REQUIRES lock_.
  void* MapLocked(size_t bytes);
  void Publish(ChunkRecord* record, uintptr_t start, size_t bytes);
  SpinLock lock_;
  char* cur_ = nullptr;
  size_t left_ = 0;
  size_t reserved_ = 0;
  size_t used_ = 0;
  const ChunkRecord* chunks_ = nullptr;  // newest first; published with a release store
};

// A free list of T objects over an Arena. Not thread-safe: the owner's lock guards it.
template <typename T>
class MetadataFreeList {
 public:
  constexpr MetadataFreeList() = default;
  // Returns zeroed storage for one T (not constructed), or nullptr.
  T* New(Arena* arena) {
    if (free_ != nullptr) {
      Node* n = free_;
      free_ = n->next;
      --free_count_;
      __builtin_memset(static_cast<void*>(n), 0, sizeof(T));
      ++in_use_;
      return reinterpret_cast<T*>(n);
    }
    void* p = arena->Alloc(sizeof(T) < sizeof(Node) ? sizeof(Node) : sizeof(T), alignof(T) < 16 ? 16 : alignof(T));
    if (p != nullptr) ++in_use_;
    return static_cast<T*>(p);
  }
  void Delete(T* t) {
    Node* n = reinterpret_cast<Node*>(t);
    n->next = free_;
    free_ = n;
    ++free_count_;
    --in_use_;
  }
  size_t in_use() const { return in_use_; }
  size_t free_count() const { return free_count_; }

 private:
  struct Node {
    Node* next;
  };
  Node* free_ = nullptr;
  size_t in_use_ = 0;
  size_t free_count_ = 0;
};

}  // namespace tcm

#endif  // TCMALLOC_ARENA_H_
