// Guarded sampling (issue 15): run with TCMALLOC_GUARDED_SAMPLE_RATE=1, so every small
// allocation is sampled while guarded slots are free. Each misuse runs in a death-test
// child that must die of SIGABRT with the right kind and the allocation's (and, after a
// free, the deallocation's) stack, whose first frame is in this program.
#include <gtest/gtest.h>
#include <chrono>
#include <signal.h>
#include <sys/resource.h>

#include <gperftools/malloc_extension.h>

#include "test_util.h"

namespace {

using tcm_test::Opaque;

constexpr size_t kPage = 8192;  // the guarded slot size

void NoCoreDump() {
  struct rlimit none = {0, 0};
  setrlimit(RLIMIT_CORE, &none);
}

size_t Property(const char* name) {
  size_t v = 0;
  EXPECT_TRUE(MallocExtension::instance()->GetNumericProperty(name, &v)) << name;
  return v;
}

// A guarded block of `size` bytes whose end (right = true) or start touches a guard page.
char* GuardedBlock(size_t size, bool right) {
  for (int tries = 0; tries < 4; ++tries) {
    char* p = static_cast<char*>(malloc(Opaque(size)));
    const bool left_aligned = reinterpret_cast<uintptr_t>(p) % kPage == 0;
    const bool right_aligned = (reinterpret_cast<uintptr_t>(p) + size) % kPage == 0;
    if (right ? right_aligned : left_aligned) return p;
  }
  return nullptr;
}

TEST(GuardedSampling, RateIsTheEnvironmentsAndEveryBlockIsGuarded) {
  EXPECT_EQ(Property("tcmalloc.guarded_sample_rate"), 1u);
  const size_t before = Property("tcmalloc.guarded_allocations");
  void* a = malloc(Opaque(size_t{64}));
  void* b = malloc(Opaque(size_t{64}));
  EXPECT_EQ(Property("tcmalloc.guarded_allocations"), before + 2);
  // Alternately against the right guard and the left one.
  const bool a_right = (reinterpret_cast<uintptr_t>(a) + 64) % kPage == 0;
  const bool b_right = (reinterpret_cast<uintptr_t>(b) + 64) % kPage == 0;
  EXPECT_NE(a_right, b_right);
  EXPECT_EQ(malloc_usable_size(a), 64u);  // the class size, as nallocx says
  // Ours by any of its bytes, like every other block (soak tests and the checker ask).
  EXPECT_EQ(MallocExtension::instance()->GetOwnership(a), MallocExtension::kOwned);
  EXPECT_EQ(MallocExtension::instance()->GetOwnership(static_cast<char*>(a) + 63), MallocExtension::kOwned);
  memset(a, 1, 64);
  memset(b, 2, 64);
  free(a);
  free(b);
}

TEST(GuardedSampling, UsableSizeIsTheClassSizeAndReallocMovesData) {
  char* p = static_cast<char*>(malloc(Opaque(size_t{100})));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(malloc_usable_size(p), nallocx(100, 0));
  memset(p, 7, 100);
  p = static_cast<char*>(realloc(p, 5000));
  ASSERT_NE(p, nullptr);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(p[i], 7);
  p = static_cast<char*>(realloc(p, 20000));  // beyond a slot: an ordinary block
  ASSERT_NE(p, nullptr);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(p[i], 7);
  free(p);
  void* z = calloc(Opaque(size_t{10}), 30);
  for (int i = 0; i < 300; ++i) ASSERT_EQ(static_cast<char*>(z)[i], 0);
  free(z);
}

TEST(GuardedSampling, ThePoolBoundsItsMemory) {
  static void* blocks[1000];
  const size_t live_before = Property("tcmalloc.guarded_live_allocations");
  for (void*& p : blocks) p = malloc(Opaque(size_t{32}));
  const size_t live = Property("tcmalloc.guarded_live_allocations");
  EXPECT_EQ(live, 128u);  // every slot taken; the other blocks are ordinary ones
  EXPECT_EQ(Property("tcmalloc.guarded_resident_bytes"), live * kPage);
  for (void* p : blocks) free(p);
  EXPECT_EQ(Property("tcmalloc.guarded_live_allocations"), live_before);
}

TEST(GuardedSampling, RateZeroStopsSampling) {
  ASSERT_TRUE(MallocExtension::instance()->SetNumericProperty("tcmalloc.guarded_sample_rate", 0));
  free(malloc(Opaque(size_t{64})));  // the countdown armed before the change runs out
  const size_t before = Property("tcmalloc.guarded_allocations");
  for (int i = 0; i < 100; ++i) free(malloc(Opaque(size_t{64})));
  EXPECT_EQ(Property("tcmalloc.guarded_allocations"), before);
  ASSERT_TRUE(MallocExtension::instance()->SetNumericProperty("tcmalloc.guarded_sample_rate", 1));
}

// Guarded blocks are also spaced in time (rate / 10 bytes per ns apart: 6.7 ms at the
// default 64 MiB), so a program that allocates far faster than it could touch the memory
// does not pay a guarded block per 64 MiB. Not a timing assertion: the bound is computed
// from the elapsed time, whatever it was; without the spacing this loop makes ~32.
TEST(GuardedSampling, BlocksAreSpacedInTimeAtLargeRates) {
  const size_t rate = size_t{64} << 20;
  ASSERT_TRUE(MallocExtension::instance()->SetNumericProperty("tcmalloc.guarded_sample_rate", rate));
  free(malloc(Opaque(size_t{64})));  // the countdown armed at rate 1 runs out
  const size_t before = Property("tcmalloc.guarded_allocations");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < (1 << 19); ++i) free(malloc(Opaque(size_t{4096})));  // 2 GiB
  const double elapsed_ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  const size_t made = Property("tcmalloc.guarded_allocations") - before;
  const double spacing_ns = static_cast<double>(rate) / 10;
  // +2: the first may come at once, and the coarse clock rounds.
  EXPECT_LE(static_cast<double>(made), elapsed_ns / spacing_ns + 2) << made << " in " << elapsed_ns / 1e6 << " ms";
  ASSERT_TRUE(MallocExtension::instance()->SetNumericProperty("tcmalloc.guarded_sample_rate", 1));
}

