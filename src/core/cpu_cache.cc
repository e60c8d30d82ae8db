#include "core/cpu_cache.h"

#include <new>

#include "base/log.h"
#include "core/freelist_link.h"
#include "platform/os.h"

namespace tcm {

bool CpuCache::Init(Arena* arena, CentralFreeList* central, size_t max_bytes_per_cpu, const CentralShards* shards) {
  if (os::CurrentRseqSource() == os::RseqSource::kNone) return false;
  // Without the fence no one could ever drain another CPU's cache safely.
  if (!os::RegisterRseqFence()) return false;
  const int n = os::NumPossibleCpus();
  void* slabs = os::MapAnonymous(static_cast<size_t>(n) << kSlabShift);
  if (slabs == nullptr) return false;
  void* metadata = arena->Alloc(sizeof(CpuMeta) * static_cast<size_t>(n), 64);
  if (metadata == nullptr) {
    os::Unmap(slabs, static_cast<size_t>(n) << kSlabShift);
    return false;
  }
  meta_ = static_cast<CpuMeta*>(metadata);
  for (int i = 0; i < n; ++i) new (&meta_[i]) CpuMeta();
  size_t next = kHeaderSlots;
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    begin_[cl] = static_cast<uint16_t>(next);
    next += max_capacity(cl);
  }
  central_ = central;
  shards_ = shards;
  max_bytes_.store(max_bytes_per_cpu, std::memory_order_relaxed);
  fence_ok_ = true;
  num_cpus_ = static_cast<uint32_t>(n);
  slabs_ = static_cast<char*>(slabs);
  return true;
}

// The batch sequences' copy of k >= 1 pointers from FROM[0, k) to TO[0, k): two a step
// through an SSE2 register (every x86-64 CPU has it), then the odd one. One pointer a step
// took 5 instructions a pointer, this 3. Operands: i, k, tmp, v.
using PointerPair = long long __attribute__((vector_size(16)));
#define TCM_COPY_POINTERS(FROM, TO)                            \
  "xorl %k[i], %k[i]\n\t"                                       \
  "cmpl $2, %k[k]\n\t"                                          \
  "jb .Lodd%=\n"                                                \
  ".Lpairs%=:\n\t"                                             \
  "movdqu (%[" FROM "],%[i],8), %[v]\n\t"                       \
  "movdqu %[v], (%[" TO "],%[i],8)\n\t"                         \
  "addl $2, %k[i]\n\t"                                          \
  "leal 1(%k[i]), %k[tmp]\n\t"                                  \
  "cmpl %k[k], %k[tmp]\n\t"                                     \
  "jb .Lpairs%=\n"                                              \
  ".Lodd%=:\n\t"                                               \
  "cmpl %k[k], %k[i]\n\t"                                       \
  "jae .Lcopied%=\n\t"                                          \
  "movq (%[" FROM "],%[i],8), %[tmp]\n\t"                       \
  "movq %[tmp], (%[" TO "],%[i],8)\n"                            \
  ".Lcopied%=:\n\t"

// Like Push, but copies items[0, k) into the slots above `current` in a loop, k = min(n,
// free slots), and commits current += k with the one store.
int CpuCache::PushBatch(size_t cl, void* const* items, int n) {
  for (int j = 0; j < n; ++j) TCM_TSAN_RELEASE(items[j]);
  uintptr_t slab, cur, k, i, tmp, dst;
  PointerPair v;
  asm volatile goto(TCM_RSEQ_PROLOGUE
                    "movl (%[slab],%[cl],8), %k[cur]\n\t"
                    "movzwl 4(%[slab],%[cl],8), %k[k]\n\t"
                    "subl %k[cur], %k[k]\n\t"  // room = end - current (negative when locked)
                    "jle %l[miss]\n\t"
                    "cmpl %[n], %k[k]\n\t"
                    "cmovgl %[n], %k[k]\n\t"
                    "leaq (%[slab],%[cur],8), %[dst]\n\t"
                    TCM_COPY_POINTERS("items", "dst")
                    "addl %k[k], %k[cur]\n\t"
                    "movl %k[cur], (%[slab],%[cl],8)\n"  // commit
                    TCM_RSEQ_EPILOGUE
                    : [slab] "=&r"(slab), [cur] "=&r"(cur), [k] "=&r"(k), [i] "=&r"(i), [tmp] "=&r"(tmp),
                      [dst] "=&r"(dst), [v] "=&x"(v)
                    : [off] "r"(os::RseqOffsetFast()), [ncpu] "m"(num_cpus_), [slabs] "m"(slabs_), [cl] "r"(cl),
                      [items] "r"(items), [n] "r"(n)
                    : "cc", "memory"
                    : miss);
  return static_cast<int>(k);
miss:
  return 0;
}

