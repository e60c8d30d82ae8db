// Out of memory, made to happen: the system allocator refuses from a chosen moment
// (tcmalloc_minimal_faulty), or a real address-space limit (RLIMIT_AS) in a child. Every
// API must report the failure the way C, POSIX and C++ say, and the heap must stay
// consistent and usable once memory is back.
#include <gperftools/malloc_extension.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

extern "C" long long tcmalloc_testing_inject_faults(long long after_requests, long long after_bytes);

namespace {

void* volatile g_sink;

// Everything the process can get is what is already free inside the allocator.
struct NoMoreSystemMemory {
  NoMoreSystemMemory() { tcmalloc_testing_inject_faults(0, -1); }
  ~NoMoreSystemMemory() { tcmalloc_testing_inject_faults(-1, -1); }
};

TEST(FaultInjection, EveryApiReportsOutOfMemory) {
  const size_t huge = size_t{1} << 30;  // more than anything free inside the allocator
  void* keep = malloc(4 << 20);
  {
    NoMoreSystemMemory no_memory;
    errno = 0;
    EXPECT_EQ(malloc(huge), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    errno = 0;
    EXPECT_EQ(calloc(1, huge), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    errno = 0;
    EXPECT_EQ(realloc(keep, huge), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    memset(keep, 5, 4 << 20);  // the old block is untouched and still ours
    errno = 0;
    EXPECT_EQ(memalign(4096, huge), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    errno = 0;
    EXPECT_EQ(aligned_alloc(1 << 21, huge), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    void* p = reinterpret_cast<void*>(1);
    EXPECT_EQ(posix_memalign(&p, 64, huge), ENOMEM);
    EXPECT_EQ(p, reinterpret_cast<void*>(1)) << "output untouched on failure";
    EXPECT_EQ(valloc(huge), nullptr);
    EXPECT_EQ(pvalloc(huge), nullptr);
    EXPECT_THROW(g_sink = ::operator new(huge), std::bad_alloc);
    EXPECT_THROW(g_sink = ::operator new[](huge), std::bad_alloc);
    EXPECT_THROW(g_sink = ::operator new(huge, std::align_val_t{4096}), std::bad_alloc);
    EXPECT_EQ(::operator new(huge, std::nothrow), nullptr);
    EXPECT_EQ(::operator new(huge, std::align_val_t{64}, std::nothrow), nullptr);
  }
  free(keep);
  EXPECT_TRUE(MallocExtension::instance()->VerifyAllMemory());
}

int g_handler_calls = 0;
void* g_reserve = nullptr;

TEST(FaultInjection, NewHandlerRunsAndCanFreeMemory) {
  g_reserve = malloc(64 << 20);
  g_handler_calls = 0;
  std::set_new_handler([] {
    ++g_handler_calls;
    if (g_reserve == nullptr) throw std::bad_alloc();
    free(g_reserve);  // give memory back, then operator new retries
    g_reserve = nullptr;
    MallocExtension::instance()->ReleaseFreeMemory();
    tcmalloc_testing_inject_faults(-1, -1);  // "memory is back"
  });
  {
    NoMoreSystemMemory no_memory;
    void* p = ::operator new(size_t{1} << 30);  // fails once, handler runs, then succeeds
    EXPECT_NE(p, nullptr);
    ::operator delete(p);
  }
  EXPECT_EQ(g_handler_calls, 1);
  std::set_new_handler(nullptr);
}

TEST(FaultInjection, SmallObjectsRunOutThenRecover) {
  // With no system memory, small allocations are served from what is free until that is
  // gone; then malloc fails cleanly. Afterwards everything works again.
  std::vector<void*> blocks;
  blocks.reserve(1 << 22);
  size_t failures = 0;
  {
    NoMoreSystemMemory no_memory;
    for (size_t i = 0; i < (size_t{1} << 22); ++i) {
      void* p = malloc(1000);
      if (p == nullptr) {
        ++failures;
        EXPECT_EQ(errno, ENOMEM);
        if (failures > 100) break;
        continue;
      }
      memset(p, 0x3c, 1000);
      blocks.push_back(p);
    }
  }
  EXPECT_GT(failures, 0u) << "memory must run out when the system refuses";
  EXPECT_TRUE(MallocExtension::instance()->VerifyAllMemory());
  for (void* p : blocks) free(p);
  blocks.clear();
  for (int i = 0; i < 1000; ++i) blocks.push_back(malloc(100 + static_cast<size_t>(i)));
  for (void* p : blocks) free(p);
  void* big = malloc(64 << 20);
  ASSERT_NE(big, nullptr);
  memset(big, 1, 64 << 20);
  free(big);
  EXPECT_TRUE(MallocExtension::instance()->VerifyAllMemory());
}

TEST(FaultInjection, FailsAfterAByteBudget) {
  // What is already free inside the allocator needs no system memory: count it in.
  size_t free_bytes = 0, unmapped = 0;
  MallocExtension::instance()->GetNumericProperty("tcmalloc.pageheap_free_bytes", &free_bytes);
  MallocExtension::instance()->GetNumericProperty("tcmalloc.pageheap_unmapped_bytes", &unmapped);
  const size_t already = (free_bytes + unmapped) >> 20;
  tcmalloc_testing_inject_faults(-1, 32 << 20);  // 32 MiB more from the system, then nothing
  std::vector<void*> blocks;
  for (size_t i = 0; i < already + 200; ++i) {
    void* p = malloc(1 << 20);
    if (p == nullptr) break;
    blocks.push_back(p);
  }
  tcmalloc_testing_inject_faults(-1, -1);
  EXPECT_LT(blocks.size(), already + 200);
  EXPECT_GE(blocks.size(), already + 16);
  for (void* p : blocks) free(p);
  EXPECT_TRUE(MallocExtension::instance()->VerifyAllMemory());
}

TEST(RealLimit, AddressSpaceLimitInAChild) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    struct rlimit rl;
    getrlimit(RLIMIT_AS, &rl);
    rl.rlim_cur = 1u << 30;  // 1 GiB of address space for the whole process
    setrlimit(RLIMIT_AS, &rl);
    std::vector<void*> blocks;
    blocks.reserve(4096);
    bool saw_enomem = false;
    for (int i = 0; i < 4096; ++i) {
      errno = 0;
      void* p = malloc(1 << 20);
      if (p == nullptr) {
        saw_enomem = errno == ENOMEM;
        break;
      }
      blocks.push_back(p);
    }
    if (!saw_enomem) _exit(2);
    for (void* p : blocks) free(p);
    void* small = malloc(100);
    if (small == nullptr) _exit(3);
    free(small);
    _exit(MallocExtension::instance()->VerifyAllMemory() ? 0 : 4);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
