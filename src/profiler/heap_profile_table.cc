// HeapProfileTable and its ProfileArena (see heap_profile_table.h for the design).
#include "profiler/heap_profile_table.h"

#include <algorithm>
#include <cstring>

#include "profiler/heap_profile_io.h"
#include "platform/os.h"

namespace tcm {

// ---- ProfileArena ----

void* ProfileArena::Alloc(size_t bytes) {
  bytes = (bytes + 15) & ~size_t{15};
  if (bytes > left_) {
    // The chunk header takes the first 16 bytes; a request bigger than a chunk gets a chunk
    // of its own size (the rest of the current chunk is simply abandoned).
    const size_t want = bytes + 16 > kChunk ? bytes + 16 : kChunk;
    void* mem = os::MapAnonymous(want);
    if (mem == nullptr) return nullptr;
    auto* c = static_cast<Chunk*>(mem);
    c->next = chunks_;
    c->bytes = want;
    chunks_ = c;
    mapped_ += want;
    cur_ = static_cast<char*>(mem) + 16;
    left_ = want - 16;
  }
  void* p = cur_;
  cur_ += bytes;
  left_ -= bytes;
  return p;  // fresh mmap memory is zero and never reused before ReleaseAll
}

void ProfileArena::ReleaseAll() {
  while (chunks_ != nullptr) {
    Chunk* next = chunks_->next;
    os::Unmap(chunks_, chunks_->bytes);
    chunks_ = next;
  }
  cur_ = nullptr;
  left_ = 0;
  mapped_ = 0;
}

// ---- hashing ----

uint64_t HeapProfileTable::HashAddress(uintptr_t addr) {
  // Objects are at least 8-byte aligned; Fibonacci hashing spreads the remaining bits.
  return (static_cast<uint64_t>(addr) >> 3) * 0x9E3779B97F4A7C15ull;
}

uint64_t HeapProfileTable::HashStack(void* const* pcs, int depth) {
  uint64_t h = 0x243F6A8885A308D3ull ^ static_cast<uint64_t>(depth);
  for (int i = 0; i < depth; ++i) {
    h += reinterpret_cast<uintptr_t>(pcs[i]);
    h *= 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
  }
  return h;
}

// The slot index of a hash: its top bits (the multiplicative hashes above put their best
// bits there).
static inline size_t SlotOf(uint64_t hash, size_t size) {
  return static_cast<size_t>(hash >> (64 - __builtin_ctzll(size)));
}

template <typename Node, typename HashOf>
bool HeapProfileTable::Grow(Slots<Node>* t, HashOf hash_of) {
  // First table: 64 Ki slots (512 KiB of address space; pages are touched only as used).
  const size_t size = t->size == 0 ? size_t{1} << 16 : t->size * 2;
  auto* slots = static_cast<Node**>(os::MapAnonymous(size * sizeof(Node*)));
  if (slots == nullptr) return false;
  for (size_t i = 0; i < t->size; ++i) {
    Node* n = t->slots[i];
    while (n != nullptr) {
      Node* next = n->next;
      Node** head = &slots[SlotOf(hash_of(n), size)];
      n->next = *head;
      *head = n;
      n = next;
    }
  }
  if (t->slots != nullptr) os::Unmap(t->slots, t->size * sizeof(Node*));
  t->slots = slots;
  t->size = size;
  return true;
}

template <typename Node>
void HeapProfileTable::ReleaseSlots(Slots<Node>* t) {
  if (t->slots != nullptr) os::Unmap(t->slots, t->size * sizeof(Node*));
  *t = Slots<Node>{};
}

// ---- recording ----

HeapProfileTable::Bucket* HeapProfileTable::FindOrAddBucket(void* const* pcs, int depth) {
  const uint64_t hash = HashStack(pcs, depth);
  if (buckets_.size != 0) {
    for (Bucket* b = buckets_.slots[SlotOf(hash, buckets_.size)]; b != nullptr; b = b->next) {
      if (b->hash == hash && b->depth == depth &&
          memcmp(b->stack(), pcs, static_cast<size_t>(depth) * sizeof(void*)) == 0)
        return b;
    }
  }
  if (buckets_.count >= buckets_.size &&
      !Grow(&buckets_, [](const Bucket* b) { return b->hash; }) && buckets_.size == 0)
    return nullptr;  // no table at all; a failed doubling just leaves longer chains
  auto* b = static_cast<Bucket*>(arena_.Alloc(sizeof(Bucket) + static_cast<size_t>(depth) * sizeof(void*)));
  if (b == nullptr) return nullptr;
  b->hash = hash;
  b->depth = depth;
  memcpy(b->stack(), pcs, static_cast<size_t>(depth) * sizeof(void*));
  Bucket** head = &buckets_.slots[SlotOf(hash, buckets_.size)];
  b->next = *head;
  *head = b;
  ++buckets_.count;
  return b;
}

void HeapProfileTable::CountFree(LiveObject* o) {
  const auto bytes = static_cast<int64_t>(o->bytes);
  o->bucket->counts.free_count += 1;
  o->bucket->counts.free_bytes += bytes;
  totals_.free_count += 1;
  totals_.free_bytes += bytes;
}

bool HeapProfileTable::RecordAlloc(const void* p, size_t bytes, void* const* pcs, int depth) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  if (live_.count >= live_.size &&
      !Grow(&live_, [](const LiveObject* o) { return HashAddress(o->addr); }) && live_.size == 0)
    return false;
  Bucket* bucket = FindOrAddBucket(pcs, depth);
  if (bucket == nullptr) return false;
  LiveObject** head = &live_.slots[SlotOf(HashAddress(addr), live_.size)];
  LiveObject* o = *head;
  while (o != nullptr && o->addr != addr) o = o->next;
  if (o != nullptr) {
    // The free of the previous object at this address went unseen: retire it now, so the
    // in-use figures cannot grow without bound from one lost free.
    CountFree(o);
  } else {
    if (free_objects_ != nullptr) {
      o = free_objects_;
      free_objects_ = o->next;
    } else {
      o = static_cast<LiveObject*>(arena_.Alloc(sizeof(LiveObject)));
      if (o == nullptr) return false;
    }
    o->addr = addr;
    o->next = *head;
    *head = o;
    ++live_.count;
  }
  o->bucket = bucket;
  o->bytes = bytes;
  const auto b = static_cast<int64_t>(bytes);
  bucket->counts.alloc_count += 1;
  bucket->counts.alloc_bytes += b;
  totals_.alloc_count += 1;
  totals_.alloc_bytes += b;
  return true;
}