void OverflowByOne() {
  NoCoreDump();
  char* p = GuardedBlock(64, /*right=*/true);
  if (p == nullptr) _exit(2);
  Opaque(p)[64] = 1;
  _exit(0);
}

TEST(GuardedSamplingDeathTest, OneByteOverflow) {
  EXPECT_EXIT(OverflowByOne(), testing::KilledBySignal(SIGABRT),
              "heap-buffer-overflow at 0x[0-9a-f]+: 0 bytes after the 64-byte block 0x[0-9a-f]+.*\n"
              "  allocated by:\n    #0 0x[0-9a-f]+ [^\n]*api_guarded_test");
}

void Underflow() {
  NoCoreDump();
  char* p = GuardedBlock(48, /*right=*/false);
  if (p == nullptr) _exit(2);
  Opaque(p)[-1] = 1;
  _exit(0);
}

TEST(GuardedSamplingDeathTest, Underflow) {
  EXPECT_EXIT(Underflow(), testing::KilledBySignal(SIGABRT),
              "heap-buffer-underflow at 0x[0-9a-f]+: 1 bytes before the 48-byte block.*\n"
              "  allocated by:\n    #0 0x[0-9a-f]+ [^\n]*api_guarded_test");
}

void UseAfterFree() {
  NoCoreDump();
  char* p = static_cast<char*>(malloc(Opaque(size_t{100})));
  p[10] = 1;
  free(p);
  _exit(Opaque(p)[10]);
}

TEST(GuardedSamplingDeathTest, UseAfterFreeShowsBothStacks) {
  EXPECT_EXIT(UseAfterFree(), testing::KilledBySignal(SIGABRT),
              "use-after-free at 0x[0-9a-f]+: 10 bytes into the 112-byte block.*\n"
              "  allocated by:\n    #0 0x[0-9a-f]+ [^\n]*api_guarded_test.*\n"
              "  freed by:\n    #0 0x[0-9a-f]+ [^\n]*api_guarded_test");
}

void DoubleFree() {
  NoCoreDump();
  void* p = malloc(Opaque(size_t{200}));
  free(p);
  free(Opaque(p));
  _exit(0);
}

TEST(GuardedSamplingDeathTest, DoubleFree) {
  EXPECT_EXIT(DoubleFree(), testing::KilledBySignal(SIGABRT),
              "double-free at 0x[0-9a-f]+.*allocated by:.*freed by:");
}

// Faults that are not ours reach the program's own handler...
void OwnHandler(int) { _exit(42); }

void ForeignFaultWithHandler() {
  NoCoreDump();
  signal(SIGSEGV, OwnHandler);
  void* p = malloc(Opaque(size_t{64}));  // guarded: our handler goes in, chained to the program's
  free(p);
  *Opaque(reinterpret_cast<volatile int*>(16)) = 1;
  _exit(0);
}

TEST(GuardedSamplingDeathTest, OtherFaultsReachTheProgramsHandler) {
  EXPECT_EXIT(ForeignFaultWithHandler(), testing::ExitedWithCode(42), "");
}

// ...or, without one, the default action.
void ForeignFaultWithoutHandler() {
  NoCoreDump();
  free(malloc(Opaque(size_t{64})));
  *Opaque(reinterpret_cast<volatile int*>(16)) = 1;
  _exit(0);
}

TEST(GuardedSamplingDeathTest, OtherFaultsGetTheDefaultAction) {
  EXPECT_EXIT(ForeignFaultWithoutHandler(), testing::KilledBySignal(SIGSEGV), "");
}

}  // namespace