// Like Pop, for the top k = min(n, cached) objects: copies them to out[0, k) (a buffer of
// the caller's; a restarted section simply writes it again) and commits current -= k.
int CpuCache::PopBatch(size_t cl, void** out, int n) {
  uintptr_t slab, cur, k, i, tmp, src;
  PointerPair v;
  asm volatile goto(TCM_RSEQ_PROLOGUE
                    "movl (%[slab],%[cl],8), %k[cur]\n\t"
                    "movzwl 6(%[slab],%[cl],8), %k[tmp]\n\t"
                    "movl %k[cur], %k[k]\n\t"
                    "subl %k[tmp], %k[k]\n\t"  // cached = current - begin (negative when locked)
                    "jle %l[miss]\n\t"
                    "cmpl %[n], %k[k]\n\t"
                    "cmovgl %[n], %k[k]\n\t"
                    "subl %k[k], %k[cur]\n\t"
                    "leaq (%[slab],%[cur],8), %[src]\n\t"
                    TCM_COPY_POINTERS("src", "out")
                    "movl %k[cur], (%[slab],%[cl],8)\n"  // commit
                    TCM_RSEQ_EPILOGUE
                    : [slab] "=&r"(slab), [cur] "=&r"(cur), [k] "=&r"(k), [i] "=&r"(i), [tmp] "=&r"(tmp),
                      [src] "=&r"(src), [v] "=&x"(v)
                    : [off] "r"(os::RseqOffsetFast()), [ncpu] "m"(num_cpus_), [slabs] "m"(slabs_), [cl] "r"(cl),
                      [out] "r"(out), [n] "r"(n)
                    : "cc", "memory"
                    : miss);
  for (uintptr_t j = 0; j < k; ++j) TCM_TSAN_ACQUIRE(out[j]);
  return static_cast<int>(k);
miss:
  return 0;
}

int CpuCache::CallerCpu() {
  int cpu = os::RseqCurrentCpu();
  if (cpu < 0) {
    if (!os::RegisterThreadRseq()) return -1;
    cpu = os::RseqCurrentCpu();
  }
  return cpu >= 0 && cpu < static_cast<int>(num_cpus_) ? cpu : -1;
}

void CpuCache::InitCpu(int cpu) {
  // No fast path commits on an all-zero header (it misses both ways), so plain stores do.
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    SlabHeader h{begin_[cl], begin_[cl], begin_[cl]};
    __atomic_store(Header(cpu, cl), &h, __ATOMIC_RELEASE);
  }
  meta(cpu).last_active.store(os::MonotonicCoarseNs(), std::memory_order_relaxed);
  __atomic_store_n(&meta(cpu).initialized, true, __ATOMIC_RELEASE);
}

