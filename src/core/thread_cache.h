// ThreadCache: one per thread, a singly linked free list per size class. The malloc/free
// fast paths (allocation.h) touch only the calling thread's cache; everything here is the
// slow path: refilling from and flushing to the central lists, slow-start list sizing,
// and garbage collection when the cache outgrows its budget.
//
// List sizing follows the design's pseudo-code: max_length starts at 1, grows by one per
// refill up to num_objects_to_move (batch) and by batch beyond; a list that overflows
// releases min(max_length, batch) objects and, past kMaxOverages overflows, shrinks.
// Garbage collection moves L/2 objects back, L being the list's low-water mark since the
// previous collection.
//
// Budgets: each cache starts with max_size kStartCacheSize (or what is left unclaimed of the
// total, possibly 0) and grows by kStealAmount at each collection, taken from the unclaimed
// part of the total budget or, when none is left, stolen round-robin from other caches that
// are active (ThreadCacheRegistry). A cache never holds more than its budget plus
// kOverBudgetSlack for long: the sum over all caches stays within the total plus a slack
// per thread, idle threads included, because a budget only moves away from a thread that
// is running and will apply it at its next collection.
//
// Locking: a cache is only touched by its own thread, except max_size_ (written by stealers
// under the registry lock, read racily by the owner) and size stats (read racily).
#ifndef TCMALLOC_THREAD_CACHE_H_
#define TCMALLOC_THREAD_CACHE_H_

#include <cstddef>
#include <atomic>
#include <cstdint>

#include "core/arena.h"
#include "base/spinlock.h"
#include "core/central_freelist.h"
#include "core/size_classes.h"

namespace tcm {

inline constexpr size_t kStartCacheSize = 64 * 1024;
inline constexpr size_t kMinCacheSize = 64 * 1024;
inline constexpr size_t kStealAmount = 64 * 1024;
inline constexpr size_t kDefaultMaxTotalCacheSize = 16 << 20;
// One thread's budget grows by stealing up to this, whatever the total allows (gperftools'
// per-thread limit too). Uncapped, the one thread of t-test1 at 64 KiB blocks grew a cache
// of several MiB and peaked 4 MiB above the per-CPU mode (issue 12); 3 MiB would save
// another 0.5-2 MiB there for 1.3% more instructions.
inline constexpr size_t kMaxThreadCacheSize = 4 << 20;
inline constexpr uint32_t kMaxOverages = 3;
// A cache may hold this much beyond its budget before it sheds whole lists (the L/2 rule
// alone never empties a list a thread keeps using), and rechecks at least every kMinRoom
// bytes freed, so a cache with no budget does not walk its lists on every free.
inline constexpr size_t kOverBudgetSlack = 32 * 1024;
inline constexpr intptr_t kMinRoom = 4 * 1024;
// malloc's fast path does no byte accounting, so room_ only shrinks between checks: a
// thread that frees and reallocates blocks as large as its room (64 KiB blocks, 64 KiB
// budget) checked its size on every free, a walk of every list (49 ns a malloc+free pair
// against gperftools' 7). A check that finds the cache within budget but with room for
// fewer than kRoomBlocks blocks of the size just freed grows the budget from the unclaimed
// total (never by stealing: the cache is within its budget), up to kMaxThreadCacheSize, so
// checks come every kRoomBlocks frees at most while the total lasts. Only for blocks of
// kMinRoom and more: smaller ones are checked every few frees at worst (the room floor),
// and growing for them gave the first of 1000 threads churning blocks of up to 1 KiB
// budgets they filled (RSS growth 55-69 MiB against 47-57).
inline constexpr size_t kRoomBlocks = 16;
// A cache whose owner reached no slow path for this long is idle: its budget is not
// stolen, because only the owner can give back the objects it holds (no lock on its lists).
inline constexpr uint64_t kIdleThreadNs = 1'000'000'000;
inline constexpr uint32_t kMaxListLength = 8192;

class ThreadCacheRegistry;

class ThreadCache {
 public:
  // One class's list as the slow paths and tests see it: its length, maximum length and
  // recorded low-water mark, kept in the arrays below as spaces_ and space_marks_ (the
  // setters keep both consistent; see spaces_).
  class FreeList {
   public:
    FreeList(ThreadCache& tc, size_t cl) : head(tc.heads_[cl]), overages(tc.overages_[cl]), tc_(tc), cl_(cl) {}
    void*& head;
    uint32_t& overages;
    uint32_t length() const { return tc_.Length(cl_); }
    void set_length(uint32_t n) { tc_.spaces_[cl_] = static_cast<int32_t>(max_length() - n); }
    // 0 for class 0 and for the empty cache: every free takes the slow path.
    uint32_t max_length() const { return tc_.max_lengths_[cl_]; }
    // The length and the recorded mark stay what they were.
    void set_max_length(uint32_t m) {
      const int32_t delta = static_cast<int32_t>(m - max_length());
      tc_.spaces_[cl_] += delta;
      tc_.space_marks_[cl_] += delta;
      tc_.max_lengths_[cl_] = m;
    }
    // The lowest length a push saw since the last collection (LowWater says why that is
    // enough; malloc's pop does not keep it).
    uint32_t recorded_lowater() const {
      const int64_t room_left = tc_.space_marks_[cl_];
      return static_cast<uint32_t>(static_cast<int64_t>(max_length()) - room_left - 1);
    }
    void set_lowater(uint32_t n) {
      const int64_t room_left = static_cast<int64_t>(max_length()) - static_cast<int64_t>(n) - 1;
      tc_.space_marks_[cl_] = static_cast<int32_t>(room_left);
    }
    uint32_t object_size() const { return tc_.object_sizes_[cl_]; }

