// Scavenger: the allocator's one maintenance mechanism. Gives idle memory back without being
// asked, and gives the front end (thread caches, per-CPU caches) its turn to shrink.
//
// A maintenance pass (Maintain) does, in order:
//   1. shrink_idle_front_end(now): the front end drains what sat idle (set by the
//      composition root; the per-CPU caches plug in here);
//   2. objects parked in a transfer cache that went unused for a whole pass go back to
//      their spans (and empty spans to the page heap);
//   3. free page-heap runs that stayed unused for idle_time() = kBaseIdleTime / release_rate
//      are released to the OS with madvise(MADV_DONTNEED). A hugepage-aware heap releases
//      the whole huge pages in them, and the runs inside partly used huge pages only while
//      its free memory is above a floor (PageHeap::SubreleaseFloor), sparsest first;
//   4. hugepage-aware heap: the units it advised late are collapsed (MADV_COLLAPSE), up to
//      kMaxCollapsePerPass ranges, without the heap lock; a pass inside one of the
//      program's calls collapses only what the heap's growth paid for.
// Memory in active use is never released, so a program that frees and reallocates the same
// blocks keeps reusing backed pages: no page-fault storm. (Release at the moment a lot
// becomes free is the page heap's surplus rule, see PageHeap::set_surplus_release.)
//
// Who runs the pass, at most once per kTickInterval:
//   - Tick(): the fast path's housekeeping countdown expired (every kHousekeepingBytes of
//     allocation per thread, so even pure cache hits get here), or a thread exits;
//   - OnSlowPath(): allocator slow paths, reading the clock every kCallsPerClockRead calls;
//   - the opt-in background thread, every kTickInterval, for programs that go quiet;
//   - RunNow(): a program's own maintenance thread (MallocExtension_ProcessBackgroundActions).
// Release rate 0 disables releasing (passes still shrink caches).
//
// Locking: Maintain() takes a try-lock of its own (a pass already running is never waited
// for), then the front end's locks, each transfer cache's and the page heap lock in turn
// (never two at once). REQUIRES: the caller holds no allocator lock.
#ifndef TCMALLOC_SCAVENGER_H_
#define TCMALLOC_SCAVENGER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/config.h"
#include "base/spinlock.h"
#include "core/central_freelist.h"
#include "core/page_heap.h"

namespace tcm {

namespace scavenger_internal {
inline __thread uint32_t tls_slow_path_calls TCM_INITIAL_EXEC TCM_HIDDEN = 0;
}  // namespace scavenger_internal

class Scavenger {
 public:
  static constexpr uint64_t kTickInterval = 100'000'000;   // ns
  static constexpr uint64_t kBaseIdleTime = 500'000'000;   // ns, at release rate 1.0
  // A pass that gives the OS as much as the front end gave back leaves runs freed this
  // recently alone (PageHeap::PassStart): a block the program frees and reallocates.
  static constexpr uint64_t kRecentRunAge = kTickInterval;
  static constexpr uint32_t kCallsPerClockRead = 64;
  // Ranges of huge pages collapsed per pass (the hugepage-aware heap's early units).
  static constexpr size_t kMaxCollapsePerPass = 64;
  // Bytes a thread allocates (fast path included) between two housekeeping ticks. Small
  // enough that light traffic (a thousand 300-byte objects a second) ticks a few times per
  // second; large enough that the tick (a coarse clock read) costs < 0.1 instruction per
  // malloc even for 16-byte objects.
  static constexpr int64_t kHousekeepingBytes = 64 * 1024;

  // Returns bytes the front end gave back; called once per pass with the pass's time.
  using FrontEndShrinker = size_t (*)(uint64_t now_ns);

  constexpr Scavenger() = default;

  // Hands the scavenger its neighbours: the page heap and the central lists, `shards`
  // groups of num_classes (classes 1..num_classes-1; [0] of each is unused). Before Init,
  // passes do nothing.
  void Init(PageHeap* heap, CentralFreeList* central, size_t num_classes, FrontEndShrinker shrink_idle_front_end,
            int shards = 1);

  // From slow paths: cheap except every kCallsPerClockRead-th call.
  void OnSlowPath() {
    // Counted per thread: one counter for all threads moved its cache line between CPUs on
    // every miss (binary trees on two threads: 93% of the miss paths' samples, 1.9 s of
    // CPU where one thread needs 1.25).
    const uint32_t n = ++scavenger_internal::tls_slow_path_calls;
    if (TCM_UNLIKELY(n % kCallsPerClockRead == 0)) MaybeMaintain();
  }
  // The housekeeping tick: one clock read, a pass if the last one is kTickInterval old.
  // Returns the time read (the caller's own housekeeping can use it). `now`: a time the
  // caller read just before (0: read it here).
  uint64_t Tick(uint64_t now = 0) { return MaybeMaintain(now); }
  uint64_t MaybeMaintain(uint64_t now = 0);
  // One maintenance pass at time `now` (ns, monotonic); returns bytes released to the OS,
  // 0 as well when another pass was running. Exposed for tests. on_program_thread: the pass
  // runs inside one of the program's calls (a tick, a slow path), so its collapse is paid by
  // growth (PageHeap::kCollapseGrowthDivisor); RunNow and the background thread collapse
  // every candidate.
  size_t Maintain(uint64_t now, bool on_program_thread = false);
  // A pass right now (a program's own maintenance thread); starts the background thread if
  // one was requested. Returns bytes released.
  size_t RunNow();

  // Takes the page heap lock: REQUIRES it not held.
  void set_release_rate(double rate);
  double release_rate() const { return rate_.load(std::memory_order_relaxed); }
  // How long a free run must stay unused before release; 0 = never release.
  uint64_t idle_time() const;

  // Starts the opt-in background thread (idempotent; restarted lazily after fork).
  void StartBackgroundThread();
  // The thread ends within kTickInterval (a later Start makes a new one).
  void StopBackgroundThread();
  // Asks for the background thread; a later slow path starts it.
  void RequestBackgroundThread() { background_wanted_.store(true, std::memory_order_relaxed); }
  bool background_wanted() const { return background_wanted_.load(std::memory_order_relaxed); }
  bool background_running() const { return background_running_.load(std::memory_order_relaxed); }
  void AfterForkInChild() {
    lock_.ResetAfterFork();
    background_running_.store(false, std::memory_order_relaxed);
  }

  // Held by a pass. A reader that walks every tier (GetStats' class table) holds it so that
  // no pass moves objects from one tier to another while it counts them (they would be
  // counted twice); a pass due meanwhile is skipped, not waited for. REQUIRES: the holder
  // takes no allocator lock other than in the pass's order (front end, transfer caches,
  // page heap).
  SpinLock* pass_lock() { return &lock_; }

  uint64_t passes() const { return passes_.load(std::memory_order_relaxed); }
  size_t released_bytes() const { return released_.load(std::memory_order_relaxed); }

  static uint64_t NowNs();

 private:
  static void* BackgroundLoop(void*);

  SpinLock lock_;
  PageHeap* heap_ = nullptr;
  CentralFreeList* central_ = nullptr;
  size_t num_classes_ = 0;
  int shards_ = 1;
  FrontEndShrinker shrink_idle_front_end_ = nullptr;
  std::atomic<uint64_t> last_run_{0};
  std::atomic<uint64_t> passes_{0};
  std::atomic<size_t> released_{0};
  std::atomic<double> rate_{1.0};
  std::atomic<bool> background_wanted_{false};
  std::atomic<bool> background_running_{false};
};

}  // namespace tcm

#endif  // TCMALLOC_SCAVENGER_H_
