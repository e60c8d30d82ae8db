// Threads, signals and the process (see threads.h for each contract).
#include "platform/threads.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

#include "platform/fault_handler.h"
#include "platform/os.h"

namespace tcm::os {

namespace {

// What InstallSignalHandler replaced, per signal (real-time signals go up to 64).
constexpr int kMaxSignal = 65;
struct sigaction g_replaced[kMaxSignal];
bool g_have_replaced[kMaxSignal];
}  // namespace

int GetTid() { return static_cast<int>(syscall(SYS_gettid)); }

bool IsSetuid() {
  ErrnoKeeper k;
  return syscall(SYS_getuid) != syscall(SYS_geteuid) || syscall(SYS_getgid) != syscall(SYS_getegid);
}

int ListThreads(int* tids, int cap) {
  ErrnoKeeper k;
  const int fd = static_cast<int>(
      syscall(SYS_openat, AT_FDCWD, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd < 0) return -1;
  // struct linux_dirent64 without the header that defines it for glibc users.
  struct Dirent64 {
    uint64_t d_ino;         // cppcheck-suppress unusedStructMember
    int64_t d_off;          // cppcheck-suppress unusedStructMember
    unsigned short d_reclen;
    unsigned char d_type;   // cppcheck-suppress unusedStructMember
    char d_name[1];
  };
  alignas(8) char buf[4096];
  int count = 0;
  for (;;) {
    const long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      const Dirent64* d = reinterpret_cast<const Dirent64*>(buf + off);
      off += d->d_reclen;
      const char* s = d->d_name;
      if (*s < '0' || *s > '9') continue;  // "." and ".."
      int tid = 0;
      for (; *s >= '0' && *s <= '9'; ++s) tid = tid * 10 + (*s - '0');
      if (count < cap) tids[count] = tid;
      ++count;
    }
  }
  syscall(SYS_close, fd);
  return count;
}

bool SignalThread(int tgid, int tid, int sig) {
  ErrnoKeeper k;
  return syscall(SYS_tgkill, tgid, tid, sig) == 0;
}

int FindUnusedRealtimeSignal() {
  ErrnoKeeper k;
  for (int sig = SIGRTMAX - 2; sig >= SIGRTMIN + 2; --sig) {
    struct sigaction cur;
    if (sigaction(sig, nullptr, &cur) != 0) continue;
    if ((cur.sa_flags & SA_SIGINFO) == 0 && cur.sa_handler == SIG_DFL) return sig;
  }
  return 0;
}

bool InstallSignalHandler(int sig, SigInfoHandler handler) {
  ErrnoKeeper k;
  if (sig <= 0 || sig >= kMaxSignal) return false;
  struct sigaction cur;
  if (sigaction(sig, nullptr, &cur) != 0) return false;
  if ((cur.sa_flags & SA_SIGINFO) != 0 && cur.sa_sigaction == handler) return true;
  struct sigaction act;
  __builtin_memset(&act, 0, sizeof(act));
  act.sa_sigaction = handler;
  act.sa_flags = SA_SIGINFO | SA_RESTART;
  sigfillset(&act.sa_mask);
  if (!ReplaceSignalAction(sig, &act, &g_replaced[sig])) return false;
  g_have_replaced[sig] = true;
  return true;
}

void RestoreSignalHandler(int sig) {
  ErrnoKeeper k;
  if (sig <= 0 || sig >= kMaxSignal || !g_have_replaced[sig]) return;
  sigaction(sig, &g_replaced[sig], nullptr);
  g_have_replaced[sig] = false;
}

uintptr_t AltSignalStack() {
  ErrnoKeeper k;
  stack_t alt;
  if (sigaltstack(nullptr, &alt) != 0 || (alt.ss_flags & SS_DISABLE) != 0) return 0;
  return reinterpret_cast<uintptr_t>(alt.ss_sp);
}

long CopyFromSelf(void* dst, uintptr_t src, size_t n) {
  ErrnoKeeper k;
  struct iovec local = {dst, n};
  struct iovec remote = {reinterpret_cast<void*>(src), n};
  const long r = syscall(SYS_process_vm_readv, GetPid(), &local, 1UL, &remote, 1UL, 0UL);
  if (r >= 0) return r;
  // EFAULT: the very first page is unreadable (a partial copy returns a short count
  // instead). Anything else means the call itself is unavailable.
  return errno == EFAULT ? 0 : -1;
}

void FutexWaitFor(std::atomic<int>* word, int expected, uint64_t timeout_ns) {
  ErrnoKeeper k;
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(timeout_ns / 1000000000ull);
  ts.tv_nsec = static_cast<long>(timeout_ns % 1000000000ull);
  syscall(SYS_futex, reinterpret_cast<int*>(word), FUTEX_WAIT_PRIVATE, expected, &ts, nullptr, 0);
}

uint64_t MonotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace tcm::os
