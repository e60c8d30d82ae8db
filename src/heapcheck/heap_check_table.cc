#include "heapcheck/heap_check_table.h"

#include <cstring>

#include "platform/os.h"

namespace tcm::heapcheck {

namespace {
constexpr size_t kInitialSlots = size_t{1} << 14;
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

inline uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}
}  // namespace

// ---- AllocTable ----

size_t AllocTable::Home(uintptr_t key) const {
  // Blocks are at least 8-byte aligned and mostly 16: drop the low bits before mixing.
  return static_cast<size_t>(((Reveal(key) >> 3) * kGolden) >> 20) & (slots_.size() - 1);
}

bool AllocTable::Grow() {
  const size_t new_cap = slots_.empty() ? kInitialSlots : slots_.size() * 2;
  MappedArray<AllocRecord> fresh;
  if (!fresh.Resize(new_cap)) return false;
  // Re-insert every record into the fresh array.
  const size_t mask = new_cap - 1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const AllocRecord& r = slots_[i];
    if (r.key == 0) continue;
    size_t j = static_cast<size_t>(((Reveal(r.key) >> 3) * kGolden) >> 20) & mask;
    while (fresh[j].key != 0) j = (j + 1) & mask;
    fresh[j] = r;
  }
  slots_.Swap(fresh);  // the old table goes back to the OS with `fresh`
  return true;
}

bool AllocTable::Insert(uintptr_t addr, uint64_t size, uint32_t stack, uint32_t flags, uint64_t serial) {
  if ((count_ + 1) * 10 > slots_.size() * 7 && !Grow()) return false;
  const uintptr_t key = Hide(addr);
  const size_t mask = slots_.size() - 1;
  size_t i = Home(key);
  while (slots_[i].key != 0 && slots_[i].key != key) i = (i + 1) & mask;
  if (slots_[i].key == 0) ++count_;
  slots_[i] = AllocRecord{key, size, serial, stack, flags};
  return true;
}

AllocRecord* AllocTable::Find(uintptr_t addr) {
  if (count_ == 0) return nullptr;
  const uintptr_t key = Hide(addr);
  const size_t mask = slots_.size() - 1;
  for (size_t i = Home(key);; i = (i + 1) & mask) {
    if (slots_[i].key == key) return &slots_[i];
    if (slots_[i].key == 0) return nullptr;
  }
}

bool AllocTable::Remove(uintptr_t addr) {
  AllocRecord* r = Find(addr);
  if (r == nullptr) return false;
  const size_t mask = slots_.size() - 1;
  size_t hole = static_cast<size_t>(r - slots_.data());
  // Backward-shift deletion: pull later members of the probe run into the hole whenever
  // their home position is not strictly between the hole and themselves.
  for (size_t j = (hole + 1) & mask; slots_[j].key != 0; j = (j + 1) & mask) {
    const size_t home = Home(slots_[j].key);
    const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    slots_[hole] = slots_[j];
    hole = j;
  }
  slots_[hole].key = 0;
  --count_;
  return true;
}

// ---- StackTable ----

bool StackTable::GrowIndex() {
  const size_t new_cap = index_.empty() ? 4096 : index_.size() * 2;
  MappedArray<uint32_t> fresh;
  if (!fresh.Resize(new_cap)) return false;
  for (size_t i = 0; i < new_cap; ++i) fresh[i] = kNone;
  const size_t mask = new_cap - 1;
  for (uint32_t id = 0; id < entries_.size(); ++id) {
    size_t j = static_cast<size_t>(entries_[id].hash) & mask;
    while (fresh[j] != kNone) j = (j + 1) & mask;
    fresh[j] = id;
  }
  index_.Swap(fresh);
  return true;
}

uint32_t StackTable::Intern(void* const* pcs, int depth) {
  uint64_t h = static_cast<uint64_t>(depth) * kGolden;
  for (int i = 0; i < depth; ++i) h = Mix(h ^ reinterpret_cast<uintptr_t>(pcs[i]));
  if ((entries_.size() + 1) * 10 > index_.size() * 7 && !GrowIndex()) return kNone;
  const size_t mask = index_.size() - 1;
  size_t j = static_cast<size_t>(h) & mask;
  for (; index_[j] != kNone; j = (j + 1) & mask) {
    const Entry& e = entries_[index_[j]];
    if (e.hash != h || e.depth != static_cast<uint32_t>(depth)) continue;
    if (std::memcmp(e.pcs, pcs, static_cast<size_t>(depth) * sizeof(uintptr_t)) == 0) return index_[j];
  }
  uintptr_t* copy = nullptr;
  if (depth > 0) {
    copy = static_cast<uintptr_t*>(pool_.Alloc(static_cast<size_t>(depth) * sizeof(uintptr_t)));
    if (copy == nullptr) return kNone;
    std::memcpy(copy, pcs, static_cast<size_t>(depth) * sizeof(uintptr_t));
  }
  const auto id = static_cast<uint32_t>(entries_.size());
  if (!entries_.Push(Entry{h, copy, static_cast<uint32_t>(depth), 0})) return kNone;
  index_[j] = id;
  return id;
}

int StackTable::Get(uint32_t id, const uintptr_t** pcs) const {
  if (id >= entries_.size()) {
    *pcs = nullptr;
    return 0;
  }
  *pcs = entries_[id].pcs;
  return static_cast<int>(entries_[id].depth);
}

void* StackTable::Pool::Alloc(size_t bytes) {
  bytes = (bytes + 7) & ~size_t{7};
  if (bytes > left_) {
    // A request bigger than a chunk gets a mapping of its own size; the rest of the current
    // chunk is abandoned either way (stacks are at most 64 words: rare and small).
    const size_t want = bytes > kChunk ? (bytes + 4095) & ~size_t{4095} : kChunk;
    void* mem = os::MapAnonymous(want);
    if (mem == nullptr) return nullptr;
    cur_ = static_cast<char*>(mem);
    left_ = want;
  }
  void* p = cur_;
  cur_ += bytes;
  left_ -= bytes;
  return p;
}

}  // namespace tcm::heapcheck
