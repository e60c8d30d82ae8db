// platform/threads.h and platform/modules.h: thread listing and signalling, borrowed
// real-time signals, reads that cannot fault, timed futex waits, the loaded modules and
// symbol lookup.
#include "platform/threads.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "platform/modules.h"
#include "platform/os.h"

namespace tcm::os {
namespace {

std::atomic<int> g_caught{0};
std::atomic<int> g_caught_tid{0};
void Catch(int sig, siginfo_t* info, void*) {
  g_caught.store(sig);
  g_caught_tid.store(GetTid());
  (void)info;
}

TEST(PlatformThreads, ListsItsThreads) {
  std::atomic<int> other_tid{0};
  std::atomic<bool> done{false};
  std::thread t([&] {
    other_tid = GetTid();
    while (!done) std::this_thread::yield();
  });
  while (other_tid == 0) std::this_thread::yield();
  int tids[256];
  const int n = ListThreads(tids, 256);
  ASSERT_GE(n, 2);
  bool self = false, other = false;
  for (int i = 0; i < n && i < 256; ++i) {
    self |= tids[i] == GetTid();
    other |= tids[i] == other_tid;
  }
  EXPECT_TRUE(self);
  EXPECT_TRUE(other);
  EXPECT_EQ(ListThreads(tids, 1), n) << "the count, even beyond cap";
  done = true;
  t.join();
  EXPECT_EQ(GetTid(), getpid()) << "the main thread's id is the process id";
  EXPECT_FALSE(IsSetuid());
}

TEST(PlatformThreads, BorrowsAFreeRealtimeSignalAndGivesItBack) {
  const int sig = FindUnusedRealtimeSignal();
  ASSERT_GE(sig, SIGRTMIN);
  ASSERT_LE(sig, SIGRTMAX);
  ASSERT_TRUE(InstallSignalHandler(sig, &Catch));
  EXPECT_TRUE(InstallSignalHandler(sig, &Catch)) << "installing it again is a no-op";
  EXPECT_NE(FindUnusedRealtimeSignal(), sig) << "a handled signal is not free";
  ASSERT_TRUE(SignalThread(getpid(), GetTid(), sig));
  EXPECT_EQ(g_caught.load(), sig);
  EXPECT_EQ(g_caught_tid.load(), GetTid());
  RestoreSignalHandler(sig);
  struct sigaction cur;
  ASSERT_EQ(sigaction(sig, nullptr, &cur), 0);
  EXPECT_EQ(cur.sa_handler, SIG_DFL) << "the default disposition is back";
  EXPECT_FALSE(SignalThread(getpid(), 0x7ffffff0, 0)) << "no such thread";
}

TEST(PlatformThreads, AltSignalStack) {
  // A sanitizer's runtime may have given the thread one already: keep it, put it back.
  stack_t original{};
  ASSERT_EQ(sigaltstack(nullptr, &original), 0);
  EXPECT_EQ(AltSignalStack(),
            (original.ss_flags & SS_DISABLE) != 0 ? 0u : reinterpret_cast<uintptr_t>(original.ss_sp));
  static char stack[64 * 1024];
  stack_t ss{};
  ss.ss_sp = stack;
  ss.ss_size = sizeof(stack);
  ASSERT_EQ(sigaltstack(&ss, nullptr), 0);
  EXPECT_EQ(AltSignalStack(), reinterpret_cast<uintptr_t>(stack));
  ss.ss_flags = SS_DISABLE;
  ASSERT_EQ(sigaltstack(&ss, nullptr), 0);
  EXPECT_EQ(AltSignalStack(), 0u);
  if ((original.ss_flags & SS_DISABLE) == 0) {
    ASSERT_EQ(sigaltstack(&original, nullptr), 0);
  }
}

TEST(PlatformThreads, CopyFromSelfStopsAtUnreadableMemory) {
  char* two = static_cast<char*>(mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(two, MAP_FAILED);
  memset(two, 'q', 8192);
  ASSERT_EQ(mprotect(two + 4096, 4096, PROT_NONE), 0);
  char out[8192];
  errno = 55;
  const long r = CopyFromSelf(out, reinterpret_cast<uintptr_t>(two), 8192);
  if (r < 0) GTEST_SKIP() << "process_vm_readv is refused here";
  EXPECT_EQ(r, 4096) << "stops at the unreadable page";
  EXPECT_EQ(out[0], 'q');
  EXPECT_EQ(CopyFromSelf(out, reinterpret_cast<uintptr_t>(two + 4096), 16), 0);
  EXPECT_EQ(errno, 55);
  munmap(two, 8192);
}

TEST(PlatformThreads, FutexWaitForReturnsAtTheTimeoutOrWhenWoken) {
  std::atomic<int> word{1};
  // Nobody wakes it: it returns only because of the timeout (else ctest's timeout fires).
  FutexWaitFor(&word, 1, 20 * 1000 * 1000);
  const uint64_t a = MonotonicNs();
  EXPECT_GE(MonotonicNs(), a) << "monotonic";
  FutexWaitFor(&word, 2, 0);  // the word is not 2: returns at once (no timeout to wait for)
  std::thread waker([&] {
    word.store(2);
    FutexWake(&word, 1);
  });
  FutexWaitFor(&word, 1, 5ull * 1000 * 1000 * 1000);
  waker.join();
  EXPECT_EQ(word.load(), 2);
}

struct Seen {
  bool program = false;
  bool libc = false;
  bool tls = false;
  uintptr_t code = 0;
  bool code_in_program = false;
};

thread_local int tls_marker = 7;

TEST(PlatformModules, ListsTheProgramAndLibc) {
  Seen seen;
  seen.code = reinterpret_cast<uintptr_t>(&FindUnusedRealtimeSignal);
  ForEachLoadedModule(
      [](const LoadedModule& m, void* arg) {
        auto* s = static_cast<Seen*>(arg);
        if (m.path[0] == '\0') {
          s->program = true;
          for (int i = 0; i < m.num_segments; ++i)
            s->code_in_program |= m.segments[i].start <= s->code && s->code < m.segments[i].start + m.segments[i].size;
          s->tls |= m.tls_size > 0 && m.tls_block != 0;
        }
        if (strstr(m.path, "libc.so") != nullptr) s->libc = true;
      },
      &seen);
  EXPECT_GT(tls_marker, 0);
  EXPECT_TRUE(seen.program);
  EXPECT_TRUE(seen.libc);
  EXPECT_TRUE(seen.code_in_program) << "the program's segments hold its code";
  EXPECT_TRUE(seen.tls) << "the program's TLS block is allocated in this thread";
}

TEST(PlatformModules, FindsSymbols) {
  EXPECT_NE(GlobalSymbol("malloc"), nullptr);
  EXPECT_EQ(GlobalSymbol("no_such_symbol_anywhere_12345"), nullptr);
  EXPECT_NE(NextSymbol("malloc"), nullptr) << "libc's, after this program";
}

}  // namespace
}  // namespace tcm::os