void CpuCache::Grow(int cpu, size_t cl, uint32_t n) {
  SlabHeader* h = Header(cpu, cl);
  CpuMeta& m = meta(cpu);
  // Only slow paths holding m.lock write `end`; fast paths write only `current`.
  const uint16_t end = __atomic_load_n(&h->end, __ATOMIC_RELAXED);
  const uint16_t cap = static_cast<uint16_t>(end - begin_[cl]);
  const uint16_t max = max_capacity(cl);
  if (cap >= max) return;
  // Slow start: below one batch the capacity doubles (0, 1, 2, 4, ...), so a class a
  // program touches a few times (stdio's buffers, start-up) costs a few objects, not a
  // batch and the spans behind it; a class in steady use reaches a batch in log2(batch)
  // misses and then grows by batches.
  if (cap < n) n = cap > 0 ? cap : 1;
  size_t grow = n < static_cast<uint32_t>(max - cap) ? n : static_cast<size_t>(max - cap);
  const size_t size = SizeMap::ClassSize(cl);
  const size_t budget = max_bytes_.load(std::memory_order_relaxed);
  if (m.capacity_bytes + grow * size > budget) {
    grow = budget > m.capacity_bytes ? (budget - m.capacity_bytes) / size : 0;
    if (grow == 0) return;
  }
  __atomic_store_n(&h->end, static_cast<uint16_t>(end + grow), __ATOMIC_RELEASE);
  __atomic_store_n(&m.capacity_bytes, m.capacity_bytes + grow * size, __ATOMIC_RELAXED);  // racy readers
}

bool CpuCache::FreeOverflowsOutnumber(const CpuMeta& m, size_t cl, uint32_t factor) {
  // This interval and the one before (CpuMeta::prev_misses).
  const uint32_t alloc_misses = __atomic_load_n(&m.alloc_misses[cl], __ATOMIC_RELAXED) +
                                __atomic_load_n(&m.prev_alloc_misses[cl], __ATOMIC_RELAXED);
  const uint32_t misses =
      __atomic_load_n(&m.misses[cl], __ATOMIC_RELAXED) + __atomic_load_n(&m.prev_misses[cl], __ATOMIC_RELAXED);
  return misses - alloc_misses > factor * alloc_misses;
}

