#include "core/guarded_alloc.h"

#include "base/log.h"
#include "platform/os.h"
#include "platform/stack_trace.h"

namespace tcm {

bool GuardedPool::Init(Arena* arena) {
  if (init_failed_) return false;
  init_failed_ = true;  // until everything below worked
  // The OS aligns a reservation to its 4 KiB pages; slots are kSlotBytes (8 KiB) apart.
  // Reserving one slot more and starting at a multiple of kSlotBytes makes every slot and
  // guard boundary a multiple of kSlotBytes whatever address the kernel picked (the unit
  // test relied on that by luck; under ASan the kernel picked otherwise).
  void* region = os::ReserveNoAccess(kReservedBytes + kSlotBytes);
  if (region == nullptr) return false;
  slots_ = static_cast<Slot*>(arena->Alloc(sizeof(Slot) * kSlots, alignof(Slot)));
  if (slots_ == nullptr) {
    os::Unmap(region, kReservedBytes + kSlotBytes);
    return false;
  }
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(region) + kSlotBytes - 1) & ~(uintptr_t{kSlotBytes} - 1);
  region = reinterpret_cast<void*>(aligned);
  for (size_t i = 0; i < kSlots; ++i) ring_[i] = static_cast<uint16_t>(i);
  ring_head_ = 0;
  ring_count_ = kSlots;
  __atomic_store_n(&base_, reinterpret_cast<uintptr_t>(region), __ATOMIC_RELEASE);
  init_failed_ = false;
  return true;
}

void* GuardedPool::Allocate(size_t size, size_t usable, Arena* arena, void* const* pcs, int depth) {
  if (usable > kSlotBytes || usable < size) return nullptr;
  SpinLockHolder h(&lock_);
  if (base_ == 0 && !Init(arena)) return nullptr;
  if (ring_count_ == 0) return nullptr;
  const size_t i = ring_[ring_head_];
  const uintptr_t start = SlotStart(i);
  if (!os::SetAccess(reinterpret_cast<void*>(start), kSlotBytes, true)) return nullptr;
  ring_head_ = (ring_head_ + 1) % kSlots;
  --ring_count_;
  Slot& s = slots_[i];
  s.block = right_next_ ? start + kSlotBytes - usable : start;
  right_next_ = !right_next_;
  s.size = size;
  s.usable = usable;
  s.state = State::kLive;
  s.alloc_depth = depth < kStackDepth ? depth : kStackDepth;
  for (int k = 0; k < s.alloc_depth; ++k) s.alloc_pcs[k] = pcs[k];
  s.free_depth = 0;
  __atomic_store_n(&live_, live_ + 1, __ATOMIC_RELAXED);
  __atomic_store_n(&total_, total_ + 1, __ATOMIC_RELAXED);
  return reinterpret_cast<void*>(s.block);
}

long GuardedPool::SlotOf(uintptr_t addr) const {
  const uintptr_t off = addr - base_;
  if (base_ == 0 || off >= kReservedBytes) return -1;
  const uintptr_t unit = off / kSlotBytes;
  return (unit & 1) != 0 ? static_cast<long>((unit - 1) / 2) : -1;
}

void GuardedPool::Deallocate(void* p, void* const* pcs, int depth) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  SpinLockHolder h(&lock_);
  const long i = SlotOf(addr);
  if (i < 0) Crash("free(): invalid pointer %p (in a guard page of the guarded pool)", p);
  Slot& s = slots_[i];
  if (s.state == State::kFreed && addr == s.block) {
    lock_.Unlock();  // Report aborts; keep the pool usable for nobody in particular
    Report("double-free", addr, s, true);
  }
  if (s.state != State::kLive || addr != s.block)
    Crash("free(): invalid pointer %p (not the start of a live guarded block)", p);
  s.state = State::kFreed;
  s.free_depth = depth < kStackDepth ? depth : kStackDepth;
  for (int k = 0; k < s.free_depth; ++k) s.free_pcs[k] = pcs[k];
  void* start = reinterpret_cast<void*>(SlotStart(static_cast<size_t>(i)));
  os::SetAccess(start, kSlotBytes, false);
  os::ReleasePages(start, kSlotBytes);
  ring_[(ring_head_ + ring_count_) % kSlots] = static_cast<uint16_t>(i);
  ++ring_count_;
  __atomic_store_n(&live_, live_ - 1, __ATOMIC_RELAXED);
}

