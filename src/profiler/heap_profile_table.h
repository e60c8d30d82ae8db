// The heap profiler's tables: every live allocation (address -> its bytes and stack bucket)
// and every allocating stack (bucket: the stack and its alloc/free counts and bytes).
//
// Both are chained hash tables whose slot arrays come straight from mmap and double when
// they fill; nodes come from a ProfileArena (mmap'ed chunks). Nothing here calls malloc, so
// the profiler's allocation hooks can use it, and Reset() gives every byte back to the OS.
// Buckets live until Reset(): pprof wants the allocation totals of stacks whose objects are
// all gone too (its alloc_space view).
//
// Locking: none inside. The owner (the profiler) serialises every call with its own lock.
#ifndef TCMALLOC_HEAP_PROFILE_TABLE_H_
#define TCMALLOC_HEAP_PROFILE_TABLE_H_

#include <cstddef>
#include <cstdint>

namespace tcm {

class ProfileWriter;

// Allocation and free counts of one stack, or of the whole profile.
struct HeapCounts {
  int64_t alloc_count = 0;
  int64_t alloc_bytes = 0;
  int64_t free_count = 0;
  int64_t free_bytes = 0;
  int64_t inuse_count() const { return alloc_count - free_count; }
  int64_t inuse_bytes() const { return alloc_bytes - free_bytes; }
};

// Bump allocation from 1 MiB chunks of mmap'ed memory; everything is unmapped at once by
// ReleaseAll(). Not thread-safe.
class ProfileArena {
 public:
  constexpr ProfileArena() = default;
  // Zeroed, 16-byte aligned memory; nullptr if the OS refused.
  void* Alloc(size_t bytes);
  void ReleaseAll();
  size_t bytes_mapped() const { return mapped_; }

 private:
  static constexpr size_t kChunk = size_t{1} << 20;
  struct Chunk {
    Chunk* next;
    size_t bytes;
  };
  Chunk* chunks_ = nullptr;
  char* cur_ = nullptr;
  size_t left_ = 0;
  size_t mapped_ = 0;
};

class HeapProfileTable {
 public:
  struct Bucket {
    Bucket* next;  // hash chain
    uint64_t hash;
    HeapCounts counts;
    int depth;
    // The stack follows the struct in the same allocation: depth return addresses.
    void* const* stack() const { return reinterpret_cast<void* const*>(this + 1); }
    void** stack() { return reinterpret_cast<void**>(this + 1); }
  };

  constexpr HeapProfileTable() = default;

  // Records an allocation of `bytes` at p from the stack pcs[0..depth), innermost first.
  // An address already live (its free was never seen) is first counted as freed. Returns
  // false, recording nothing, when the tables cannot get memory.
  bool RecordAlloc(const void* p, size_t bytes, void* const* pcs, int depth);
  // Records the free of p. Returns false if p is not a live recorded allocation (it was
  // made before the profile started, or never by malloc).
  bool RecordFree(const void* p);

  // The record of a live object: its bytes and bucket. False if p is not live.
  bool FindLive(const void* p, size_t* bytes, const Bucket** bucket) const;

  const HeapCounts& totals() const { return totals_; }
  size_t num_buckets() const { return buckets_.count; }
  size_t num_live() const { return live_.count; }
  // Memory the tables hold (arena chunks and slot arrays).
  size_t bytes_mapped() const;

  // Writes the profile in gperftools' text format: the header line
  //   heap profile: <inuse objs>: <inuse bytes> [<alloc objs>: <alloc bytes>] @ <label>
  // then one line per bucket, most in-use bytes first,
  //   <inuse objs>: <inuse bytes> [<alloc objs>: <alloc bytes>] @ 0x... 0x...
  // The caller appends the MAPPED_LIBRARIES section.
  void Write(ProfileWriter* out, const char* label) const;

  // Forgets everything and returns all memory to the OS.
  void Reset();

 private:
  struct LiveObject {
    uintptr_t addr;
    LiveObject* next;  // hash chain, or the free list
    Bucket* bucket;
    size_t bytes;
  };

  // A chained hash table's slots; the array is mmap'ed and doubles at load factor 1.
  template <typename Node>
  struct Slots {
    Node** slots = nullptr;
    size_t size = 0;  // a power of two, or 0 before the first insertion
    size_t count = 0;
  };

  static uint64_t HashAddress(uintptr_t addr);
  static uint64_t HashStack(void* const* pcs, int depth);
  template <typename Node, typename HashOf>
  static bool Grow(Slots<Node>* t, HashOf hash_of);
  template <typename Node>
  static void ReleaseSlots(Slots<Node>* t);

  Bucket* FindOrAddBucket(void* const* pcs, int depth);
  void CountFree(LiveObject* o);

  ProfileArena arena_;
  Slots<LiveObject> live_;
  Slots<Bucket> buckets_;
  LiveObject* free_objects_ = nullptr;  // recycled LiveObject nodes
  HeapCounts totals_;
};

}  // namespace tcm

#endif  // TCMALLOC_HEAP_PROFILE_TABLE_H_
