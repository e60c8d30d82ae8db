// Stopping threads with a signal (see thread_list.h for the protocol and why).
//
// Shared state between the checker and the handlers lives in constinit globals: the
// handler may run in any thread at any time after the first stop (a signal can stay
// pending in a thread that blocks it), so it must never touch memory that could go away.
// Slots are only ever replaced by bigger ones, never unmapped, for the same reason.
#include "heapcheck/thread_list.h"

#include <ucontext.h>

#include <cerrno>
#include <climits>

#include "platform/files.h"
#include "platform/os.h"
#include "platform/threads.h"

namespace tcm::heapcheck {

namespace {

constexpr uint64_t kPollNs = 10 * 1000 * 1000;          // arrivals are checked this often
constexpr uint64_t kBlockedGraceNs = 100 * 1000 * 1000;  // then a blocked signal means "stuck"
constexpr uint64_t kGiveUpNs = 3000ull * 1000 * 1000;    // no thread takes longer than this

// Odd while a stop is in progress: handlers park until it changes.
constinit std::atomic<int> g_phase{0};
constinit std::atomic<int> g_next_slot{0};
constinit std::atomic<int> g_arrivals{0};  // futex word: bumped by each parked handler
constinit std::atomic<int> g_parked{0};    // handlers currently inside StopHandler
constinit ThreadState* g_slots = nullptr;
constinit std::atomic<int> g_slot_cap{0};
constinit int g_pid = 0;
constinit int g_signal = 0;
constinit bool g_handler_installed = false;  // our handler replaced the program's disposition

void StopHandler(int, siginfo_t* info, void* uctx) {
  const int saved_errno = errno;
  const int phase = g_phase.load(std::memory_order_acquire);
  // A late or stray signal (the stop is over, or someone else sent it): nothing to do.
  if ((phase & 1) == 0 || info->si_code != SI_TKILL || info->si_pid != g_pid) {
    errno = saved_errno;
    return;
  }
  g_parked.fetch_add(1, std::memory_order_acq_rel);
  const int i = g_next_slot.fetch_add(1, std::memory_order_relaxed);
  if (i < g_slot_cap.load(std::memory_order_acquire)) {
    ThreadState* s = &g_slots[i];
    const ucontext_t* uc = static_cast<const ucontext_t*>(uctx);
    int n = 0;
    for (int r = 0; r < NGREG && n < kMaxRegisterWords; ++r) s->regs[n++] = static_cast<uintptr_t>(uc->uc_mcontext.gregs[r]);
    // SSE registers: compilers move pairs of pointers through them (memcpy, struct copies).
    if (uc->uc_mcontext.fpregs != nullptr) {
      const auto* xmm = uc->uc_mcontext.fpregs->_xmm;
      for (int r = 0; r < 16 && n + 2 <= kMaxRegisterWords; ++r) {
        uintptr_t w[2];
        __builtin_memcpy(w, &xmm[r], sizeof(w));
        s->regs[n++] = w[0];
        s->regs[n++] = w[1];
      }
    }
    s->num_regs = n;
    s->altstack = os::AltSignalStack();
    s->sp = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
    s->tp = reinterpret_cast<uintptr_t>(__builtin_thread_pointer());
    s->stopped = true;
    // The tid is the slot's "ready" flag: written last, read with acquire.
    __atomic_store_n(&s->tid, os::GetTid(), __ATOMIC_RELEASE);
  }
  g_arrivals.fetch_add(1, std::memory_order_release);
  os::FutexWake(&g_arrivals, INT_MAX);
  while (g_phase.load(std::memory_order_acquire) == phase) os::FutexWait(&g_phase, phase);
  g_parked.fetch_sub(1, std::memory_order_release);
  os::FutexWake(&g_parked, INT_MAX);
  errno = saved_errno;
}

// Borrows a real-time signal nobody handles (os::FindUnusedRealtimeSignal), once.
int ChooseSignal() {
  if (g_signal == 0) g_signal = os::FindUnusedRealtimeSignal();
  return g_signal;
}

// SA_RESTART keeps most interrupted system calls transparent to the program; every other
// signal is blocked while parked so no handler of the program runs on a frozen thread
// (os::InstallSignalHandler sets both). Left installed by an earlier stop is fine.
bool InstallHandler() {
  if (!os::InstallSignalHandler(g_signal, &StopHandler)) return false;
  g_handler_installed = true;
  return true;
}

// Makes sure there are at least n slots. Only called while no handler can be writing.
bool EnsureSlots(int n) {
  if (g_slot_cap.load(std::memory_order_relaxed) >= n) return true;
  const size_t bytes = (static_cast<size_t>(n) * sizeof(ThreadState) + 4095) & ~size_t{4095};
  auto* fresh = static_cast<ThreadState*>(os::MapAnonymous(bytes));
  if (fresh == nullptr) return false;
  // The old array is deliberately not unmapped: a handler whose signal was pending from an
  // earlier stop could still be about to write into it.
  g_slots = fresh;
  g_slot_cap.store(static_cast<int>(bytes / sizeof(ThreadState)), std::memory_order_release);
  return true;
}

enum class Fate : uint8_t { kSignaled, kArrived, kGone, kStuck };

struct Pending {
  int tid;
  Fate fate;
  uint64_t signaled_at;
};

// Parses one hexadecimal or decimal number (optional 0x); advances *s past it.
bool ParseNumber(const char** s, uintptr_t* out) {
  const char* p = *s;
  while (*p == ' ' || *p == '\t') ++p;
  bool neg = false;
  if (*p == '-') {
    neg = true;
    ++p;
  }
  int base = 10;
  if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    base = 16;
    p += 2;
  }
  uintptr_t v = 0;
  const char* start = p;
  for (;; ++p) {
    int d;
    if (*p >= '0' && *p <= '9') d = *p - '0';
    else if (base == 16 && *p >= 'a' && *p <= 'f') d = *p - 'a' + 10;
    else if (base == 16 && *p >= 'A' && *p <= 'F') d = *p - 'A' + 10;
    else break;
    v = v * static_cast<uintptr_t>(base) + static_cast<uintptr_t>(d);
  }
  if (p == start) return false;
  *out = neg ? static_cast<uintptr_t>(-static_cast<intptr_t>(v)) : v;
  *s = p;
  return true;
}

void TaskPath(char* buf, size_t len, int tid, const char* leaf) {
  // "/proc/self/task/<tid>/<leaf>" without snprintf (which is not async-safe in spirit).
  const char* prefix = "/proc/self/task/";
  size_t n = 0;
  for (const char* p = prefix; *p && n + 1 < len; ++p) buf[n++] = *p;
  char digits[16];
  int d = 0;
  do {
    digits[d++] = static_cast<char>('0' + tid % 10);
    tid /= 10;
  } while (tid > 0 && d < 15);
  while (d > 0 && n + 1 < len) buf[n++] = digits[--d];
  if (n + 1 < len) buf[n++] = '/';
  for (const char* p = leaf; *p && n + 1 < len; ++p) buf[n++] = *p;
  buf[n] = '\0';
}

// Reads a small /proc file into buf (NUL-terminated). Returns false if it is gone.
bool ReadSmall(const char* path, char* buf, size_t len) {
  int fd = os::OpenForReading(path);
  if (fd < 0) return false;
  long total = 0;
  for (;;) {
    long n = os::ReadFd(fd, buf + total, len - 1 - static_cast<size_t>(total));
    if (n <= 0) break;
    total += n;
    if (static_cast<size_t>(total) >= len - 1) break;
  }
  os::CloseFd(fd);
  buf[total < 0 ? 0 : total] = '\0';
  return true;
}

const char* FindField(const char* text, const char* name) {
  for (const char* line = text; *line;) {
    const char* a = line;
    const char* b = name;
    while (*b && *a == *b) {
      ++a;
      ++b;
    }
    if (*b == '\0') return a;
    while (*line && *line != '\n') ++line;
    if (*line == '\n') ++line;
  }
  return nullptr;
}

// What /proc says about a thread that has not arrived: gone, or unable to take the signal.
Fate Probe(int tid, int sig, bool grace_over) {
  char path[64];
  char text[2048];
  TaskPath(path, sizeof(path), tid, "status");
  if (!ReadSmall(path, text, sizeof(text))) return Fate::kGone;
  if (const char* st = FindField(text, "State:")) {
    while (*st == ' ' || *st == '\t') ++st;
    if (*st == 'Z' || *st == 'X') return Fate::kGone;
  }
  if (grace_over) {
    if (const char* blk = FindField(text, "SigBlk:")) {
      uintptr_t mask = 0;
      const char* p = blk;
      while (*p == ' ' || *p == '\t') ++p;
      // The mask is printed as hex without 0x.
      for (; (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'); ++p)
        mask = mask * 16 + static_cast<uintptr_t>(*p <= '9' ? *p - '0' : *p - 'a' + 10);
      if (mask & (uintptr_t{1} << (sig - 1))) return Fate::kStuck;
    }
  }
  return Fate::kSignaled;
}

// For a thread we could not stop: its stack pointer and the argument registers of the
// system call it sleeps in, from /proc/self/task/<tid>/syscall ("nr a1..a6 sp pc" when in
// a system call, "-1 sp pc" when blocked elsewhere, "running" when running).
void ReadStuckThread(int tid, ThreadState* out) {
  char path[64];
  char text[256];
  TaskPath(path, sizeof(path), tid, "syscall");
  if (!ReadSmall(path, text, sizeof(text))) return;
  uintptr_t v[9];
  int n = 0;
  const char* p = text;
  while (n < 9 && ParseNumber(&p, &v[n])) ++n;
  if (n == 9) {
    for (int i = 1; i <= 6; ++i) out->regs[out->num_regs++] = v[i];
    out->sp = v[7];
  } else if (n == 3) {
    out->sp = v[1];
  }
}

}  // namespace

bool ThreadList::StopAll() {
  threads_.Clear();
  not_stopped_ = 0;
  const int self = os::GetTid();
  g_pid = os::GetPid();
  if (ChooseSignal() == 0) return false;

  MappedArray<int> tids;
  if (!tids.Resize(256)) return false;
  int n;
  while ((n = os::ListThreads(tids.data(), static_cast<int>(tids.size()))) > static_cast<int>(tids.size()))
    if (!tids.Resize(static_cast<size_t>(n) * 2)) return false;
  if (n < 0) return false;

  // Slots are reused only when no handler is inside: g_parked is 0 between stops unless a
  // thread is still leaving from the previous one, which ResumeAll waits for.
  if (!EnsureSlots(2 * n + 64)) return false;
  const int cap = g_slot_cap.load(std::memory_order_relaxed);
  for (int i = 0; i < cap; ++i) __atomic_store_n(&g_slots[i].tid, 0, __ATOMIC_RELAXED);
  g_next_slot.store(0, std::memory_order_relaxed);
  g_arrivals.store(0, std::memory_order_relaxed);
  if (!InstallHandler()) return false;
  g_phase.fetch_add(1, std::memory_order_acq_rel);  // now odd: handlers park

  MappedArray<Pending> pending;
  for (int round = 0; round < 100; ++round) {
    // Signal every thread not seen before (threads created since the last listing too).
    bool fresh = false;
    for (int i = 0; i < n && i < static_cast<int>(tids.size()); ++i) {
      const int tid = tids[static_cast<size_t>(i)];
      if (tid == self) continue;
      bool known = false;
      for (const Pending& p : pending) known |= p.tid == tid;
      if (known) continue;
      fresh = true;
      Pending p{tid, Fate::kSignaled, os::MonotonicNs()};
      if (!os::SignalThread(g_pid, tid, g_signal)) p.fate = Fate::kGone;
      pending.Push(p);
    }
    if (!fresh) break;
    // Wait for the signaled threads to park (or to prove they never will).
    for (;;) {
      const int seen = g_arrivals.load(std::memory_order_acquire);
      const int filled = g_next_slot.load(std::memory_order_acquire);
      const int limit = filled < cap ? filled : cap;
      bool waiting = false;
      const uint64_t now = os::MonotonicNs();
      for (Pending& p : pending) {
        if (p.fate != Fate::kSignaled) continue;
        for (int s = 0; s < limit; ++s) {
          if (__atomic_load_n(&g_slots[s].tid, __ATOMIC_ACQUIRE) == p.tid) {
            p.fate = Fate::kArrived;
            break;
          }
        }
        if (p.fate != Fate::kSignaled) continue;
        if (now - p.signaled_at > kGiveUpNs) {
          p.fate = Fate::kStuck;
          continue;
        }
        if (now - p.signaled_at > kPollNs) p.fate = Probe(p.tid, g_signal, now - p.signaled_at > kBlockedGraceNs);
        waiting |= p.fate == Fate::kSignaled;
      }
      if (!waiting) break;
      os::FutexWaitFor(&g_arrivals, seen, kPollNs);
    }
    // Threads may have been created meanwhile (their creators ran until signaled).
    while ((n = os::ListThreads(tids.data(), static_cast<int>(tids.size()))) > static_cast<int>(tids.size()))
      if (!tids.Resize(static_cast<size_t>(n) * 2)) break;
    if (n < 0) break;
  }

  // Collect what the parked handlers recorded, and what /proc tells about the others.
  const int filled = g_next_slot.load(std::memory_order_acquire);
  const int limit = filled < cap ? filled : cap;
  for (const Pending& p : pending) {
    if (p.fate == Fate::kGone) continue;
    ThreadState st{};
    st.tid = p.tid;
    bool found = false;
    if (p.fate == Fate::kArrived) {
      for (int s = 0; s < limit && !found; ++s) {
        if (__atomic_load_n(&g_slots[s].tid, __ATOMIC_ACQUIRE) == p.tid) {
          st = g_slots[s];
          found = true;
        }
      }
    }
    if (!found) {
      st.stopped = false;
      ReadStuckThread(p.tid, &st);
      ++not_stopped_;
    }
    threads_.Push(st);
  }
  return true;
}

void ThreadList::AddOwnMemory(MappedArray<Range>* out) const {
  const auto add = [out](const void* p, size_t bytes) {
    const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
    if (p != nullptr && bytes > 0) out->Push(Range{Hide(lo), Hide(lo + bytes)});
  };
  add(g_slots, static_cast<size_t>(g_slot_cap.load(std::memory_order_relaxed)) * sizeof(ThreadState));
  add(threads_.data(), threads_.size() * sizeof(ThreadState));
}

void ThreadList::ResumeAll() {
  if (g_phase.load(std::memory_order_relaxed) & 1) {
    g_phase.fetch_add(1, std::memory_order_acq_rel);
    os::FutexWake(&g_phase, INT_MAX);
  }
  const uint64_t start = os::MonotonicNs();
  for (;;) {
    const int parked = g_parked.load(std::memory_order_acquire);
    if (parked == 0 || os::MonotonicNs() - start > kGiveUpNs) break;
    os::FutexWaitFor(&g_parked, parked, kPollNs);
  }
  // Give the program its signal disposition back, unless a signal of ours may still be
  // pending somewhere (a thread that blocks it): the default action of a real-time signal
  // is to kill the process, while our handler ignores a late signal.
  if (g_parked.load(std::memory_order_acquire) == 0 && not_stopped_ == 0 && g_handler_installed) {
    os::RestoreSignalHandler(g_signal);
    g_handler_installed = false;
  }
  // The slots hold other threads' registers: scrub them so a later scan does not find
  // these stale values in our memory and keep leaked objects alive with them.
  if (g_parked.load(std::memory_order_acquire) == 0) {
    const int cap = g_slot_cap.load(std::memory_order_relaxed);
    __builtin_memset(static_cast<void*>(g_slots), 0, static_cast<size_t>(cap) * sizeof(ThreadState));
  }
  threads_.Release();
  not_stopped_ = 0;
}

}  // namespace tcm::heapcheck