// Capacity changes take the CPU's lock; a class already at its largest capacity needs no
// change, which the (racy) look at its header tells without the lock.
void CpuCache::MaybeGrow(int cpu, size_t cl, uint32_t n, bool alloc) {
  const SlabHeader* h = Header(cpu, cl);
  const uint16_t end = __atomic_load_n(&h->end, __ATOMIC_RELAXED);
  CpuMeta& m = meta(cpu);
  // A count for maintenance (which keeps the capacity of classes that miss): a relaxed
  // load and store, so a lost increment is possible and harmless.
  __atomic_store_n(&m.misses[cl], __atomic_load_n(&m.misses[cl], __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
  if (alloc)
    __atomic_store_n(&m.alloc_misses[cl], __atomic_load_n(&m.alloc_misses[cl], __ATOMIC_RELAXED) + 1,
                     __ATOMIC_RELAXED);
  if (__atomic_load_n(&m.initialized, __ATOMIC_ACQUIRE)) {
    const uint32_t cap = end >= begin_[cl] ? static_cast<uint32_t>(end - begin_[cl]) : 0;
    if (cap >= max_capacity(cl)) return;
    // A class this CPU overflows more often than it runs out of since the last maintenance
    // pass (a consumer of objects another thread allocated) grows to one batch, enough to
    // hand them on a batch at a time, and no further: its objects would wait here for a
    // malloc on this CPU that does not come. xmalloc's consumer kept its classes at their
    // largest capacity, full (0.5 MiB on 2 CPUs; on a 64-CPU server whose requests are
    // freed by other threads than allocated them, up to the byte budget a CPU). "No malloc
    // miss at all" was not enough: the process's own start-up allocations on the
    // consumer's CPU, a few misses of each small class, let it grow for a whole interval
    // (1.28 MiB left on the consumer's CPU in 5 of 12 runs of producer_consumer_test).
    if (!alloc && cap >= n && FreeOverflowsOutnumber(m, cl, 1)) return;
    // No room in the byte budget for even one object: nothing to grow until maintenance
    // shrinks a class that sits unused. (Taking the lock to find that out was 7% of
    // t-test1 at 64 KiB, where the big classes fill the budget.) Racy, like the test above.
    if (__atomic_load_n(&m.capacity_bytes, __ATOMIC_RELAXED) + SizeMap::ClassSize(cl) >
        max_bytes_.load(std::memory_order_relaxed))
      return;
  }
  SpinLockHolder l(&m.lock);
  if (!m.initialized) InitCpu(cpu);
  m.last_active.store(os::MonotonicCoarseNs(), std::memory_order_relaxed);
  Grow(cpu, cl, n);
}

// Objects to take from the central list on a malloc miss: the caller's one plus what the
// class has room for on this CPU (racy read: a wrong guess only returns a few objects),
// at most a batch. Fetching a batch into a capacity of 1 would populate spans for nothing.
uint32_t CpuCache::FetchCount(int cpu, size_t cl, uint32_t batch) {
  SlabHeader h;
  __atomic_load(Header(cpu, cl), &h, __ATOMIC_RELAXED);
  if (h.begin == kLockedBegin || h.end < h.current) return 1;
  const uint32_t want = 1u + static_cast<uint32_t>(h.end - h.current);
  return want < batch ? want : batch;
}

void* CpuCache::AllocateMiss(size_t cl) {
  const uint32_t batch = static_cast<uint32_t>(SizeMap::NumToMove(cl));
  const int cpu = CallerCpu();
  // The class's first miss on this CPU (no capacity yet) takes the caller's object alone:
  // a class a program allocates once and keeps (start-up's tables, stdio's FILE and
  // buffer) then writes no slot, and each class's slots lie on a page of their own (a
  // trivial program touched ten such pages). The capacity still grows, so the next free
  // or miss of the class caches as before.
  const bool first = cpu >= 0 && ClassCapacity(cpu, cl) == 0;
  if (cpu >= 0) MaybeGrow(cpu, cl, batch, true);
  // Keep the first object for the caller and cache the rest on whatever CPU we run on now,
  // in one critical section; what does not fit goes back. Objects move between this cache
  // and the central list as arrays: none carries a link to another one when handed out
  // (the heap checker scans conservatively).
  void* got_items[kMaxTransferBatch];
  const int got = Central(cpu, cl).RemoveBatch(
      got_items, cpu >= 0 && !first ? static_cast<int>(FetchCount(cpu, cl, batch)) : 1);
  if (got == 0) return nullptr;
  void* const start = got_items[0];
  void** const items = got_items + 1;
  const int rest = got - 1;
  // The slab is a stack: pushed reversed, the objects are handed out in the batch's order,
  // which is the order they were freed in, newest first, or address order for a fresh span.
  // Pushed as they come, a tree built from fresh spans would get descending addresses,
  // which the program then walks against the hardware prefetcher (binary trees' own code
  // ran 2.5x slower).
  for (int i = 0, j = rest - 1; i < j; ++i, --j) {
    void* const t = items[i];
    items[i] = items[j];
    items[j] = t;
  }
  const int pushed = rest > 0 ? PushBatch(cl, items, rest) : 0;
  if (pushed < rest) Central(cpu, cl).InsertBatch(items + pushed, rest - pushed);
  return start;
}

void CpuCache::DeallocateMiss(size_t cl, void* p) {
  const uint32_t batch = static_cast<uint32_t>(SizeMap::NumToMove(cl));
  const int cpu = CallerCpu();
  void* items[kMaxTransferBatch];
  int n = 0;
  bool local = false;
  if (cpu >= 0) {
    MaybeGrow(cpu, cl, batch, false);
    if (Push(cl, p)) return;
    // This CPU allocates the class too, unless its frees overflow more than twice as often
    // as its mallocs run out (a consumer: the batch is for some other CPU). Counts since
    // the last maintenance pass, racy like MaybeGrow's.
    local = !FreeOverflowsOutnumber(meta(cpu), cl, 2);
    // Still full (budget exhausted): p and a batch of cached objects go to the central list
    // together, so the next frees find room.
    n = PopBatch(cl, items + 1, static_cast<int>(batch) - 1);
  }
  // Newest first (p, then the slab from its top down), as a thread cache's list would run:
  // AllocateMiss hands a batch out in its order.
  items[0] = p;
  for (int i = 1, j = n; i < j; ++i, --j) {
    void* const t = items[i];
    items[i] = items[j];
    items[j] = t;
  }
  Central(cpu, cl).InsertBatch(items, n + 1, local);
}

bool CpuCache::IsTopObject(size_t cl, const void* p) {
  const int cpu = CallerCpu();
  if (cpu < 0 || !__atomic_load_n(&meta(cpu).initialized, __ATOMIC_ACQUIRE)) return false;
  const SlabHeader* h = Header(cpu, cl);
  // A locked class (a maintenance pass halving it, a drain) hands its objects to the
  // central list before it lowers `current`: meanwhile its top may be an object another
  // thread has taken from there and is now rightly freeing (api_fork died of that once in
  // CI, "double free" under four hammering threads). Not a double free we can tell. Once
  // `begin` reads unlocked (acquire: the unlock is its last store), `current` is the new one.
  if (__atomic_load_n(&h->begin, __ATOMIC_ACQUIRE) == kLockedBegin) return false;
  const uint32_t current = __atomic_load_n(&h->current, __ATOMIC_ACQUIRE);
  if (current <= begin_[cl] || current > begin_[cl] + max_capacity(cl)) return false;
  return __atomic_load_n(&Slots(cpu)[current - 1], __ATOMIC_RELAXED) == p;
}

void CpuCache::MarkActive(uint64_t now) {
  const int cpu = os::RseqCurrentCpu();
  if (cpu >= 0 && cpu < static_cast<int>(num_cpus_))
    meta(cpu).last_active.store(now, std::memory_order_relaxed);
}

bool CpuCache::LockClasses(int cpu, const bool* mask) {
  // Fast paths store only `current`; `begin` and `end` are ours while we hold the lock.
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    if (mask != nullptr && !mask[cl]) continue;
    SlabHeader* h = Header(cpu, cl);
    __atomic_store_n(&h->begin, kLockedBegin, __ATOMIC_RELAXED);
    __atomic_store_n(&h->end, uint16_t{0}, __ATOMIC_RELAXED);
  }
  // Sections that read a header before the stores above have committed or will restart
  // and miss once this returns.
  if (os::RseqFence(cpu)) return true;
  Crash("tcmalloc: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ) failed for CPU %d", cpu);
}

void CpuCache::ReturnObjects(int cpu, size_t cl, uint32_t from, uint32_t to) {
  // Straight to the spans, not into the transfer cache: what a drain or a halving returns
  // sat unused, and parked in the transfer cache it would keep its spans (and their pages)
  // for another idle period before the scavenger could release them. The class is locked
  // on this CPU: the slots stay as they are while the spans take them.
  void** slots = Slots(cpu);
  if (from >= to) return;
  for (uint32_t i = from; i < to; ++i) TCM_TSAN_ACQUIRE(slots[i]);
  Central(cpu, cl).InsertToSpans(slots + from, static_cast<int>(to - from));
}

size_t CpuCache::DrainLocked(int cpu) {
  CpuMeta& m = meta(cpu);
  if (!m.initialized) return 0;
  LockClasses(cpu, nullptr);
  size_t bytes = 0;
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    SlabHeader* h = Header(cpu, cl);
    const uint32_t current = __atomic_load_n(&h->current, __ATOMIC_ACQUIRE);
    const uint16_t begin = begin_[cl];
    if (current > begin) {
      ReturnObjects(cpu, cl, begin, current);
      bytes += static_cast<size_t>(current - begin) * SizeMap::ClassSize(cl);
    }
    // Capacity starts over; `begin` last, as it unlocks the header.
    __atomic_store_n(&h->current, begin, __ATOMIC_RELEASE);
    __atomic_store_n(&h->end, begin, __ATOMIC_RELEASE);
    __atomic_store_n(&h->begin, begin, __ATOMIC_RELEASE);
    __atomic_store_n(&m.misses[cl], 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&m.alloc_misses[cl], 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&m.prev_misses[cl], 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&m.prev_alloc_misses[cl], 0u, __ATOMIC_RELAXED);
  }
  __atomic_store_n(&m.capacity_bytes, size_t{0}, __ATOMIC_RELAXED);
  drains_.fetch_add(1, std::memory_order_relaxed);
  return bytes;
}

