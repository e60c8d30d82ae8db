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
    const size_t need = bytes + align + sizeof(ChunkHeader);
    size_t want = need > kChunk ? ((need + 4095) & ~size_t{4095}) : kChunk;
    if (InjectedFault(want)) return nullptr;
    char* chunk = static_cast<char*>(os::MapAnonymous(want));
    if (chunk == nullptr) return nullptr;
    reserved_ += want;
    auto* header = reinterpret_cast<ChunkHeader*>(chunk);
    header->next = chunks_;
    header->bytes = want;
    __atomic_store_n(&chunks_, header, __ATOMIC_RELEASE);
    cur_ = chunk + sizeof(ChunkHeader);
    left_ = want - sizeof(ChunkHeader);
    cur = reinterpret_cast<uintptr_t>(cur_);
    pad = ((cur + align - 1) & ~(uintptr_t{align} - 1)) - cur;
  }
  char* result = cur_ + pad;
  cur_ += pad + bytes;
  left_ -= pad + bytes;
  used_ += bytes;
  return result;  // fresh mmap memory: already zero
}

void Arena::ForEachChunk(void (*fn)(uintptr_t lo, uintptr_t hi, void* ctx), void* ctx) const {
  for (const ChunkHeader* c = __atomic_load_n(&chunks_, __ATOMIC_ACQUIRE); c != nullptr; c = c->next) {
    const uintptr_t lo = reinterpret_cast<uintptr_t>(c);
    fn(lo, lo + c->bytes, ctx);
  }
}

}  // namespace tcm