   private:
    ThreadCache& tc_;
    size_t cl_;
  };

  constexpr ThreadCache() = default;

  // central: shards->count groups of kNumClasses lists; refills and returns of a sharded
  // class go to the shard of the CPU the thread runs on at that moment (CentralOf).
  void Init(CentralFreeList* central, ThreadCacheRegistry* registry, size_t max_size,
            const CentralShards* shards = nullptr);

  // Slow path of malloc for class cl when its list is empty: refill from the central list
  // and return one object (nullptr when out of memory).
  void* FetchFromCentral(size_t cl);
  // Slow path of free: push p (REQUIRES p belongs to class cl) and handle an overflowing
  // list or an exhausted budget.
  void PushSlow(void* p, size_t cl);
  // Garbage collection (the design's L/2 rule); also asks for a bigger budget.
  void Scavenge();
  // Returns every cached object to the central lists (thread exit, MarkThreadIdle).
  void ReleaseAll();

  // Bytes held in the lists (a walk over the classes; racy when read by another thread).
  size_t size() const;
  // The same, for the owner only (plain loads, which the compiler vectorizes).
  size_t OwnSize() const;
  // Budget after thefts not yet applied by the owner.
  size_t max_size() const {
    return __atomic_load_n(&max_size_, __ATOMIC_RELAXED) - stolen_.load(std::memory_order_relaxed);
  }
  // The design's low-water mark L of class cl's list: its lowest length since the last
  // collection. A length lower than every later one is followed by a push (a pop would go
  // lower still) unless it is the length now, so the mark is the lowest length seen before
  // a push, or the length now.
  uint32_t LowWater(size_t cl) const {
    const int64_t before_push = int64_t{space_marks_[cl]} + 1;
    const int64_t highest = before_push > spaces_[cl] ? before_push : spaces_[cl];
    return static_cast<uint32_t>(int64_t{max_lengths_[cl]} - highest);
  }
  // Objects in class cl's list (the owner's view; other threads read it racily).
  // (32-bit arithmetic: a length is never negative. OwnSize's vectorised walk pays a load
  // and a subtraction per four classes for it: +0.8 instructions a 64 KiB pair.)
  uint32_t Length(size_t cl) const { return max_lengths_[cl] - static_cast<uint32_t>(spaces_[cl]); }
  // The same from another thread: two racy loads, and a length read between the owner's
  // updates of the two is clamped at 0.
  uint32_t RacyLength(size_t cl) const {
    const int64_t n = int64_t{__atomic_load_n(&max_lengths_[cl], __ATOMIC_RELAXED)} - __atomic_load_n(&spaces_[cl], __ATOMIC_RELAXED);
    return n > 0 ? static_cast<uint32_t>(n) : 0;
  }
  FreeList list(size_t cl) { return {*this, cl}; }

