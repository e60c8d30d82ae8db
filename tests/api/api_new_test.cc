// Global operator new/delete in every form the C++ standard defines (plain, array, nothrow,
// sized, C++17 aligned, aligned nothrow, sized aligned) and their failure semantics: the
// new-handler loop of [new.delete.single], std::bad_alloc, nullptr from the nothrow forms.
// Also: sized delete with a wrong size (real programs do it) must neither crash nor corrupt.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <new>
#include <vector>

#include "test_util.h"

namespace {

using tcm_test::CheckPattern;
using tcm_test::FillPattern;
using tcm_test::IsAligned;
using tcm_test::MinAlignmentFor;
using tcm_test::Opaque;

constexpr size_t kMiB = 1024 * 1024;
// Sizes that cannot be satisfied: SIZE_MAX is absurd, 2^50 is merely more than the address space.
constexpr size_t kAbsurd = SIZE_MAX;
constexpr size_t kTooBig = size_t{1} << 50;

const size_t kSizes[] = {0,     1,     8,      15,     16,     17,     100,     1000,   4096,
                         10000, 65536, 100000, 262144, 262145, 300000, kMiB + 3, 5 * kMiB};

// Restores the previous new-handler when a test ends, whatever happens.
class ScopedNewHandler {
 public:
  explicit ScopedNewHandler(std::new_handler h) : previous_(std::set_new_handler(h)) {}
  ~ScopedNewHandler() { std::set_new_handler(previous_); }
  ScopedNewHandler(const ScopedNewHandler&) = delete;
  ScopedNewHandler& operator=(const ScopedNewHandler&) = delete;

