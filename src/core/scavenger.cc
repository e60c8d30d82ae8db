#include "core/scavenger.h"

#include <pthread.h>

#include "platform/os.h"

namespace tcm {

uint64_t Scavenger::NowNs() { return os::MonotonicCoarseNs(); }

void Scavenger::Init(PageHeap* heap, CentralFreeList* central, size_t num_classes,
                     FrontEndShrinker shrink_idle_front_end, int shards) {
  // Under lock_: a pass (which reads these after taking lock_) sees all or nothing.
  SpinLockHolder h(&lock_);
  heap_ = heap;
  central_ = central;
  num_classes_ = num_classes;
  shards_ = shards;
  shrink_idle_front_end_ = shrink_idle_front_end;
}

void Scavenger::set_release_rate(double rate) {
  if (!(rate >= 0)) rate = 0;  // also NaN
  rate_.store(rate, std::memory_order_relaxed);
  PageHeap* heap;
  {
    SpinLockHolder h(&lock_);
    heap = heap_;
  }
  if (heap == nullptr) return;
  // Rate 0 means "never release": the surplus rule obeys it too.
  SpinLockHolder h(heap->lock());
  heap->set_surplus_release(rate > 0);
}

uint64_t Scavenger::idle_time() const {
  double rate = release_rate();
  if (rate <= 0) return 0;
  double t = static_cast<double>(kBaseIdleTime) / rate;
  return t < 1.0 ? 1 : static_cast<uint64_t>(t);
}

uint64_t Scavenger::MaybeMaintain(uint64_t now) {
  if (now == 0) now = NowNs();
  if (now - last_run_.load(std::memory_order_relaxed) < kTickInterval) return now;
  Maintain(now, true);
  if (background_wanted_.load(std::memory_order_relaxed) &&
      !background_running_.load(std::memory_order_relaxed))
    StartBackgroundThread();
  return now;
}

size_t Scavenger::RunNow() {
  const size_t released = Maintain(NowNs());
  if (background_wanted_.load(std::memory_order_relaxed) &&
      !background_running_.load(std::memory_order_relaxed))
    StartBackgroundThread();
  return released;
}

size_t Scavenger::Maintain(uint64_t now, bool on_program_thread) {
  if (!lock_.TryLock()) return 0;  // someone else is doing it
  if (heap_ == nullptr) {
    lock_.Unlock();
    return 0;
  }
  last_run_.store(now, std::memory_order_relaxed);
  passes_.fetch_add(1, std::memory_order_relaxed);
  // What the page heap holds free before the front end gives back what sat idle: the runs
  // that giving-back frees are idle memory too (below).
  size_t free_before;
  PageHeap::PassStart pass_start;
  {
    SpinLockHolder h(heap_->lock());
    heap_->set_clock(now);  // the pass's time, for the runs it frees and pass_start (unit tests' clock)
    free_before = heap_->stats().free_bytes;
    pass_start = heap_->pass_start(kRecentRunAge);
  }
  // Front end first: what it drains lands in the transfer caches and spans below.
  size_t from_front = shrink_idle_front_end_ != nullptr ? shrink_idle_front_end_(now) : 0;
  // Then the central lists: idle transfer caches to their spans, and the empty spans a
  // list kept beyond what its allocations took back in the interval (they count as given
  // back by the front end: idle for a whole interval).
  ForEachReadyCentral(central_, shards_, num_classes_, [&from_front](CentralFreeList& c, size_t) {
    c.FlushIdleTransferCache();
    from_front += c.ReleaseKeptSpansBeyondDemand();
  });
  const uint64_t idle = idle_time();
  size_t released = 0;
  PageHeap::HugeRange collapse[kMaxCollapsePerPass];
  size_t ncollapse = 0;
  {
    SpinLockHolder h(heap_->lock());
    // Objects given back free whole spans whose other objects were already free in the
    // central lists: the runs that became free meanwhile can be far more than the objects'
    // bytes (a 1 GiB heap 75% freed kept 56 MiB of them past its idle second in about one
    // run of three, released an idle period later).
    const size_t free_now = heap_->stats().free_bytes;
    if (from_front > 0 && free_now > free_before + from_front) from_front = free_now - free_before;
    if (idle != 0 && now > idle) released = heap_->ReleaseIdle(now - idle).bytes();
    // What the front end gave back sat unused in an idle CPU's cache or in a class that
    // did not miss: idle already, though the spans it emptied are stamped free just now.
    // As much goes to the OS in this pass (else it waited another idle period: a program
    // gone light kept ~13 MiB of it for over a second).
    // Whole huge pages only: breaking one for a few spans' worth, while a 256 MiB heap was
    // being built, split 16 MiB of huge pages (coverage 87-91% in about one run of five).
    // Breaking is ReleaseIdle's, when free memory is large and idle.
    // Not runs freed within kRecentRunAge before the pass: the largest run was, as often
    // as not, a block the program frees and reallocates between two calls (a 4 MiB block
    // in a loop, released every few hundred iterations and faulted back in: 1 fault a 4
    // KiB page per iteration on average; with only the coarse clock's last tick as the
    // bound, still once in about fifteen runs of the churn test on a loaded machine).
    if (idle != 0 && from_front > released)
      released +=
          heap_->ReleaseAtLeastNPages(Length::FromBytesRoundUp(from_front - released), false, &pass_start).bytes();
    // Span records whose pages went all free with the runs merged above (a big heap
    // emptied leaves one record a page it used: 2.8 MiB for 188 MiB of small objects).
    heap_->ReleaseSpanRecords();
    ncollapse = heap_->TakeCollapseCandidates(collapse, kMaxCollapsePerPass, on_program_thread);
  }
  // Outside the heap lock: a collapse copies what is resident into a new huge page.
  if (ncollapse > 0) heap_->Collapse(collapse, ncollapse);
  released_.fetch_add(released, std::memory_order_relaxed);
  lock_.Unlock();
  return released;
}

void* Scavenger::BackgroundLoop(void* arg) {
  auto* self = static_cast<Scavenger*>(arg);
  for (;;) {
    while (self->background_wanted_.load(std::memory_order_relaxed)) {
      os::SleepNs(kTickInterval);
      self->Maintain(NowNs());
    }
    self->background_running_.store(false, std::memory_order_seq_cst);
    // Asked for again between our last look and the store above: whoever asked saw the
    // thread still running and started none, so this one carries on.
    bool expected = false;
    if (!self->background_wanted_.load(std::memory_order_seq_cst) ||
        !self->background_running_.compare_exchange_strong(expected, true))
      return nullptr;
  }
}

void Scavenger::StopBackgroundThread() { background_wanted_.store(false, std::memory_order_seq_cst); }

void Scavenger::StartBackgroundThread() {
  background_wanted_.store(true, std::memory_order_seq_cst);
  bool expected = false;
  if (!background_running_.compare_exchange_strong(expected, true)) return;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t tid;
  // pthread_create may allocate; we hold no allocator lock here.
  if (pthread_create(&tid, &attr, BackgroundLoop, this) != 0)
    background_running_.store(false, std::memory_order_relaxed);
  pthread_attr_destroy(&attr);
}

}  // namespace tcm
