#include "core/scavenger.h"

#include <pthread.h>

#include "api/globals.h"
#include "platform/os.h"

namespace tcm {

uint64_t Scavenger::NowNs() { return os::MonotonicCoarseNs(); }

uint64_t Scavenger::idle_time() const {
  double rate = release_rate();
  if (rate <= 0) return 0;
  double t = static_cast<double>(kBaseIdleTime) / rate;
  return t < 1.0 ? 1 : static_cast<uint64_t>(t);
}

void Scavenger::MaybeMaintain() {
  uint64_t now = NowNs();
  if (now - last_run_.load(std::memory_order_relaxed) < kTickInterval) return;
  Maintain(now);
  if (background_wanted_.load(std::memory_order_relaxed) &&
      !background_running_.load(std::memory_order_relaxed))
    StartBackgroundThread();
}

void Scavenger::Maintain(uint64_t now) {
  if (!lock_.TryLock()) return;  // someone else is doing it
  last_run_.store(now, std::memory_order_relaxed);
  // CPUs whose threads went quiet give their caches back first, so what they held can
  // reach the spans (and the page heap) in this same pass.
  g_cpu_cache.Maintain(now);
  for (size_t cl = 1; cl < kNumClasses; ++cl) g_central[cl].FlushTransferCacheIfIdle();
  const uint64_t idle = idle_time();
  {
    SpinLockHolder h(g_pageheap.lock());
    g_pageheap.set_clock(now);
    if (idle != 0 && now > idle) g_pageheap.ReleaseIdle(now - idle);
  }
  lock_.Unlock();
}

void* Scavenger::BackgroundLoop(void* arg) {
  auto* self = static_cast<Scavenger*>(arg);
  for (;;) {
    os::SleepNs(kTickInterval);
    self->Maintain(NowNs());
  }
  return nullptr;
}

void Scavenger::StartBackgroundThread() {
  background_wanted_.store(true, std::memory_order_relaxed);
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
