#include "core/thread_cache.h"

#include <new>

#include "core/freelist_link.h"
#include "platform/os.h"
#include "platform/rseq.h"

namespace tcm {


void ThreadCache::Init(CentralFreeList* central, ThreadCacheRegistry* registry, size_t max_size,
                       const CentralShards* shards) {
  central_ = central;
  shards_ = shards;
  registry_ = registry;
  for (size_t cl = 0; cl < kNumClasses; ++cl) {
    heads_[cl] = nullptr;
    overages_[cl] = 0;
    max_lengths_[cl] = cl == 0 ? 0 : 1;
    spaces_[cl] = static_cast<int32_t>(max_lengths_[cl]);  // empty
    list(cl).set_lowater(0);
    refills_[cl] = overflows_[cl] = 0;
    object_sizes_[cl] = cl == 0 ? 0 : static_cast<uint32_t>(SizeMap::ClassSize(cl));
  }
  max_size_ = max_size;
  SetRoom(0);
}

CentralFreeList& ThreadCache::Central(size_t cl) const {
  return CentralOf(central_, shards_, shards_ != nullptr && shards_->count > 1 ? os::RseqCurrentCpu() : 0, cl);
}

void* ThreadCache::FetchFromCentral(size_t cl) {
  FreeList l = list(cl);
  const uint32_t batch = static_cast<uint32_t>(SizeMap::NumToMove(cl));
  uint32_t want = l.max_length() < batch ? l.max_length() : batch;
  if (want == 0) want = 1;
  void* start;
  void* end;
  CentralFreeList& central = Central(cl);
  int got = central.RemoveRange(&start, &end, static_cast<int>(want));
  if (got == 0) return nullptr;
  l.set_lowater(0);  // the list ran empty (malloc's pop does not keep the mark: LowWater)
  if (refills_[cl] < kTransferWindow) ++refills_[cl];
  // Slow start: grow by one up to a batch, then by whole batches.
  if (l.max_length() < batch) {
    l.set_max_length(l.max_length() + 1);
  } else {
    uint32_t grown = l.max_length() + batch;
    l.set_max_length(grown > kMaxListLength ? kMaxListLength : grown);
  }
  void* result = start;
  if (got > 1) {
    // The list is empty here (that is why we were called).
    SetLink(end, l.head);
    l.head = GetLink(start);
    l.set_length(l.length() + static_cast<uint32_t>(got - 1));
    room_ -= static_cast<intptr_t>((got - 1) * SizeMap::ClassSize(cl));
  }
  return result;
}

void ThreadCache::ReleaseToCentral(FreeList l, size_t cl, uint32_t n, bool to_spans, bool local) {
  const uint32_t length = l.length();
  if (n > length) n = length;
  if (n == 0) return;
  // The central list cuts the list (it walks the batch anyway, to check it).
  CentralFreeList& central = Central(cl);
  l.head = central.InsertList(l.head, static_cast<int>(n), to_spans, local);
  l.set_length(length - n);
  if (l.recorded_lowater() > length - n) l.set_lowater(length - n);
  room_ += static_cast<intptr_t>(n * SizeMap::ClassSize(cl));
}

void ThreadCache::PushSlow(void* p, size_t cl) {
  ApplyThefts();
  FreeList l = list(cl);
  if (l.length() < l.recorded_lowater()) l.set_lowater(l.length());  // as free's fast path does before a push
  SetLink(p, l.head);
  l.head = p;
  l.set_length(l.length() + 1);
  room_ -= static_cast<intptr_t>(SizeMap::ClassSize(cl));
  if (l.length() > l.max_length()) {
    const uint32_t batch = static_cast<uint32_t>(SizeMap::NumToMove(cl));
    if (++overflows_[cl] >= kTransferWindow) {
      overflows_[cl] /= 2;
      refills_[cl] /= 2;
    }
    ReleaseToCentral(l, cl, l.max_length() < batch ? l.max_length() : batch, false, AllocatesToo(cl));
    if (l.max_length() < batch) {
      l.set_max_length(l.max_length() + 1);  // slow start, as on the allocation side
    } else if (l.max_length() > batch) {
      // Consistently overflowing: this thread frees more than it allocates here.
      if (++l.overages > kMaxOverages) {
        l.set_max_length(l.max_length() - batch);
        l.overages = 0;
      }
    }
  }
  if (room_ < 0) CheckSize(SizeMap::ClassSize(cl));
}


size_t ThreadCache::size() const {
  size_t bytes = 0;
  for (size_t cl = 1; cl < kNumClasses; ++cl) bytes += static_cast<size_t>(RacyLength(cl)) * object_sizes_[cl];
  return bytes;
}

size_t ThreadCache::OwnSize() const {
  // Plain loads (only the owner writes the lengths): g++ turns the loop into vector
  // multiplies. CheckSize runs every kRoomBlocks frees of blocks as big as the budget's
  // room, and with the atomic loads of size() it was 42 of a 64 KiB malloc+free pair's
  // ~150 instructions (callgrind, per-thread fastpath pair 65536).
  uint64_t bytes = 0;
  for (size_t cl = 0; cl < kNumClasses; ++cl) bytes += uint64_t{Length(cl)} * object_sizes_[cl];
  return bytes;
}

void ThreadCache::CheckSize(size_t freed_size) {
  ++size_checks_;
  ApplyThefts();
  const size_t held = OwnSize();
  if (held > max_size_) {
    Scavenge();
    return;
  }
  if (freed_size >= static_cast<size_t>(kMinRoom)) {
    const size_t wanted = held + kRoomBlocks * freed_size;
    while (max_size_ < wanted && registry_->GrowBudget(this, /*may_steal=*/false)) {
    }
  }
  SetRoom(held);
}

void ThreadCache::Shed(size_t bytes) {
  for (size_t cl = kNumClasses - 1; cl >= 1 && bytes > 0; --cl) {
    FreeList l = list(cl);
    const size_t held = static_cast<size_t>(l.length()) * SizeMap::ClassSize(cl);
    if (held == 0) continue;
    ReleaseToCentral(l, cl, l.length(), false, AllocatesToo(cl));
    bytes = held < bytes ? bytes - held : 0;
  }
}

void ThreadCache::Scavenge() {
  ApplyThefts();
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    FreeList l = list(cl);
    const uint32_t lowater = LowWater(cl);
    if (lowater > 0) {
      // L objects were never needed since the last collection; give back half of them.
      ReleaseToCentral(l, cl, lowater > 1 ? lowater / 2 : 1, false, AllocatesToo(cl));
      const uint32_t batch = static_cast<uint32_t>(SizeMap::NumToMove(cl));
      if (l.max_length() > batch) {
        uint32_t shrunk = l.max_length() - batch;
        l.set_max_length(shrunk > batch ? shrunk : batch);
      }
    }
    l.set_lowater(l.length());
  }
  last_active_ns_.store(os::MonotonicCoarseNs(), std::memory_order_relaxed);
  registry_->GrowBudget(this);
  ApplyThefts();
  size_t held = OwnSize();
  if (held > max_size_ + kOverBudgetSlack) {
    Shed(held - max_size_);
    held = OwnSize();
  }
  SetRoom(held);
}

