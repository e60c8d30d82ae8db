// fork() from a multithreaded parent: worker threads hammer malloc/free (small, large, realloc,
// new/delete) while the main thread forks 200 times. Every child must be able to allocate, free
// blocks inherited from the parent, start a thread that allocates, and _exit(0) before its alarm
// fires; a child stuck on a lock inherited from the parent dies of SIGALRM and fails the test.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <thread>
#include <vector>

#include "test_util.h"

namespace {

using tcm_test::CheckPattern;
using tcm_test::FillPattern;

constexpr int kForks = 200;
constexpr unsigned kChildTimeoutSeconds = 20;

// Exit codes of a child, for the failure message.
enum ChildStatus {
  kChildOk = 0,
  kChildInheritedBlockCorrupt = 20,
  kChildAllocFailed = 21,
  kChildThreadFailed = 22,
  kChildGrandchildFailed = 23,
};

struct Block {
  void* p;
  size_t n;
  uint32_t seed;
};

void Hammer(std::atomic<bool>* stop, uint64_t id) {
  tcm_test::Rng rng(id * 31 + 5);
  std::vector<void*> held(256, nullptr);
  while (!stop->load(std::memory_order_relaxed)) {
    const size_t i = rng.Below(held.size());
    const uint64_t op = rng.Below(10);
    if (op < 6) {
      free(held[i]);
      held[i] = malloc(tcm_test::SkewedSize(rng, 512 * 1024));
    } else if (op < 8) {
      void* q = realloc(held[i], tcm_test::SkewedSize(rng, 512 * 1024));
      if (q != nullptr) held[i] = q;
    } else {
      int* arr = new int[rng.Below(2000) + 1];
      arr[0] = 1;
      delete[] arr;
    }
  }
  for (void* p : held) free(p);
}

// Runs in the child. Only returns through _exit.
[[noreturn]] void ChildBody(const std::vector<Block>& inherited, bool fork_grandchild) {
  alarm(kChildTimeoutSeconds);
  for (const Block& b : inherited) {
    if (!CheckPattern(b.p, b.n, b.seed)) _exit(kChildInheritedBlockCorrupt);
    free(b.p);
  }
  tcm_test::Rng rng(static_cast<uint64_t>(getpid()));
  for (int i = 0; i < 1000; ++i) {
    const size_t n = tcm_test::SkewedSize(rng);
    void* p = malloc(n);
    if (p == nullptr) _exit(kChildAllocFailed);
    memset(p, 0x5c, n < 256 ? n : 256);
    free(p);
  }
  std::atomic<bool> thread_ok{false};
  std::thread t([&thread_ok] {
    std::vector<void*> blocks;
    for (int i = 0; i < 200; ++i) blocks.push_back(malloc(static_cast<size_t>(i) * 100 + 1));
    bool ok = true;
    for (void* p : blocks) {
      ok = ok && p != nullptr;
      free(p);
    }
    thread_ok = ok;
  });
  t.join();
  if (!thread_ok) _exit(kChildThreadFailed);
  if (fork_grandchild) {
    const pid_t pid = fork();
    if (pid == 0) {
      void* p = malloc(100000);
      free(p);
      _exit(p != nullptr ? 0 : 1);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      _exit(kChildGrandchildFailed);
    }
  }
  _exit(kChildOk);
}

// Worker threads that run Hammer until the pool goes out of scope (also on ASSERT failure).
class HammerPool {
 public:
  explicit HammerPool(int n) {
    for (int t = 0; t < n; ++t) workers_.emplace_back(Hammer, &stop_, static_cast<uint64_t>(t));
  }
  ~HammerPool() {
    stop_ = true;
    for (std::thread& t : workers_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> workers_;
};

TEST(Fork, FromAMultithreadedParentNeverDeadlocks) {
  HammerPool pool(4);

  int failures = 0;
  for (int i = 0; i < kForks && failures < 5; ++i) {
    // Blocks the child frees: small, medium and large, allocated right before the fork.
    std::vector<Block> inherited;
    for (size_t n : {size_t{24}, size_t{700}, size_t{20000}, size_t{400000}}) {
      const uint32_t seed = static_cast<uint32_t>(i * 4 + static_cast<int>(inherited.size()));
      void* p = malloc(n);
      ASSERT_NE(p, nullptr);
      FillPattern(p, n, seed);
      inherited.push_back({p, n, seed});
    }
    const pid_t pid = fork();
    ASSERT_GE(pid, 0) << "fork failed: " << strerror(errno);
    if (pid == 0) ChildBody(inherited, i % 20 == 0);
    for (const Block& b : inherited) free(b.p);  // the parent's copies
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status)) {
      ++failures;
      ADD_FAILURE() << "fork #" << i << ": child killed by signal " << WTERMSIG(status)
                    << (WTERMSIG(status) == SIGALRM ? " (deadlocked: alarm fired)" : "");
    } else if (WEXITSTATUS(status) != kChildOk) {
      ++failures;
      ADD_FAILURE() << "fork #" << i << ": child exited with status " << WEXITSTATUS(status)
                    << " (20: inherited block corrupt, 21: malloc failed, 22: thread failed, "
                       "23: grandchild failed)";
    }
  }
}

}  // namespace
