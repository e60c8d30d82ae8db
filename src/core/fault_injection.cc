#include "core/fault_injection.h"

#ifdef TCM_FAULT_INJECTION

#include <atomic>

#include "base/config.h"

namespace tcm {

static std::atomic<long long> g_requests_left{-1};
static std::atomic<long long> g_bytes_left{-1};
static std::atomic<long long> g_refused{0};

bool InjectedFault(size_t bytes) {
  long long req = g_requests_left.load(std::memory_order_relaxed);
  long long left = g_bytes_left.load(std::memory_order_relaxed);
  bool fail = false;
  if (req >= 0) {
    if (req == 0) fail = true;
    else g_requests_left.fetch_sub(1, std::memory_order_relaxed);
  }
  if (left >= 0) {
    if (static_cast<long long>(bytes) > left) fail = true;
    else if (!fail) g_bytes_left.fetch_sub(static_cast<long long>(bytes), std::memory_order_relaxed);
  }
  if (fail) g_refused.fetch_add(1, std::memory_order_relaxed);
  return fail;
}

}  // namespace tcm

extern "C" TCM_EXPORT long long tcmalloc_testing_inject_faults(long long after_requests, long long after_bytes) {
  tcm::g_requests_left.store(after_requests, std::memory_order_relaxed);
  tcm::g_bytes_left.store(after_bytes, std::memory_order_relaxed);
  return tcm::g_refused.load(std::memory_order_relaxed);
}

#endif  // TCM_FAULT_INJECTION