void ThreadCache::ReleaseAll() {
  for (size_t cl = 1; cl < kNumClasses; ++cl) {
    ReleaseToCentral(list(cl), cl, Length(cl), /*to_spans=*/true);
    list(cl).set_lowater(0);
  }
}

// ---- registry ----

ThreadCache* ThreadCacheRegistry::Create(Arena* arena, CentralFreeList* central, const CentralShards* shards) {
  SpinLockHolder h(&lock_);
  ThreadCache* tc = alloc_.New(arena);
  if (tc == nullptr) return nullptr;
  new (tc) ThreadCache();
  // Start small so idle threads hold little, and only from the unclaimed budget: the total
  // is a promise for every thread, including the thousandth.
  size_t start = kStartCacheSize;
  if (unclaimed_ < static_cast<intptr_t>(start)) start = unclaimed_ > 0 ? static_cast<size_t>(unclaimed_) : 0;
  unclaimed_ -= static_cast<intptr_t>(start);
  tc->Init(central, this, start, shards);
  tc->last_active_ns_.store(os::MonotonicCoarseNs(), std::memory_order_relaxed);
  tc->next_ = head_;
  if (head_ != nullptr) head_->prev_ = tc;
  head_ = tc;
  ++count_;
  return tc;
}

void ThreadCacheRegistry::Destroy(ThreadCache* tc) {
  tc->ReleaseAll();
  SpinLockHolder h(&lock_);
  if (tc->prev_ != nullptr) tc->prev_->next_ = tc->next_; else head_ = tc->next_;
  if (tc->next_ != nullptr) tc->next_->prev_ = tc->prev_;
  if (next_victim_ == tc) next_victim_ = tc->next_;
  unclaimed_ += static_cast<intptr_t>(tc->max_size());
  --count_;
  alloc_.Delete(tc);
}

