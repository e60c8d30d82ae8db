#include "system_alloc.h"

#include <cstdint>

#include "base/config.h"
#include "platform/os.h"

namespace tcm {

static size_t RoundUp(size_t n, size_t align) { return (n + align - 1) & ~(align - 1); }

void* SystemAllocator::Alloc(size_t bytes, size_t alignment, size_t* actual) {
  if (alignment < kPageSize) alignment = kPageSize;
  if (bytes > kMaxAllocation) return nullptr;
  bytes = RoundUp(bytes, alignment);
  void* p = nullptr;
  if (enabled_[kMmap]) {
    p = AllocMmap(bytes, alignment);
    if (p != nullptr) bytes_[kMmap] += bytes;
  }
  if (p == nullptr && enabled_[kSbrk]) {
    p = AllocSbrk(bytes, alignment);
    if (p != nullptr) bytes_[kSbrk] += bytes;
  }
  if (p != nullptr && actual != nullptr) *actual = bytes;
  return p;
}

void* SystemAllocator::AllocMmap(size_t bytes, size_t alignment) {
  // mmap only guarantees 4 KiB alignment: over-map by (alignment - 4 KiB) and trim both ends.
  size_t extra = alignment > 4096 ? alignment - 4096 : 0;
  if (bytes + extra < bytes) return nullptr;
  char* raw = static_cast<char*>(os::MapAnonymous(bytes + extra));
  if (raw == nullptr) return nullptr;
  uintptr_t start = RoundUp(reinterpret_cast<uintptr_t>(raw), alignment);
  char* aligned = reinterpret_cast<char*>(start);
  if (aligned > raw) os::Unmap(raw, static_cast<size_t>(aligned - raw));
  size_t tail = static_cast<size_t>(raw + bytes + extra - (aligned + bytes));
  if (tail > 0) os::Unmap(aligned + bytes, tail);
  return aligned;
}

void* SystemAllocator::AllocSbrk(size_t bytes, size_t alignment) {
  SpinLockHolder h(&sbrk_lock_);
  // Someone else (a foreign allocator, the program) may move the break between our calls;
  // take the current break, ask for enough to align, and give back nothing on failure.
  char* cur = static_cast<char*>(os::Sbrk(0));
  if (cur == nullptr) return nullptr;
  size_t pad = RoundUp(reinterpret_cast<uintptr_t>(cur), alignment) - reinterpret_cast<uintptr_t>(cur);
  size_t total = bytes + pad;
  if (total < bytes || total > static_cast<size_t>(INTPTR_MAX)) return nullptr;
  char* got = static_cast<char*>(os::Sbrk(static_cast<intptr_t>(total)));
  if (got == nullptr) return nullptr;
  if (got != cur) {
    // The break moved under us: our block is [got, got+total); realign inside it.
    pad = RoundUp(reinterpret_cast<uintptr_t>(got), alignment) - reinterpret_cast<uintptr_t>(got);
    if (pad + bytes > total) return nullptr;  // rare; the memory is leaked, not corrupted
  }
  return got + pad;
}

bool SystemAllocator::Release(void* p, size_t bytes) { return os::ReleasePages(p, bytes); }

}  // namespace tcm