  // Slow path of free once room_ ran out (the free was of a block of freed_size bytes):
  // collects garbage if the cache really is over its budget, and otherwise recomputes
  // room_, first asking for budget when the room left is under kRoomBlocks such blocks.
  void CheckSize(size_t freed_size);
  // Times CheckSize ran (each walks every list): for tests.
  uint64_t size_checks() const { return size_checks_; }

  // Fast-path state, public so allocation.h can inline it: the lists as one array per
  // field, indexed by class (class 0 never holds objects). A fast path reaches a field of
  // class cl as cache + field offset + cl * field size, an addressing mode of its own (g++
  // forms cache + cl * 4 once for the 32-bit fields); with an array of 32-byte list
  // structs it first needed cl * 32 in a register, a shift and an add in both malloc and
  // free (callgrind: 61.5 -> 59.5 instructions a per-thread 32-byte pair).
  void* heads_[kNumClasses] = {};
  // Room left in the list: max_length - length, 0 or less when it is full (a list may hold
  // more than a maximum lowered under it). Kept instead of the length so that free's push
  // tests for room and takes it with one subtraction (its sign is the test), where a
  // length needed a compare with the maximum and an increment: callgrind 61.3 -> 60.3
  // instructions a per-thread 32-byte pair. malloc's pop adds 1.
  int32_t spaces_[kNumClasses] = {};
  uint32_t max_lengths_[kNumClasses] = {};
  // The low-water mark in the same terms: the highest room a push left (free's fast path
  // has it in a register), so the recorded mark is max_length - 1 - it. Room left rather
  // than room found: recording the room found kept a copy of it in a register.
  int32_t space_marks_[kNumClasses] = {};
  // The class's object size, kept here so free's byte accounting is one load in the same
  // addressing mode.
  uint32_t object_sizes_[kNumClasses] = {};
  uint32_t overages_[kNumClasses] = {};
  // Bytes that may still be freed into the cache before its size must be checked: at most
  // max_size_ minus the bytes held. Only frees (and refills) use it up, so malloc's fast
  // path does no byte accounting at all; CheckSize() makes it exact again.
  intptr_t room_ = 0;
  // Bytes to allocate until the next sample or housekeeping tick, whichever comes first
  // (allocation.cc's SampleDue; sampler.h); malloc's fast path subtracts the request and
  // leaves on a negative result.
  int64_t sample_left_ = 0;
  uint64_t rng_ = 0;  // the thread's sampling random state

 private:
  friend class ThreadCacheRegistry;
  // Moves n objects of class cl to the central list. `to_spans` bypasses the transfer
  // cache: memory a thread gives up for good (exit, idle) should free whole spans, not sit
  // in batches that pin spans all over the heap. `local`: the thread allocates the class
  // too (AllocatesToo), so a big class parks one batch only (TransferCache::kLocalOneBatchBytes).
  void ReleaseToCentral(FreeList l, size_t cl, uint32_t n, bool to_spans = false, bool local = false);
  // Whether this thread refills class cl from the central list too, rather than only
  // freeing it for others: its lists overflowed at most twice as often as they ran empty,
  // over the recent window (the per-CPU front end's rule, CpuCache::DeallocateMiss).
  bool AllocatesToo(size_t cl) const { return overflows_[cl] <= 2 * uint32_t{refills_[cl]}; }
  // Gives back whole lists, biggest classes first, until `bytes` are gone.
  void Shed(size_t bytes);
  void SetRoom(size_t held) {
    const intptr_t room = held < max_size_ ? static_cast<intptr_t>(max_size_ - held) : 0;
    room_ = room < kMinRoom ? kMinRoom : room;
  }
  // Owner only.
  void SetMaxSize(size_t new_max) {
    room_ += static_cast<intptr_t>(new_max) - static_cast<intptr_t>(max_size_);
    __atomic_store_n(&max_size_, new_max, __ATOMIC_RELAXED);
  }
  // Owner only: apply budget other threads took from us.
  void ApplyThefts() {
    if (TCM_UNLIKELY(stolen_.load(std::memory_order_relaxed) != 0))
      SetMaxSize(max_size_ - stolen_.exchange(0, std::memory_order_relaxed));
  }

