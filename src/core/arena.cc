#include "core/arena.h"

#include <cstdint>

#include "core/fault_injection.h"
#include "platform/os.h"

namespace tcm {

void* Arena::Alloc(size_t bytes, size_t align) {
  SpinLockHolder h(&lock_);
  // align <= 4096: a mapping of its own is page-aligned.
  void* result = bytes >= kOwnMapping ? MapLocked(bytes) : CarveLocked(bytes, align);
  if (result != nullptr) used_ += bytes;
  return result;  // fresh mmap memory: already zero
}

void Arena::Publish(ChunkRecord* record, uintptr_t start, size_t bytes) {
  record->next = chunks_;
  record->start = start;
  record->bytes = bytes;
  reserved_ += bytes;
  __atomic_store_n(&chunks_, record, __ATOMIC_RELEASE);
}

void* Arena::CarveLocked(size_t bytes, size_t align) {
  uintptr_t cur = reinterpret_cast<uintptr_t>(cur_);
  size_t pad = ((cur + align - 1) & ~(uintptr_t{align} - 1)) - cur;
  if (cur_ == nullptr || pad + bytes > left_) {
    // Start a new chunk; the rest of the old one is abandoned (at most one small object).
    const size_t need = bytes + align + sizeof(ChunkRecord);
    const size_t want = need > kChunk ? ((need + 4095) & ~size_t{4095}) : kChunk;
    if (InjectedFault(want)) return nullptr;
    char* chunk = static_cast<char*>(os::MapAnonymous(want));
    if (chunk == nullptr) return nullptr;
    Publish(reinterpret_cast<ChunkRecord*>(chunk), reinterpret_cast<uintptr_t>(chunk), want);
    cur_ = chunk + sizeof(ChunkRecord);
    left_ = want - sizeof(ChunkRecord);
    cur = reinterpret_cast<uintptr_t>(cur_);
    pad = ((cur + align - 1) & ~(uintptr_t{align} - 1)) - cur;
  }
  char* result = cur_ + pad;
  cur_ += pad + bytes;
  left_ -= pad + bytes;
  return result;
}

void* Arena::MapLocked(size_t bytes) {
  const size_t want = (bytes + 4095) & ~size_t{4095};
  // The record first: without a place for it the mapping could not be listed.
  auto* record = static_cast<ChunkRecord*>(CarveLocked(sizeof(ChunkRecord), alignof(ChunkRecord)));
  if (record == nullptr || InjectedFault(want)) return nullptr;  // (a record of 24 bytes stays carved)
  char* mapping = static_cast<char*>(os::MapAnonymous(want));
  if (mapping == nullptr) return nullptr;
  Publish(record, reinterpret_cast<uintptr_t>(mapping), want);
  return mapping;
}

void Arena::ForEachChunk(void (*fn)(uintptr_t lo, uintptr_t hi, void* ctx), void* ctx) const {
  for (const ChunkRecord* c = __atomic_load_n(&chunks_, __ATOMIC_ACQUIRE); c != nullptr; c = c->next)
    fn(c->start, c->start + c->bytes, ctx);
}

}  // namespace tcm
