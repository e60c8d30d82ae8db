#include "platform/rseq.h"

#include <fcntl.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "platform/os.h"

// glibc 2.35+ defines these (in ld.so); with an older glibc the weak references are null.
extern "C" {
extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));
}

namespace tcm::os {

namespace {

// The kernel's values of an area's cpu_id before registration and after a failed one.
constexpr int32_t kCpuIdUninitialized = -1;
constexpr int32_t kCpuIdRegistrationFailed = -2;

// Our own area for glibc versions that do not register one. The kernel's struct rseq is
// 32 bytes, 32-byte aligned; cpu_id starts as "uninitialised" so the per-CPU fast paths
// miss until the thread's first slow path registered it.
struct alignas(32) OwnRseq {
  uint32_t cpu_id_start = 0;
  uint32_t cpu_id = static_cast<uint32_t>(kCpuIdUninitialized);
  uint64_t rseq_cs = 0;
  uint32_t flags = 0;
  uint32_t pad[3] = {};
};
static_assert(sizeof(OwnRseq) == 32);
static_assert(offsetof(OwnRseq, cpu_id) == kRseqCpuIdOffset);
static_assert(offsetof(OwnRseq, rseq_cs) == kRseqCsOffset);

__thread OwnRseq tls_own_rseq __attribute__((tls_model("initial-exec")));

std::atomic<int> g_source{-1};  // -1 undecided, else RseqSource

char* ThreadPointer() {
  char* tp;
  __asm__("mov %%fs:0, %0" : "=r"(tp));  // the TCB's self pointer (x86-64 TLS ABI)
  return tp;
}

uint32_t ReadCpuId(ptrdiff_t offset) {
  return *reinterpret_cast<volatile uint32_t*>(ThreadPointer() + offset + kRseqCpuIdOffset);
}

bool RegisterOwn() {
  if (static_cast<int32_t>(tls_own_rseq.cpu_id) >= 0) return true;
  const int saved = errno;
  const long rc = syscall(SYS_rseq, &tls_own_rseq, sizeof(OwnRseq), 0, kRseqSignature);
  errno = saved;
  if (rc != 0) {
    tls_own_rseq.cpu_id = static_cast<uint32_t>(kCpuIdRegistrationFailed);
    return false;
  }
  return true;
}

}  // namespace

namespace rseq_internal {
ptrdiff_t offset = 0;
}

RseqSource InitRseq(bool allow_own, bool force_own) {
  int s = g_source.load(std::memory_order_acquire);
  if (s >= 0) return static_cast<RseqSource>(s);
  RseqSource source = RseqSource::kNone;
  const bool glibc_knows_rseq = &__rseq_size != nullptr && &__rseq_offset != nullptr;
  if (glibc_knows_rseq && !force_own) {
    // glibc knows rseq: it registered every thread, or deliberately none.
    if (__rseq_size > 0 && static_cast<int32_t>(ReadCpuId(__rseq_offset)) >= 0) {
      rseq_internal::offset = __rseq_offset;
      source = RseqSource::kGlibc;
    }
  } else if ((allow_own || force_own) && RegisterOwn()) {
    rseq_internal::offset = reinterpret_cast<char*>(&tls_own_rseq) - ThreadPointer();
    source = RseqSource::kOwn;
  }
  g_source.store(static_cast<int>(source), std::memory_order_release);
  return source;
}

bool RseqOffsetIsBuiltIn() {
  return kHasBuiltInRseqOffset && CurrentRseqSource() == RseqSource::kGlibc &&
         rseq_internal::offset == kBuiltInRseqOffset;
}

RseqSource CurrentRseqSource() {
  int s = g_source.load(std::memory_order_acquire);
  return s < 0 ? RseqSource::kNone : static_cast<RseqSource>(s);
}

ptrdiff_t RseqOffset() { return rseq_internal::offset; }

bool RegisterThreadRseq() {
  switch (CurrentRseqSource()) {
    case RseqSource::kGlibc:
      return static_cast<int32_t>(ReadCpuId(rseq_internal::offset)) >= 0;
    case RseqSource::kOwn:
      return RegisterOwn();
    case RseqSource::kNone:
      break;
  }
  return false;
}

int RseqCurrentCpu() {
  if (CurrentRseqSource() == RseqSource::kNone) return -1;
  const int32_t cpu = static_cast<int32_t>(ReadCpuId(rseq_internal::offset));
  return cpu < 0 ? -1 : cpu;
}

int NumPossibleCpus() {
  static std::atomic<int> cached{0};
  int n = cached.load(std::memory_order_relaxed);
  if (n > 0) return n;
  // "0-3,8-11": the highest number plus one. Raw syscalls: may run inside the first malloc.
  char buf[256];
  long len = -1;
  int fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, "/sys/devices/system/cpu/possible", O_RDONLY | O_CLOEXEC));
  if (fd >= 0) {
    len = syscall(SYS_read, fd, buf, sizeof(buf) - 1);
    syscall(SYS_close, fd);
  }
  int highest = -1;
  if (len > 0) {
    buf[len] = '\0';
    int value = -1;
    for (const char* p = buf; *p != '\0'; ++p) {
      if (*p >= '0' && *p <= '9') {
        value = (value < 0 ? 0 : value * 10) + (*p - '0');
      } else {
        if (value > highest) highest = value;
        value = -1;
      }
    }
    if (value > highest) highest = value;
  }
  if (highest < 0) {
    // No sysfs (some containers): the configured CPUs.
    long conf = sysconf(_SC_NPROCESSORS_CONF);
    highest = conf > 0 ? static_cast<int>(conf) - 1 : 0;
  }
  n = highest + 1;
  cached.store(n, std::memory_order_relaxed);
  return n;
}

bool RegisterRseqFence() {
  const int saved = errno;
  const long rc = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0);
  errno = saved;
  return rc == 0;
}

bool RseqFence(int cpu) {
  const int saved = errno;
  const long rc = syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, MEMBARRIER_CMD_FLAG_CPU, cpu);
  errno = saved;
  return rc == 0;
}

bool PinToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

bool UnpinFromCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int n = NumPossibleCpus();
  for (int i = 0; i < n && i < CPU_SETSIZE; ++i) CPU_SET(i, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

int AllowedCpuCount() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  const int n = CPU_COUNT(&set);
  return n > 0 ? n : 1;
}

}  // namespace tcm::os