  // Per class, the window AllocatesToo looks at: refills from the central list and
  // overflowing frees, each at most kTransferWindow; both halve when the overflows reach
  // it, so a thread that turns from allocating a class to only freeing it (or back) is
  // seen within that many overflows.
  static constexpr uint16_t kTransferWindow = 64;
  uint16_t refills_[kNumClasses] = {};
  uint16_t overflows_[kNumClasses] = {};

  size_t max_size_ = 0;          // written by the owner only
  uint64_t size_checks_ = 0;
  std::atomic<uint64_t> last_active_ns_{0};  // owner's last collection (or creation)
  std::atomic<size_t> stolen_{0};  // budget taken by other threads, applied by the owner
  CentralFreeList* central_ = nullptr;
  const CentralShards* shards_ = nullptr;
  // Class cl's list for the CPU the thread runs on now (the CPU is read only where there
  // is more than one shard).
  CentralFreeList& Central(size_t cl) const;
  ThreadCacheRegistry* registry_ = nullptr;
  ThreadCache* next_ = nullptr;
  ThreadCache* prev_ = nullptr;
};

// All live thread caches and the shared budget they divide among themselves.
class ThreadCacheRegistry {
 public:
  constexpr ThreadCacheRegistry() = default;

  // A new cache with the starting budget; nullptr if metadata memory ran out.
  ThreadCache* Create(Arena* arena, CentralFreeList* central, const CentralShards* shards = nullptr);
  // Returns the cache's objects and budget; the cache's memory is recycled.
  void Destroy(ThreadCache* tc);
  // Called at each collection: grow tc's budget, from unclaimed space or by stealing.
  // Adds kStealAmount to tc's budget, from the unclaimed total or (may_steal: a collection
  // of a cache over its budget) another active cache; false when it could not.
  bool GrowBudget(ThreadCache* tc, bool may_steal = true);

  void SetMaxTotal(size_t bytes);
  size_t max_total() const { return max_total_; }
  size_t count() const { return __atomic_load_n(&count_, __ATOMIC_RELAXED); }
  // Sum over caches of bytes held (racy, for stats).
  size_t TotalCachedBytes();
  size_t TotalMaxSize();
  // Adds each class's cached object count over all caches into counts[cl] (racy).
  void AddListLengths(size_t* counts);
  // The floor a cache's budget is never stolen below (tcmalloc.min_per_thread_cache_bytes).
  void set_min_per_thread(size_t bytes) { min_per_thread_ = bytes; }
  size_t min_per_thread() const { return min_per_thread_; }

  SpinLock* lock() { return &lock_; }
  void ResetLockAfterFork() { lock_.ResetAfterFork(); }

 private:
  SpinLock lock_;
  ThreadCache* head_ = nullptr;
  ThreadCache* next_victim_ = nullptr;
  MetadataFreeList<ThreadCache> alloc_;
  size_t count_ = 0;
  size_t min_per_thread_ = kMinCacheSize;
  size_t max_total_ = kDefaultMaxTotalCacheSize;
  intptr_t unclaimed_ = static_cast<intptr_t>(kDefaultMaxTotalCacheSize);
};

}  // namespace tcm

#endif  // TCMALLOC_THREAD_CACHE_H_
