#include "core/arena.h"

#include <cstdint>

#include "core/fault_injection.h"
#include "platform/os.h"

namespace tcm {

void* Arena::Alloc(size_t bytes, size_t align) {
  SpinLockHolder h(&lock_);
  uintptr_t cur = reinterpret_cast<uintptr_t>(cur_);
  size_t pad = ((cur + align - 1) & ~(uintptr_t{align} - 1)) - cur;
  if (cur_ == nullptr || pad + bytes > left_) {
    // Start a new chunk; the rest of the old one is abandoned (at most one small object).
    size_t want = bytes + align > kChunk ? ((bytes + align + 4095) & ~size_t{4095}) : kChunk;
    if (InjectedFault(want)) return nullptr;
    char* chunk = static_cast<char*>(os::MapAnonymous(want));
    if (chunk == nullptr) return nullptr;
    reserved_ += want;
    cur_ = chunk;
    left_ = want;
    cur = reinterpret_cast<uintptr_t>(cur_);
    pad = ((cur + align - 1) & ~(uintptr_t{align} - 1)) - cur;
  }
  char* result = cur_ + pad;
  cur_ += pad + bytes;
  left_ -= pad + bytes;
  used_ += bytes;
  return result;  // fresh mmap memory: already zero
}

}  // namespace tcm
