// GuardedPool: sampled small allocations placed against PROT_NONE guard pages, so that an
// overflow, an underflow or a use after free of one of them faults at the faulting
// instruction (the design of GWP-ASan, as google/tcmalloc uses it in production).
//
// Layout: one reservation of 2 * kSlots + 1 units of kSlotBytes (one page each), guard and
// slot alternating, guards at both ends:
//   [guard][slot 0][guard][slot 1][guard] ... [slot kSlots-1][guard]
// Only a slot holding a live block is accessible. Blocks alternate between the right end
// of their slot (an overflow past the block's usable size touches the next guard) and the
// left end (an underflow touches the previous guard). A freed slot is made inaccessible and
// its memory released; free slots are reused in FIFO order, so a freed block stays
// inaccessible until every other free slot has been used again (the quarantine).
//
// The guarded block's usable size is its size class's (what nallocx promises), so programs
// that use malloc_usable_size see the same numbers; overflows are caught past that size.
//
// Memory: address space (2 * kSlots + 1) * kSlotBytes = 2.0 MiB; resident at most
// kSlots * kSlotBytes = 1 MiB (live blocks only) plus kSlots records (~70 KiB, from the
// arena, taken at the first guarded allocation).
//
// A fault inside the reservation is reported by OnFault, which the owner calls from its
// SIGSEGV handler (platform/fault_handler.h, installed by api/allocation.cc): the kind (heap-buffer-overflow, heap-buffer-underflow, use-after-free),
// the block, and the stacks of its allocation and, if freed, of its deallocation; then
// abort. Faults elsewhere go to the program's own handler.
//
// Locking: lock_ guards the slots and the free ring; a leaf lock. The fault report reads
// the records without it (signal context; the faulting access is the program's, never
// ours under the lock).
#ifndef TCMALLOC_GUARDED_ALLOC_H_
#define TCMALLOC_GUARDED_ALLOC_H_

#include <cstddef>
#include <cstdint>

#include "base/config.h"
#include "base/spinlock.h"
#include "core/arena.h"

namespace tcm {

class GuardedPool {
 public:
  static constexpr size_t kSlots = 128;
  static constexpr size_t kSlotBytes = kPageSize;  // the largest guarded block
  static constexpr size_t kReservedBytes = (2 * kSlots + 1) * kSlotBytes;
  static constexpr int kStackDepth = 32;

  constexpr GuardedPool() = default;

  // A guarded block of `size` bytes (usable: `usable` >= size, a multiple of the block's
  // alignment, <= kSlotBytes), its allocation stack pcs[0..depth). nullptr when every slot
  // is taken or the pool could not be set up (the caller then allocates normally).
  void* Allocate(size_t size, size_t usable, Arena* arena, void* const* pcs, int depth);

  // Whether p lies in the pool's reservation (two loads, no lock).
  bool Contains(const void* p) const {
    const uintptr_t base = __atomic_load_n(&base_, __ATOMIC_ACQUIRE);
    return base != 0 && reinterpret_cast<uintptr_t>(p) - base < kReservedBytes;
  }

  // Frees p (REQUIRES Contains(p)); crashes with a report on a double free or a pointer
  // that is not a live block's start.
  void Deallocate(void* p, void* const* pcs, int depth);

  // Usable size of the live block starting at p; 0 if p is not one (REQUIRES Contains(p)).
  size_t UsableSize(const void* p);

  // The live block holding byte addr: true with its start and usable size. Takes no lock
  // (for ownership queries, racy by nature, and for callers holding every allocator lock).
  bool FindLive(uintptr_t addr, uintptr_t* start, size_t* usable) const;

  // Called by the fault handler: if addr is in the pool, reports and aborts.
  void OnFault(const void* addr);

  size_t live() const { return __atomic_load_n(&live_, __ATOMIC_RELAXED); }
  uint64_t total_allocations() const { return __atomic_load_n(&total_, __ATOMIC_RELAXED); }
  // Bytes the live blocks' slots keep resident.
  size_t resident_bytes() const { return live() * kSlotBytes; }

  SpinLock* lock() { return &lock_; }
  void ResetLockAfterFork() { lock_.ResetAfterFork(); }

 private:
  enum class State : uint8_t { kUnused, kLive, kFreed };
  struct Slot {
    uintptr_t block;
    size_t size;
    size_t usable;
    State state;
    int alloc_depth;
    int free_depth;
    void* alloc_pcs[kStackDepth];
    void* free_pcs[kStackDepth];
  };

  bool Init(Arena* arena);  // REQUIRES lock_ held
  uintptr_t SlotStart(size_t i) const { return base_ + (2 * i + 1) * kSlotBytes; }
  // Slot whose data pages hold addr, or -1 (addr in a guard or outside).
  long SlotOf(uintptr_t addr) const;
  [[noreturn]] void Report(const char* what, uintptr_t addr, const Slot& s, bool with_free_stack) const;

  SpinLock lock_;
  uintptr_t base_ = 0;  // 0 until the first guarded allocation
  bool init_failed_ = false;
  bool right_next_ = true;
  Slot* slots_ = nullptr;
  uint16_t ring_[kSlots] = {};  // free slot indices, oldest free first
  size_t ring_head_ = 0;
  size_t ring_count_ = 0;
  size_t live_ = 0;
  uint64_t total_ = 0;
};

}  // namespace tcm

#endif  // TCMALLOC_GUARDED_ALLOC_H_
