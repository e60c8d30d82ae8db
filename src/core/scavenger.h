// Scavenger: gives idle memory back without being asked.
//
// Free page-heap runs that stay unused for idle_time() = kBaseIdleTime / release_rate are
// released to the OS with madvise(MADV_DONTNEED); chains parked in a transfer cache that
// went unused for a whole tick go back to their spans (and empty spans to the page heap).
// Memory in active use is never released, so a program that frees and reallocates the
// same blocks keeps reusing backed pages: no page-fault storm.
//
// The work runs at most once per kTickInterval, from the allocator's slow paths (a counter
// there reads the coarse clock every kCallsPerClockRead calls) or, opt-in, from a
// background thread for programs that go quiet. Release rate 0 disables releasing.
//
// Locking: Maintain() takes a try-lock of its own, then each transfer cache and the page
// heap lock in turn (never two at once).
#ifndef TCMALLOC_SCAVENGER_H_
#define TCMALLOC_SCAVENGER_H_

#include <atomic>
#include <cstdint>

#include "base/config.h"
#include "base/spinlock.h"

namespace tcm {

class Scavenger {
 public:
  static constexpr uint64_t kTickInterval = 100'000'000;   // ns
  static constexpr uint64_t kBaseIdleTime = 500'000'000;   // ns, at release rate 1.0
  static constexpr uint32_t kCallsPerClockRead = 64;

  constexpr Scavenger() = default;

  // From slow paths: cheap except every kCallsPerClockRead-th call.
  void OnSlowPath() {
    // An approximate count is enough: relaxed load and store, no locked instruction.
    const uint32_t n = calls_.load(std::memory_order_relaxed) + 1;
    calls_.store(n, std::memory_order_relaxed);
    if (TCM_UNLIKELY(n % kCallsPerClockRead == 0)) MaybeMaintain();
  }
  void MaybeMaintain();
  // One maintenance pass at time `now` (ns, monotonic). Exposed for tests.
  void Maintain(uint64_t now);

  void set_release_rate(double rate) { rate_.store(rate < 0 ? 0 : rate, std::memory_order_relaxed); }
  double release_rate() const { return rate_.load(std::memory_order_relaxed); }
  // How long a free run must stay unused before release; 0 = never release.
  uint64_t idle_time() const;

  // Starts the opt-in background thread (idempotent; restarted lazily after fork).
  void StartBackgroundThread();
  // Asks for the background thread; a later slow path starts it.
  void RequestBackgroundThread() { background_wanted_.store(true, std::memory_order_relaxed); }
  bool background_running() const { return background_running_.load(std::memory_order_relaxed); }
  void AfterForkInChild() {
    lock_.ResetAfterFork();
    background_running_.store(false, std::memory_order_relaxed);
  }

  static uint64_t NowNs();

 private:
  static void* BackgroundLoop(void*);

  SpinLock lock_;
  std::atomic<uint32_t> calls_{0};
  std::atomic<uint64_t> last_run_{0};
  std::atomic<double> rate_{1.0};
  std::atomic<bool> background_wanted_{false};
  std::atomic<bool> background_running_{false};
};

}  // namespace tcm

#endif  // TCMALLOC_SCAVENGER_H_