size_t CpuCache::Drain(int cpu) {
  if (!active() || cpu < 0 || cpu >= static_cast<int>(num_cpus_)) return 0;
  SpinLockHolder h(&meta(cpu).lock);
  return DrainLocked(cpu);
}

size_t CpuCache::DrainAll() {
  size_t bytes = 0;
  for (int cpu = 0; cpu < static_cast<int>(num_cpus_); ++cpu) bytes += Drain(cpu);
  return bytes;
}

size_t CpuCache::DrainCurrent() {
  if (!active()) return 0;
  return Drain(CallerCpu());
}

size_t CpuCache::Maintain(uint64_t now) {
  size_t bytes = 0;
  for (int cpu = 0; cpu < static_cast<int>(num_cpus_); ++cpu) {
    CpuMeta& m = meta(cpu);
    SpinLockHolder h(&m.lock);
    if (!m.initialized) continue;
    const uint64_t last = m.last_active.load(std::memory_order_relaxed);
    if (now > last && now - last >= kCpuIdleNs) {
      if (m.capacity_bytes != 0) bytes += DrainLocked(cpu);
      continue;
    }
    // An active CPU: classes that did not miss since the previous resize give back half of
    // their unused capacity, so the budget flows to the classes that miss, and half of the
    // objects they cache: a class that went a whole interval without a miss never dipped
    // into its lower half (the design's low-water scavenging of thread caches; a class in
    // steady use pays one refill per interval). Without it, objects freed in a burst stay
    // cached as long as light traffic keeps the CPU from counting as idle.
    // Misses of free (the class was full) do not show a need for the objects, only for the
    // room: such a class keeps its capacity but gives back half its objects too. Counted
    // as a need, the last overflowing frees of a burst kept every class whole for one more
    // interval; a heap of 1 GiB with 75% freed in random order then had 0.8 MiB of objects
    // cached after a second of light traffic, one in each of ~5000 otherwise empty spans:
    // 40 MiB resident, 1.36x the bytes in use instead of 1.25x.
    if (now - m.last_resize < kCpuResizeIntervalNs && m.last_resize != 0 && now >= m.last_resize) continue;
    m.last_resize = now;
    bool mask[kMaxClasses] = {};
    bool keep_capacity[kMaxClasses] = {};
    uint16_t ends[kMaxClasses] = {};  // stable under m.lock; reads 0 once locked
    bool any = false;
    for (size_t cl = 1; cl < kNumClasses; ++cl) {
      const SlabHeader* hd = Header(cpu, cl);
      const uint32_t current = __atomic_load_n(&hd->current, __ATOMIC_RELAXED);
      const uint16_t end = __atomic_load_n(&hd->end, __ATOMIC_RELAXED);
      ends[cl] = end;
      keep_capacity[cl] = __atomic_load_n(&m.misses[cl], __ATOMIC_RELAXED) != 0;
      if (__atomic_load_n(&m.alloc_misses[cl], __ATOMIC_RELAXED) == 0 &&
          (current > begin_[cl] || (!keep_capacity[cl] && end > current + 1)))
        mask[cl] = any = true;
      __atomic_store_n(&m.prev_misses[cl], __atomic_load_n(&m.misses[cl], __ATOMIC_RELAXED), __ATOMIC_RELAXED);
      __atomic_store_n(&m.prev_alloc_misses[cl], __atomic_load_n(&m.alloc_misses[cl], __ATOMIC_RELAXED),
                       __ATOMIC_RELAXED);
      __atomic_store_n(&m.misses[cl], 0u, __ATOMIC_RELAXED);
      __atomic_store_n(&m.alloc_misses[cl], 0u, __ATOMIC_RELAXED);
    }
    if (!any) continue;
    LockClasses(cpu, mask);
    for (size_t cl = 1; cl < kNumClasses; ++cl) {
      if (!mask[cl]) continue;
      SlabHeader* hd = Header(cpu, cl);
      const uint32_t current = __atomic_load_n(&hd->current, __ATOMIC_ACQUIRE);
      const uint16_t old_end = ends[cl];
      const auto new_end = keep_capacity[cl] ? old_end
                           : static_cast<uint16_t>(old_end > current ? current + (old_end - current) / 2 : current);
      const uint16_t keep = static_cast<uint16_t>(begin_[cl] + (current - begin_[cl]) / 2);
      if (keep < current) {
        ReturnObjects(cpu, cl, keep, current);
        bytes += static_cast<size_t>(current - keep) * SizeMap::ClassSize(cl);
        __atomic_store_n(&hd->current, keep, __ATOMIC_RELEASE);
      }
      // current <= end always (a push checks it), so new_end <= old_end.
      if (old_end > new_end)
        __atomic_store_n(&m.capacity_bytes,
                         m.capacity_bytes - static_cast<size_t>(old_end - new_end) * SizeMap::ClassSize(cl),
                         __ATOMIC_RELAXED);
      __atomic_store_n(&hd->end, new_end, __ATOMIC_RELEASE);
      __atomic_store_n(&hd->begin, begin_[cl], __ATOMIC_RELEASE);
    }
  }
  return bytes;
}