bool HeapProfileTable::RecordFree(const void* p) {
  if (live_.count == 0) return false;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  for (LiveObject** link = &live_.slots[SlotOf(HashAddress(addr), live_.size)]; *link != nullptr;
       link = &(*link)->next) {
    LiveObject* o = *link;
    if (o->addr != addr) continue;
    *link = o->next;
    --live_.count;
    CountFree(o);
    o->next = free_objects_;
    free_objects_ = o;
    return true;
  }
  return false;
}

bool HeapProfileTable::FindLive(const void* p, size_t* bytes, const Bucket** bucket) const {
  if (live_.count == 0) return false;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  for (const LiveObject* o = live_.slots[SlotOf(HashAddress(addr), live_.size)]; o != nullptr; o = o->next) {
    if (o->addr != addr) continue;
    if (bytes != nullptr) *bytes = o->bytes;
    if (bucket != nullptr) *bucket = o->bucket;
    return true;
  }
  return false;
}

size_t HeapProfileTable::bytes_mapped() const {
  return arena_.bytes_mapped() + (live_.size + buckets_.size) * sizeof(void*);
}

void HeapProfileTable::Reset() {
  ReleaseSlots(&live_);
  ReleaseSlots(&buckets_);
  arena_.ReleaseAll();
  free_objects_ = nullptr;
  totals_ = HeapCounts{};
}

// ---- output ----

static void WriteCounts(ProfileWriter* out, const HeapCounts& c) {
  out->Printf("%6lld: %8lld [%6lld: %8lld] @", static_cast<long long>(c.inuse_count()),
              static_cast<long long>(c.inuse_bytes()), static_cast<long long>(c.alloc_count),
              static_cast<long long>(c.alloc_bytes));
}

void HeapProfileTable::Write(ProfileWriter* out, const char* label) const {
  out->Printf("heap profile: ");
  WriteCounts(out, totals_);
  out->Printf(" %s\n", label);
  if (buckets_.count == 0) return;
  // Biggest holders first, as gperftools writes them (and as a human reads the file).
  const size_t bytes = buckets_.count * sizeof(void*);  // one pointer per bucket
  auto* order = static_cast<const Bucket**>(os::MapAnonymous(bytes));
  size_t n = 0;
  if (order != nullptr) {
    for (size_t i = 0; i < buckets_.size; ++i)
      for (const Bucket* b = buckets_.slots[i]; b != nullptr; b = b->next) order[n++] = b;
    std::sort(order, order + n, [](const Bucket* a, const Bucket* b) {
      if (a->counts.inuse_bytes() != b->counts.inuse_bytes())
        return a->counts.inuse_bytes() > b->counts.inuse_bytes();
      return a->counts.alloc_bytes > b->counts.alloc_bytes;
    });
  }
  auto write_bucket = [out](const Bucket* b) {
    WriteCounts(out, b->counts);
    for (int i = 0; i < b->depth; ++i) out->Printf(" 0x%lx", static_cast<unsigned long>(reinterpret_cast<uintptr_t>(b->stack()[i])));
    out->Append("\n", 1);
  };
  if (order != nullptr) {
    for (size_t i = 0; i < n; ++i) write_bucket(order[i]);
    os::Unmap(order, bytes);
  } else {
    // No memory to sort in: the same lines, in table order.
    for (size_t i = 0; i < buckets_.size; ++i)
      for (const Bucket* b = buckets_.slots[i]; b != nullptr; b = b->next) write_bucket(b);
  }
}

}  // namespace tcm