bool ThreadCacheRegistry::GrowBudget(ThreadCache* tc, bool may_steal) {
  SpinLockHolder h(&lock_);
  if (tc->max_size_ + kStealAmount > kMaxThreadCacheSize) return false;
  if (unclaimed_ >= static_cast<intptr_t>(kStealAmount)) {
    unclaimed_ -= static_cast<intptr_t>(kStealAmount);
    tc->SetMaxSize(tc->max_size_ + kStealAmount);
    return true;
  }
  if (!may_steal) return false;
  // Steal from the next cache round-robin; skip ourselves, caches already at the floor, and
  // idle ones (they would keep their objects: only a running owner applies a theft).
  const uint64_t now = os::MonotonicCoarseNs();
  for (size_t tries = 0; tries < count_; ++tries) {
    if (next_victim_ == nullptr) next_victim_ = head_;
    ThreadCache* victim = next_victim_;
    next_victim_ = victim->next_;
    if (victim == tc || victim->max_size() < min_per_thread_ + kStealAmount) continue;
    const uint64_t last = victim->last_active_ns_.load(std::memory_order_relaxed);
    if (now > last && now - last > kIdleThreadNs) continue;
    // The victim applies its smaller budget at its next collection.
    victim->stolen_.fetch_add(kStealAmount, std::memory_order_relaxed);
    tc->SetMaxSize(tc->max_size_ + kStealAmount);
    return true;
  }
  return false;
}

void ThreadCacheRegistry::SetMaxTotal(size_t bytes) {
  SpinLockHolder h(&lock_);
  unclaimed_ += static_cast<intptr_t>(bytes) - static_cast<intptr_t>(max_total_);
  max_total_ = bytes;
}

size_t ThreadCacheRegistry::TotalCachedBytes() {
  SpinLockHolder h(&lock_);
  size_t total = 0;
  for (ThreadCache* tc = head_; tc != nullptr; tc = tc->next_) {
    total += tc->size();
  }
  return total;
}

void ThreadCacheRegistry::AddListLengths(size_t* counts) {
  SpinLockHolder h(&lock_);
  for (ThreadCache* tc = head_; tc != nullptr; tc = tc->next_)
    for (size_t cl = 1; cl < kNumClasses; ++cl)
      counts[cl] += tc->RacyLength(cl);
}

size_t ThreadCacheRegistry::TotalMaxSize() {
  SpinLockHolder h(&lock_);
  size_t total = 0;
  for (ThreadCache* tc = head_; tc != nullptr; tc = tc->next_) total += tc->max_size();
  return total;
}

}  // namespace tcm