size_t CpuCache::CpuBytes(int cpu) const {
  if (!active() || !meta(cpu).initialized) return 0;
  size_t bytes = 0;
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    const uint32_t current = __atomic_load_n(&Header(cpu, cl)->current, __ATOMIC_RELAXED);
    if (current > begin_[cl]) bytes += static_cast<size_t>(current - begin_[cl]) * SizeMap::ClassSize(cl);
  }
  return bytes;
}

size_t CpuCache::TotalBytes() const {
  size_t bytes = 0;
  for (int cpu = 0; cpu < static_cast<int>(num_cpus_); ++cpu) bytes += CpuBytes(cpu);
  return bytes;
}

size_t CpuCache::CpuCapacityBytes(int cpu) const {
  if (!active()) return 0;
  return __atomic_load_n(&meta(cpu).capacity_bytes, __ATOMIC_RELAXED);
}

size_t CpuCache::ClassCapacity(int cpu, size_t cl) const {
  // Racy by design (AllocateMiss asks before taking the CPU's lock): atomic loads.
  if (!active() || !__atomic_load_n(&meta(cpu).initialized, __ATOMIC_ACQUIRE)) return 0;
  const uint16_t end = __atomic_load_n(&Header(cpu, cl)->end, __ATOMIC_RELAXED);
  return end > begin_[cl] ? end - begin_[cl] : 0;
}

size_t CpuCache::ClassObjects(size_t cl) const {
  size_t n = 0;
  for (int cpu = 0; cpu < static_cast<int>(num_cpus_); ++cpu) {
    if (!meta(cpu).initialized) continue;
    const uint32_t current = __atomic_load_n(&Header(cpu, cl)->current, __ATOMIC_RELAXED);
    if (current > begin_[cl]) n += current - begin_[cl];
  }
  return n;
}

void CpuCache::LockAll() {
  for (int cpu = 0; cpu < static_cast<int>(num_cpus_); ++cpu) meta(cpu).lock.Lock();
}

void CpuCache::UnlockAll() {
  for (int cpu = static_cast<int>(num_cpus_) - 1; cpu >= 0; --cpu) meta(cpu).lock.Unlock();
}

void CpuCache::ResetLocksAfterFork() {
  for (int cpu = 0; cpu < static_cast<int>(num_cpus_); ++cpu) meta(cpu).lock.ResetAfterFork();
}

}  // namespace tcm
