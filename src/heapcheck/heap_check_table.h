// The heap checker's record of every live allocation, and the stacks they came from.
//
// AllocTable: address -> (size, allocation stack, serial number, flags), an open-addressing
// hash table with linear probing and backward-shift deletion (no tombstones, so a program
// that allocates and frees forever keeps short probe chains). Addresses are stored hidden
// (heap_check_memory.h), so the table itself can never look like a root that points at the
// objects it describes.
//
// StackTable: interns allocation stacks. Each distinct stack is stored once; records refer
// to it by a 32-bit id. Stack memory is append-only and never moves, so a stack read by id
// stays valid without the lock once the id is known.
//
// Memory comes from anonymous mappings (MappedArray and a chunk pool), never from malloc: these
// tables are updated from inside malloc and free. Not thread-safe: the checker's lock
// guards both.
#ifndef TCMALLOC_HEAP_CHECK_TABLE_H_
#define TCMALLOC_HEAP_CHECK_TABLE_H_

#include <cstddef>
#include <cstdint>

#include "heapcheck/heap_check_memory.h"

namespace tcm::heapcheck {

struct AllocRecord {
  uintptr_t key;    // Hide(address); 0 marks an empty slot
  uint64_t size;    // bytes requested
  uint64_t serial;  // allocation order, from 1
  uint32_t stack;   // StackTable id
  uint32_t flags;   // AllocFlags
};

enum AllocFlags : uint32_t {
  kIgnored = 1,   // HeapLeakChecker::IgnoreObject: a root, never reported
  kDisabled = 2,  // allocated under a HeapLeakChecker::Disabler: same
};

class AllocTable {
 public:
  constexpr AllocTable() = default;

  // Records an allocation (replacing a stale record at the same address). False when
  // memory for the table ran out (the allocation is then simply not tracked).
  bool Insert(uintptr_t addr, uint64_t size, uint32_t stack, uint32_t flags, uint64_t serial);
  // Forgets addr; false if it was not recorded.
  bool Remove(uintptr_t addr);
  AllocRecord* Find(uintptr_t addr);

  size_t count() const { return count_; }
  Range Extent() const { return slots_.Extent(); }
  // Visits every record (f may change flags, not keys).
  template <typename F>
  void ForEach(F f) {
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].key != 0) f(&slots_[i]);
  }

 private:
  size_t Home(uintptr_t key) const;
  bool Grow();

  MappedArray<AllocRecord> slots_;  // size() is the capacity, a power of two
  size_t count_ = 0;
};

class StackTable {
 public:
  static constexpr uint32_t kNone = 0xffffffffu;
  constexpr StackTable() = default;

  // The id of this sequence of return addresses, adding it if new; kNone if out of memory.
  uint32_t Intern(void* const* pcs, int depth);
  // The stack with this id. The memory stays valid (and unchanged) forever.
  int Get(uint32_t id, const uintptr_t** pcs) const;
  size_t count() const { return entries_.size(); }

 private:
  struct Entry {
    uint64_t hash;
    const uintptr_t* pcs;
    uint32_t depth;
    uint32_t unused;
  };
  bool GrowIndex();

  MappedArray<Entry> entries_;    // by id
  MappedArray<uint32_t> index_;   // open addressing over ids (kNone = empty)
  // The return addresses themselves: carved from anonymous chunks that are never given
  // back (entries point into them for good).
  class Pool {
   public:
    constexpr Pool() = default;
    // 8-byte aligned memory, or nullptr if the OS refused.
    void* Alloc(size_t bytes);

   private:
    static constexpr size_t kChunk = 256 * 1024;
    char* cur_ = nullptr;
    size_t left_ = 0;
  };
  Pool pool_;
};

}  // namespace tcm::heapcheck

#endif  // TCMALLOC_HEAP_CHECK_TABLE_H_