size_t GuardedPool::UsableSize(const void* p) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  SpinLockHolder h(&lock_);
  const long i = SlotOf(addr);
  if (i < 0) return 0;
  const Slot& s = slots_[i];
  return s.state == State::kLive && s.block == addr ? s.usable : 0;
}

bool GuardedPool::FindLive(uintptr_t addr, uintptr_t* start, size_t* usable) const {
  const long i = SlotOf(addr);
  if (i < 0 || slots_ == nullptr) return false;
  const Slot& s = slots_[i];
  if (s.state != State::kLive || addr < s.block || addr >= s.block + s.usable) return false;
  *start = s.block;
  *usable = s.usable;
  return true;
}

static void PrintStack(const char* title, void* const* pcs, int depth) {
  char line[512];
  {
    Printer out(line, sizeof(line));
    out.Printf("  %s:\n", title);
    os::WriteStderr(line, out.written());
  }
  for (int k = 0; k < depth; ++k) {
    char where[400];
    os::DescribePc(pcs[k], where, sizeof(where));
    Printer out(line, sizeof(line));
    out.Printf("    #%d %p %s\n", k, pcs[k], where);
    os::WriteStderr(line, out.written());
  }
}

void GuardedPool::Report(const char* what, uintptr_t addr, const Slot& s, bool with_free_stack) const {
  char line[512];
  Printer out(line, sizeof(line));
  out.Printf("tcmalloc: guarded allocation: %s at %p: ", what, reinterpret_cast<void*>(addr));
  if (addr >= s.block + s.usable) {
    out.Printf("%zu bytes after", static_cast<size_t>(addr - (s.block + s.usable)));
  } else if (addr < s.block) {
    out.Printf("%zu bytes before", static_cast<size_t>(s.block - addr));
  } else {
    out.Printf("%zu bytes into", static_cast<size_t>(addr - s.block));
  }
  out.Printf(" the %zu-byte block %p (%zu bytes requested)\n", s.usable, reinterpret_cast<void*>(s.block), s.size);
  os::WriteStderr(line, out.written());
  PrintStack("allocated by", s.alloc_pcs, s.alloc_depth);
  if (with_free_stack) PrintStack("freed by", s.free_pcs, s.free_depth);
  os::Abort();
}

void GuardedPool::OnFault(const void* fault) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(fault);
  const uintptr_t base = __atomic_load_n(&base_, __ATOMIC_ACQUIRE);
  if (base == 0 || addr - base >= kReservedBytes) return;
  const uintptr_t unit = (addr - base) / kSlotBytes;
  long i;
  if ((unit & 1) != 0) {
    i = static_cast<long>((unit - 1) / 2);
  } else {
    // A guard: blame the nearer neighbour that ever held a block.
    const long left = static_cast<long>(unit / 2) - 1;
    const long right = static_cast<long>(unit / 2) < static_cast<long>(kSlots) ? static_cast<long>(unit / 2) : -1;
    const bool nearer_left = (addr - base) % kSlotBytes < kSlotBytes / 2;
    auto used = [this](long k) { return k >= 0 && slots_[k].state != State::kUnused; };
    i = (nearer_left && used(left)) || !used(right) ? left : right;
  }
  if (i < 0 || slots_[i].state == State::kUnused) {
    char line[160];
    Printer out(line, sizeof(line));
    out.Printf("tcmalloc: guarded allocation: wild access at %p (no block near it)\n", fault);
    os::WriteStderr(line, out.written());
    os::Abort();
  }
  const Slot& s = slots_[i];
  if (s.state == State::kFreed) Report("use-after-free", addr, s, true);
  if (addr >= s.block + s.usable) Report("heap-buffer-overflow", addr, s, false);
  if (addr < s.block) Report("heap-buffer-underflow", addr, s, false);
  Report("invalid access", addr, s, false);
}

}  // namespace tcm
