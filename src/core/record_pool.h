// RecordPool: fixed-size metadata records (spans) in 4 KiB pages that go back to the OS
// once every record in them is free.
//
// Why: the page heap needs a Span record for every span and every free run, so a heap of
// small objects holds one record per 8 KiB page it uses: 24 000 records (2.8 MiB) for the
// 188 MiB key-value table of bench/kv_server. MetadataFreeList (arena.h) recycles records
// but never returns their memory, so once the table was emptied those 2.8 MiB stayed
// resident for the life of the process, 15% of everything it then held.
//
// Layout: blocks of kPagesPerBlock pages from the arena (mappings of their own, touched only
// as pages are used). A page in use starts with a pointer to its descriptor (PageInfo,
// kept in the arena apart from the page, so it survives the page's release), then records;
// no record straddles two pages. Each page keeps its own free list and count. A page is in
// one of five states, and the four that are not full each have a list:
//   dense    at least half its records in use: New takes from here first
//   sparse   fewer in use: New's second choice
//   full     no record free: on no list
//   empty    every record free, memory still backed: New's third choice; Release trims it
//   unbacked released to the OS, or never touched: New's last resort before a new block
// New prefers pages well in use, so records gather in few pages and the others drain: when
// a big heap is freed, the records it still makes (merged runs) go to pages that stay in
// use anyway instead of pinning one that was about to empty. (With one list of partial
// pages, most recently freed first, a two-phase program kept 500 live records spread over
// 340 pages after its heap was gone.)
// Release (from maintenance and ReleaseFreeMemory) keeps `keep` empty pages for the next
// burst and gives back the rest, one madvise per run of adjacent pages. Records that
// survive a big free stay where they were, a few a page; an owner that can move records
// (the page heap, for its free runs) asks for those of sparse pages (CollectSparse) and
// moves them to pages well in use (NewForMove), so the sparse pages empty.
//
// A stale pointer to a freed record (a lock-free look-up through the pagemap) reads the
// zeros of a released page or another record, as with any recycled record; the page's
// first word is never a record.
//
// Locking: none of its own; the owner's lock guards every call (the page heap's).
#ifndef TCMALLOC_RECORD_POOL_H_
#define TCMALLOC_RECORD_POOL_H_

#include <cstddef>
#include <cstdint>

#include "core/arena.h"

namespace tcm {

class RecordPool {
 public:
  static constexpr size_t kPageBytes = 4096;     // the OS page: the unit of release
  static constexpr size_t kPagesPerBlock = 16;   // 64 KiB obtained at a time
  static constexpr size_t kPageHeader = 8;       // the descriptor pointer
  static constexpr size_t kMaxRecordBytes = kPageBytes - kPageHeader;

  // All zero: a pool inside a global stays in .bss (in .data, the kernel's fault-around maps
  // it from the file at start-up: tests/integration/startup_rss_test.py). The record size
  // is therefore not a member: every New passes the same one.
  constexpr RecordPool() = default;
  RecordPool(const RecordPool&) = delete;
  RecordPool& operator=(const RecordPool&) = delete;

  // Records of record_bytes bytes that fit a page after its header.
  static constexpr size_t RecordsPerPage(size_t record_bytes) { return (kPageBytes - kPageHeader) / record_bytes; }
  // Zeroed storage for one record, or nullptr when the arena could not grow. record_bytes:
  // a multiple of 8 (records are 8-byte aligned), at most a page's room, the same on every
  // call to this pool.
  void* New(Arena* arena, size_t record_bytes);
  // REQUIRES: r came from New and was not deleted since.
  void Delete(void* r);
  // Gives back to the OS every empty page beyond `keep`; returns the bytes released.
  size_t Release(size_t keep_pages);

  // Compaction, for an owner that can move some of its records (the page heap's free
  // runs): records that survive a big free stay scattered, one or two a page (300 live
  // span records held 900 KiB after a 300 MB heap was freed). Writes to out the records
  // in use on sparse pages with at most max_used in use whose every record in use is
  // movable(record), whole pages only, at most max; returns how many. Returns 0 when a
  // page holds more than 64 records of record_bytes.
  size_t CollectSparse(void** out, size_t max, size_t max_used, size_t record_bytes,
                       bool (*movable)(const void*) = nullptr);
  // Like New, but never from a sparse page (a record moved there would pin it as well)
  // and never growing. nullptr when only sparse pages have room.
  void* NewForMove(size_t record_bytes);

  size_t in_use() const { return in_use_; }
  size_t empty_pages() const { return empty_.count; }
  // Pages obtained from the arena and not backed now (released, or never touched).
  size_t unbacked_bytes() const { return unbacked_.count * kPageBytes; }
  // Released after use, in all (a counter).
  size_t released_bytes() const { return released_bytes_; }
  size_t backed_bytes() const { return (blocks_ * kPagesPerBlock - unbacked_.count) * kPageBytes; }

 private:
  enum class State : uint8_t { kDense, kSparse, kFull, kEmpty, kUnbacked };
  struct PageInfo {
    PageInfo* next;
    PageInfo* prev;
    char* page;
    void* free;      // the page's free records, linked through their first word
    uint32_t used;   // records handed out
    State state;
  };
  struct PageList {
    PageInfo* first = nullptr;
    size_t count = 0;
    void Push(PageInfo* p);
    void Remove(PageInfo* p);
  };
  PageList& ListOf(State s) {
    return s == State::kDense ? dense_ : s == State::kSparse ? sparse_ : s == State::kEmpty ? empty_ : unbacked_;
  }
  // The state a page belongs in, by its records in use (of per_page).
  static State StateFor(const PageInfo* p, size_t per_page) {
    if (p->used == 0) return State::kEmpty;
    if (p->free == nullptr) return State::kFull;
    return 2 * p->used >= per_page ? State::kDense : State::kSparse;
  }
  void Move(PageInfo* p, State to);
  bool AddBlock(Arena* arena);
  // Hands out p's first free record, zeroed, and files p under its new state.
  void* TakeFrom(PageInfo* p, size_t record_bytes);
  // Writes the descriptor pointer and threads the page's records (touches the page).
  static void SetUpPage(PageInfo* p, size_t record_bytes);

  size_t per_page_ = 0;  // set by the first New
  PageList dense_;
  PageList sparse_;
  PageList empty_;
  PageList unbacked_;
  // Blocks' descriptor arrays, newest first (Release walks them for runs of empty pages).
  struct Block {
    Block* next;
    PageInfo pages[kPagesPerBlock];
  };
  Block* blocks_list_ = nullptr;
  size_t blocks_ = 0;
  size_t in_use_ = 0;
  size_t released_bytes_ = 0;
};

// Typed view: RecordPool for T (zeroed storage, not constructed).
template <typename T>
class TypedRecordPool {
 public:
  static_assert(alignof(T) <= 8, "records are 8-byte aligned");
  static_assert(sizeof(T) <= RecordPool::kMaxRecordBytes, "a record must fit a page");
  static constexpr size_t kRecordBytes = (sizeof(T) + 7) & ~size_t{7};
  constexpr TypedRecordPool() = default;
  T* New(Arena* arena) { return static_cast<T*>(pool_.New(arena, kRecordBytes)); }
  void Delete(T* t) { pool_.Delete(t); }
  RecordPool& pool() { return pool_; }
  const RecordPool& pool() const { return pool_; }

 private:
  RecordPool pool_;
};

}  // namespace tcm

#endif  // TCMALLOC_RECORD_POOL_H_