 private:
  std::new_handler previous_;
};

void CheckBlock(void* p, size_t n, size_t align, const char* form) {
  ASSERT_NE(p, nullptr) << form << "(" << n << ")";
  EXPECT_TRUE(IsAligned(p, align)) << form << "(" << n << ") = " << p;
  if (&tc_malloc_size != nullptr) {
    EXPECT_GE(tc_malloc_size(p), n) << form << "(" << n << ")";
  }
  memset(p, 0x6b, n);
}

TEST(OperatorNew, EveryUnalignedFormAllocatesAndMatchingDeleteFrees) {
  for (size_t n : kSizes) {
    const size_t align = MinAlignmentFor(n);
    void* p;
    p = ::operator new(Opaque(n));
    CheckBlock(p, n, align, "new");
    ::operator delete(p);
    p = ::operator new(Opaque(n));
    CheckBlock(p, n, align, "new");
    ::operator delete(p, n);
    p = ::operator new(Opaque(n), std::nothrow);
    CheckBlock(p, n, align, "new nothrow");
    ::operator delete(p, std::nothrow);
    p = ::operator new[](Opaque(n));
    CheckBlock(p, n, align, "new[]");
    ::operator delete[](p);
    p = ::operator new[](Opaque(n));
    CheckBlock(p, n, align, "new[]");
    ::operator delete[](p, n);
    p = ::operator new[](Opaque(n), std::nothrow);
    CheckBlock(p, n, align, "new[] nothrow");
    ::operator delete[](p, std::nothrow);
  }
}

TEST(OperatorNew, EveryAlignedFormHonoursAlignmentUpTo1MiB) {
  for (size_t align = 1; align <= kMiB; align <<= 1) {
    const std::align_val_t al{align};
    for (size_t n : {size_t{1}, align, align + 1, 3 * align + 7, size_t{100000}}) {
      void* p;
      p = ::operator new(Opaque(n), al);
      CheckBlock(p, n, align, "new aligned");
      ::operator delete(p, al);
      p = ::operator new(Opaque(n), al);
      CheckBlock(p, n, align, "new aligned");
      ::operator delete(p, n, al);
      p = ::operator new(Opaque(n), al, std::nothrow);
      CheckBlock(p, n, align, "new aligned nothrow");
      ::operator delete(p, al, std::nothrow);
      p = ::operator new[](Opaque(n), al);
      CheckBlock(p, n, align, "new[] aligned");
      ::operator delete[](p, al);
      p = ::operator new[](Opaque(n), al);
      CheckBlock(p, n, align, "new[] aligned");
      ::operator delete[](p, n, al);
      p = ::operator new[](Opaque(n), al, std::nothrow);
      CheckBlock(p, n, align, "new[] aligned nothrow");
      ::operator delete[](p, al, std::nothrow);
    }
  }
}

struct alignas(256) OverAligned {
  char bytes[300];
};

TEST(OperatorNew, NewExpressionsUseTheReplacedOperators) {
  std::vector<OverAligned*> objs;
  for (int i = 0; i < 100; ++i) {
    objs.push_back(new OverAligned);
    EXPECT_TRUE(IsAligned(objs.back(), 256));
  }
  for (OverAligned* o : objs) delete o;
  OverAligned* arr = new OverAligned[7];
  EXPECT_TRUE(IsAligned(arr, 256));
  delete[] arr;
  std::vector<std::string> strings;
  for (int i = 0; i < 1000; ++i) strings.emplace_back(static_cast<size_t>(i), 'x');
  EXPECT_EQ(strings[999].size(), 999u);
}

TEST(OperatorNew, ZeroSizeReturnsDistinctPointers) {
  void* a = ::operator new(Opaque(size_t{0}));
  void* b = ::operator new(Opaque(size_t{0}));
  void* c = ::operator new[](Opaque(size_t{0}));
  EXPECT_NE(a, nullptr);
  EXPECT_NE(a, b);
  EXPECT_NE(c, nullptr);
  ::operator delete(a);
  ::operator delete(b);
  ::operator delete[](c);
}

TEST(OperatorDelete, NullIsANoOpInEveryForm) {
  const std::align_val_t al{64};
  ::operator delete(Opaque<void*>(nullptr));
  ::operator delete[](Opaque<void*>(nullptr));
  ::operator delete(Opaque<void*>(nullptr), std::nothrow);
  ::operator delete[](Opaque<void*>(nullptr), std::nothrow);
  ::operator delete(Opaque<void*>(nullptr), size_t{8});
  ::operator delete[](Opaque<void*>(nullptr), size_t{8});
  ::operator delete(Opaque<void*>(nullptr), al);
  ::operator delete[](Opaque<void*>(nullptr), al);
  ::operator delete(Opaque<void*>(nullptr), al, std::nothrow);
  ::operator delete[](Opaque<void*>(nullptr), al, std::nothrow);
  ::operator delete(Opaque<void*>(nullptr), size_t{8}, al);
  ::operator delete[](Opaque<void*>(nullptr), size_t{8}, al);
}

template <typename F>
void ExpectBadAlloc(F allocate, const char* what) {
  bool threw = false;
  try {
    void* p = allocate();
    ADD_FAILURE() << what << " returned " << p << " instead of throwing";
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  EXPECT_TRUE(threw) << what;
}

TEST(OperatorNew, ImpossibleSizesThrowBadAlloc) {
  ScopedNewHandler no_handler(nullptr);
  const std::align_val_t al{64};
  for (size_t n : {kAbsurd, kTooBig, static_cast<size_t>(PTRDIFF_MAX) + 1}) {
    ExpectBadAlloc([n] { return ::operator new(Opaque(n)); }, "operator new");
    ExpectBadAlloc([n] { return ::operator new[](Opaque(n)); }, "operator new[]");
    ExpectBadAlloc([n, al] { return ::operator new(Opaque(n), al); }, "operator new aligned");
    ExpectBadAlloc([n, al] { return ::operator new[](Opaque(n), al); }, "operator new[] aligned");
  }
}

TEST(OperatorNew, NothrowFormsReturnNullForImpossibleSizes) {
  ScopedNewHandler no_handler(nullptr);
  const std::align_val_t al{4096};
  for (size_t n : {kAbsurd, kTooBig}) {
    EXPECT_EQ(::operator new(Opaque(n), std::nothrow), nullptr);
    EXPECT_EQ(::operator new[](Opaque(n), std::nothrow), nullptr);
    EXPECT_EQ(::operator new(Opaque(n), al, std::nothrow), nullptr);
    EXPECT_EQ(::operator new[](Opaque(n), al, std::nothrow), nullptr);
  }
}

int g_handler_calls = 0;

void CountingHandlerGivesUpAfterThree() {
  if (++g_handler_calls == 3) std::set_new_handler(nullptr);
}

TEST(NewHandler, IsCalledRepeatedlyUntilItUninstallsItself) {
  for (int form = 0; form < 4; ++form) {
    ScopedNewHandler handler(CountingHandlerGivesUpAfterThree);
    g_handler_calls = 0;
    bool threw = false;
    try {
      void* p = nullptr;
      switch (form) {
        case 0: p = ::operator new(Opaque(kTooBig)); break;
        case 1: p = ::operator new[](Opaque(kTooBig)); break;
        case 2: p = ::operator new(Opaque(kTooBig), std::align_val_t{64}); break;
        case 3: p = ::operator new[](Opaque(kTooBig), std::align_val_t{64}); break;
      }
      ADD_FAILURE() << "form " << form << " returned " << p;
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    EXPECT_TRUE(threw) << "form " << form;
    EXPECT_EQ(g_handler_calls, 3) << "form " << form
                                  << ": the new-handler loop must retry until the handler "
                                     "is removed";
  }
}

struct HandlerException : std::bad_alloc {
  const char* what() const noexcept override { return "HandlerException"; }
};

void ThrowingHandler() {
  ++g_handler_calls;
  throw HandlerException();
}

TEST(NewHandler, ExceptionFromTheHandlerPropagates) {
  ScopedNewHandler handler(ThrowingHandler);
  for (int form = 0; form < 4; ++form) {
    g_handler_calls = 0;
    bool caught = false;
    try {
      switch (form) {
        case 0: (void)::operator new(Opaque(kTooBig)); break;
        case 1: (void)::operator new[](Opaque(kTooBig)); break;
        case 2: (void)::operator new(Opaque(kTooBig), std::align_val_t{128}); break;
        case 3: (void)::operator new[](Opaque(kTooBig), std::align_val_t{128}); break;
      }
    } catch (const HandlerException&) {
      caught = true;
    } catch (const std::bad_alloc&) {
      ADD_FAILURE() << "form " << form << ": got a plain bad_alloc, not the handler's exception";
    }
    EXPECT_TRUE(caught) << "form " << form;
    EXPECT_EQ(g_handler_calls, 1) << "form " << form;
  }
}

TEST(NewHandler, NothrowNewCallsTheHandlerAndSwallowsItsException) {
  // Default behaviour of the nothrow forms ([new.delete.single]/8): call the throwing form and
  // return nullptr if it throws.
  ScopedNewHandler handler(ThrowingHandler);
  g_handler_calls = 0;
  EXPECT_EQ(::operator new(Opaque(kTooBig), std::nothrow), nullptr);
  EXPECT_EQ(::operator new[](Opaque(kTooBig), std::nothrow), nullptr);
  EXPECT_EQ(::operator new(Opaque(kTooBig), std::align_val_t{64}, std::nothrow), nullptr);
  EXPECT_EQ(::operator new[](Opaque(kTooBig), std::align_val_t{64}, std::nothrow), nullptr);
  EXPECT_EQ(g_handler_calls, 4) << "each nothrow form should consult the new-handler once";
}

void* g_reserve = nullptr;

void ReleaseReserveHandler() {
  ++g_handler_calls;
  free(g_reserve);
  g_reserve = nullptr;
  std::set_new_handler(nullptr);
}

size_t VirtualSizeBytes() {
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long total = 0;
  const int got = fscanf(f, "%lu", &total);
  fclose(f);
  return got == 1 ? total * tcm_test::PageSize() : 0;
}

TEST(NewHandler, HandlerThatFreesMemoryLetsTheAllocationSucceed) {
  // In a child: cap the address space, hold a 64 MiB reserve, then ask operator new for another
  // 64 MiB. The first attempt fails; the handler frees the reserve and the retry must succeed.
  fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    constexpr size_t kChunk = 64 * kMiB;
    g_reserve = malloc(Opaque(kChunk));
    if (g_reserve == nullptr) _exit(10);
    memset(g_reserve, 1, kChunk);
    struct rlimit lim;
    lim.rlim_cur = lim.rlim_max = VirtualSizeBytes() + 32 * kMiB;
    if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(11);
    g_handler_calls = 0;
    std::set_new_handler(ReleaseReserveHandler);
    try {
      void* p = ::operator new(Opaque(kChunk));
      memset(p, 2, kChunk);
      ::operator delete(p);
    } catch (const std::bad_alloc&) {
      _exit(12);
    }
    _exit(g_handler_calls == 1 ? 0 : 13);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10/11: setup failed; 12: bad_alloc although the handler freed 64 MiB; "
         "13: handler not called exactly once";
}

// ---- sized delete with a wrong size -------------------------------------------------------

// After sized deletes that lie about the size, allocates plenty of blocks in every size class
// involved and checks that none overlaps another (a block filed under a too-large class would).
// Returns false on corruption.
bool HeapStillConsistent(const std::vector<size_t>& sizes) {
  struct Block {
    void* p;
    size_t n;
    uint32_t seed;
  };
  std::vector<Block> blocks;
  uint32_t seed = 1;
  for (int round = 0; round < 200; ++round) {
    for (size_t n : sizes) {
      if (n > 64 * 1024 && round >= 4) continue;  // a few large ones suffice
      void* p = ::operator new(n);
      FillPattern(p, n, seed);
      blocks.push_back({p, n, seed++});
    }
  }
  bool ok = true;
  for (const Block& b : blocks) ok = ok && CheckPattern(b.p, b.n, b.seed);
  for (const Block& b : blocks) ::operator delete(b.p, b.n);
  return ok;
}

TEST(SizedDelete, WrongSizeDoesNotCrashOrCorrupt) {
  // Runs in a child so that a crash fails this test only. (gperftools trusts the size and
  // crashes here; our allocator must not.)
  const struct {
    size_t actual, claimed;
  } lies[] = {{100, 50},   {100, 1000},  {8, 4096},      {4096, 8},     {kMiB, 10},
              {10, kMiB},  {300000, 262144 + 8}, {262144 + 8, 300000}, {48, 49}, {1000, 0}};
  for (const auto& l : lies) {
    fflush(nullptr);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int i = 0; i < 50; ++i) {
        void* p = ::operator new(Opaque(l.actual));
        memset(p, 0x77, l.actual);
        ::operator delete(p, Opaque(l.claimed));
        void* q = ::operator new[](Opaque(l.actual));
        ::operator delete[](q, Opaque(l.claimed));
        void* r = ::operator new(Opaque(l.actual), std::align_val_t{64});
        ::operator delete(r, Opaque(l.claimed), std::align_val_t{64});
      }
      std::vector<size_t> sizes = {l.actual};
      if (l.claimed != 0) sizes.push_back(l.claimed);
      _exit(HeapStillConsistent(sizes) ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status)) {
      ADD_FAILURE() << "new(" << l.actual << ") + sized delete(" << l.claimed
                    << "): crashed with signal " << WTERMSIG(status);
    } else {
      EXPECT_EQ(WEXITSTATUS(status), 0) << "new(" << l.actual << ") + sized delete("
                                        << l.claimed << "): later blocks overlap (heap corrupted)";
    }
  }
}

}  // namespace
