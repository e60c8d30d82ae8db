// Release-build hardening (issue 15): misuse of small blocks that used to be accepted
// silently must now abort with a one-line diagnosis naming the pointer. Each case runs in a
// death-test child. Objects reach the checks when the front end hands them back to the
// central list (Flush() here; a thread's exit, a full list or cache in real programs).
//
// Registered twice: api_hardening with the per-thread caches (TCMALLOC_PER_CPU_CACHES=0),
// where every test runs, and api_hardening_per_cpu with the default front end, where the
// tests that depend on per-thread lists skip themselves.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <new>
#include <vector>

#include <gperftools/malloc_extension.h>
#include <gperftools/malloc_extension_c.h>

#include "test_util.h"

namespace {

using tcm_test::Opaque;

void NoCoreDump() {
  struct rlimit none = {0, 0};
  setrlimit(RLIMIT_CORE, &none);
}

// Guarded sampling catches some of the same misuse on its own pages, with its own message. A
// sample lands wherever the byte countdown (and the guarded rate's time bound) puts it, so a
// death-test child could take a guarded block where the test means a span's object (CI saw
// it once: a 3000-byte block's double free reported as the guarded path's). The checks under
// test here are the spans', so guarded sampling is off.
[[maybe_unused]] const bool kGuardedSamplingOff =
    MallocExtension_SetNumericProperty("tcmalloc.guarded_sample_rate", 0) != 0;

// Hands everything the calling thread's cache or the CPU caches hold to the central lists.
void Flush() {
  MallocExtension_MarkThreadIdle();
  MallocExtension_ReleaseFreeMemory();
}

bool PerCpuFrontEnd() {
  size_t active = 0;
  return MallocExtension::instance()->GetNumericProperty("tcmalloc.per_cpu_caches_active", &active) && active != 0;
}

// A double free reaches the central list either as the same block twice (per-thread lists
// keep both copies) or as a chain cut short where the block's link was written twice
// (per-CPU arrays link their blocks only when they hand them over).
constexpr char kDoubleFree[] = "invalid pointer 0x[0-9a-f]+ \\((double free|a chain of [0-9]+ blocks.*freed twice)";

// Frees p + offset (p a fresh block of `size` bytes) and hands the cache back.
void FreeInterior(size_t size, size_t offset) {
  NoCoreDump();
  char* p = static_cast<char*>(malloc(Opaque(size)));
  if (p == nullptr) _exit(99);
  free(Opaque(p + offset));
  Flush();
  _exit(0);  // not reached when detected
}

TEST(HardeningDeathTest, InteriorFreeAtEveryOffsetKind) {
  // One size per kind of class (8 B, the 16-byte steps, each power-of-two band, the largest)
  // and offsets: unaligned, one word, the middle, the last word.
  const size_t sizes[] = {8, 16, 48, 100, 1000, 4096, 40000, 200000, 256 * 1024};
  for (size_t size : sizes) {
    const size_t cls = nallocx(size, 0);
    const size_t offsets[] = {1, 8, (cls / 2) & ~size_t{7}, cls - 8};
    for (size_t offset : offsets) {
      if (offset == 0 || offset >= cls) continue;
      SCOPED_TRACE(testing::Message() << "size " << size << " offset " << offset);
      EXPECT_EXIT(FreeInterior(size, offset), testing::KilledBySignal(SIGABRT),
                  "invalid pointer 0x[0-9a-f]+ \\([0-9]+ bytes into a block of size class [0-9]+");
    }
  }
}

// Issue 15's example, with nothing after the free but the next malloc of the class: no
// batch moves, so only free() itself can see the interior pointer. Before free() tested for
// a block's first byte, that malloc returned p + 16 (overlapping the live block p) in both
// modes, and a per-CPU cache that never overflowed never reported it at all.
void FreeInteriorThenMalloc() {
  NoCoreDump();
  char* p = static_cast<char*>(malloc(Opaque(size_t{100})));
  free(Opaque(p + 16));
  char* q = static_cast<char*>(malloc(Opaque(size_t{100})));
  fprintf(stderr, "not caught: malloc returned %p for the live block %p\n", static_cast<void*>(q), static_cast<void*>(p));
  _exit(0);
}

TEST(HardeningDeathTest, InteriorFreeIsCaughtAtTheFreeItself) {
  EXPECT_EXIT(FreeInteriorThenMalloc(), testing::KilledBySignal(SIGABRT),
              "^tcmalloc: free\\(\\): invalid pointer 0x[0-9a-f]+ \\(16 bytes into a block of size class [0-9]+, "
              "112 bytes\\)\n$");
}

// The same test in realloc (in place and moving: the moving path copied the class size
// from the interior pointer, past the block's end) and in sized operator delete.
void ReallocInterior(size_t new_size) {
  NoCoreDump();
  char* p = static_cast<char*>(malloc(Opaque(size_t{100})));
  void* q = realloc(Opaque(p + 16), Opaque(new_size));
  fprintf(stderr, "not caught: realloc returned %p\n", q);
  _exit(0);
}

void SizedDeleteInterior() {
  NoCoreDump();
  char* p = static_cast<char*>(::operator new(Opaque(size_t{100})));
  ::operator delete(Opaque(p + 32), size_t{68});
  fprintf(stderr, "not caught\n");
  _exit(0);
}

TEST(HardeningDeathTest, InteriorReallocAndSizedDeleteAreCaughtAtOnce) {
  EXPECT_EXIT(ReallocInterior(90), testing::KilledBySignal(SIGABRT),
              "^tcmalloc: realloc\\(\\): invalid pointer 0x[0-9a-f]+ \\(16 bytes into a block of size class [0-9]+, "
              "112 bytes\\)\n$");
  EXPECT_EXIT(ReallocInterior(5000), testing::KilledBySignal(SIGABRT),
              "^tcmalloc: realloc\\(\\): invalid pointer 0x[0-9a-f]+ \\(16 bytes into a block");
  EXPECT_EXIT(SizedDeleteInterior(), testing::KilledBySignal(SIGABRT),
              "^tcmalloc: free\\(\\): invalid pointer 0x[0-9a-f]+ \\(32 bytes into a block");
}

// Every block start of a span passes, for every class: the test must never reject a good
// pointer (a false alarm aborts a correct program). Blocks from memalign's aligned classes
// too, and blocks in spans of several pages, whose pages hold the span's start, not their
// own.
TEST(HardeningTest, EveryBlockOfEveryClassPasses) {
  for (size_t size = 8; size <= 256 * 1024; size = nallocx(size + 1, 0)) {
    const size_t count = size <= 1024 ? 600 : size <= 16384 ? 64 : 6;  // several spans, several pages
    std::vector<void*> blocks;
    for (size_t i = 0; i < count; ++i) blocks.push_back(malloc(Opaque(size)));
    for (void* b : blocks) free(Opaque(b));
    for (size_t i = 0; i < count; ++i) blocks[i] = realloc(malloc(Opaque(size)), Opaque(size));
    for (void* b : blocks) free(Opaque(b));
  }
  for (size_t align : {32, 64, 256, 4096}) {
    for (size_t size : {1, 40, 100, 1000, 5000}) {
      void* p = nullptr;
      ASSERT_EQ(posix_memalign(&p, align, size), 0);
      free(Opaque(p));
    }
  }
}

// The two misuses free()'s block-start test cannot tell from a correct free (README,
// "Misuse"), caught when the front end hands its objects back. A pointer into a span's tail
// at a multiple of the size: the 48-byte class's one-page spans hold 170 blocks and a
// 32-byte tail at offset 8160 = 170 * 48.
void FreeSpanTail() {
  NoCoreDump();
  char* p = static_cast<char*>(malloc(Opaque(size_t{48})));
  if (p == nullptr || nallocx(48, 0) != 48) _exit(99);
  char* page = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t{8191});
  free(Opaque(page + 8160));
  fprintf(stderr, "free() took the tail\n");
  Flush();
  _exit(0);
}

TEST(HardeningDeathTest, FreeIntoASpansTailIsCaughtWhenTheCacheHandsItBack) {
  EXPECT_EXIT(FreeSpanTail(), testing::KilledBySignal(SIGABRT),
              "free\\(\\) took the tail\n.*invalid pointer 0x[0-9a-f]+ \\(past the last block of its span");
}

// free(p + size) of a block whose neighbour is live: to the allocator that is the
// neighbour's free, so the neighbour's own free later is a double free.
void FreeOfTheNextBlock() {
  NoCoreDump();
  std::vector<char*> blocks;
  for (int i = 0; i < 64; ++i) blocks.push_back(static_cast<char*>(malloc(Opaque(size_t{64}))));
  char* a = nullptr;
  for (char* x : blocks)
    for (char* y : blocks)
      if (y == x + 64) a = x;
  if (a == nullptr) _exit(99);
  free(Opaque(a + 64));  // the live neighbour
  fprintf(stderr, "free() took the neighbour\n");
  free(a);               // a correct free in between: the double free is not on top
  free(a + 64);          // the neighbour's owner frees it
  Flush();
  _exit(0);
}

TEST(HardeningDeathTest, FreeOfTheNextBlocksStartIsCaughtAsItsDoubleFree) {
  EXPECT_EXIT(FreeOfTheNextBlock(), testing::KilledBySignal(SIGABRT), std::string("free\\(\\) took the neighbour\n.*") + kDoubleFree);
}

// Frees every object of a span's worth of blocks so the span goes back to the page heap,
// then frees one of those pointers again.
void FreeIntoFreedSpan(size_t which) {
  NoCoreDump();
  constexpr int kCount = 4096;
  static void* blocks[kCount];
  for (int i = 0; i < kCount; ++i) blocks[i] = malloc(Opaque(size_t{2048}));
  for (int i = 0; i < kCount; ++i) free(blocks[i]);
  Flush();
  free(Opaque(blocks[which]));
  Flush();
  _exit(0);
}

TEST(HardeningDeathTest, FreeIntoFreedSpan) {
  for (size_t which : {size_t{0}, size_t{5}, size_t{4095}}) {
    SCOPED_TRACE(which);
    EXPECT_EXIT(FreeIntoFreedSpan(which), testing::KilledBySignal(SIGABRT), "invalid pointer 0x[0-9a-f]+");
  }
}

// free(a); free(b); free(a): the second free of a is not at the list's head, so the fast path
// takes it; the span notices when the objects come back.
void DoubleFreeSeparated(size_t size, int between) {
  NoCoreDump();
  void* keep = malloc(Opaque(size));  // keeps the span alive
  void* a = malloc(Opaque(size));
  void* others[16];
  for (int i = 0; i < between; ++i) others[i] = malloc(Opaque(size));
  free(a);
  for (int i = 0; i < between; ++i) free(others[i]);
  free(Opaque(a));
  Flush();
  free(keep);
  _exit(0);
}

TEST(HardeningDeathTest, DoubleFreeSeparatedByOtherFrees) {
  for (size_t size : {size_t{16}, size_t{96}, size_t{3000}})
    for (int between : {1, 2, 15}) {
      SCOPED_TRACE(testing::Message() << "size " << size << " between " << between);
      EXPECT_EXIT(DoubleFreeSeparated(size, between), testing::KilledBySignal(SIGABRT), kDoubleFree);
    }
}

// The same, detected when the thread that did it exits.
void* DoubleFreeThenExit(void*) {
  void* a = malloc(Opaque(size_t{64}));
  void* b = malloc(Opaque(size_t{64}));
  free(a);
  free(b);
  free(Opaque(a));
  return nullptr;
}

void DoubleFreeInExitingThread() {
  NoCoreDump();
  void* keep = malloc(Opaque(size_t{64}));
  pthread_t t;
  pthread_create(&t, nullptr, DoubleFreeThenExit, nullptr);
  pthread_join(t, nullptr);
  free(keep);
  _exit(0);
}

TEST(HardeningDeathTest, DoubleFreeCaughtAtThreadExit) {
  if (PerCpuFrontEnd()) GTEST_SKIP() << "a thread's exit flushes only per-thread caches";
  EXPECT_EXIT(DoubleFreeInExitingThread(), testing::KilledBySignal(SIGABRT), "invalid pointer 0x[0-9a-f]+ \\(double free");
}

// A use-after-free write of a chosen address into a block that sits free in its span:
// later allocations must not hand that address out.
alignas(64) char g_target[4096];

void UseAfterFreeWriteThenAllocate(size_t size) {
  NoCoreDump();
  // On one CPU throughout: central lists are sharded by CPU, and a thread that moved
  // between freeing and allocating would allocate from the other shard's spans and never
  // meet the blocks it wrote to (seen in CI: a clean exit).
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  sched_setaffinity(0, sizeof one, &one);
  constexpr int kCount = 64;
  void* blocks[kCount];
  for (int i = 0; i < kCount; ++i) blocks[i] = malloc(Opaque(size));
  for (int i = 1; i < kCount; ++i) free(blocks[i]);
  Flush();  // the freed blocks are now free in their span
  for (int i = 1; i < kCount; ++i) *static_cast<void**>(Opaque(blocks[i])) = g_target;
  for (int i = 0; i < 4 * kCount; ++i) {
    void* p = malloc(Opaque(size));
    if (p >= static_cast<void*>(g_target) && p < static_cast<void*>(g_target + sizeof(g_target))) _exit(1);
  }
  _exit(0);
}

// The 8-byte class's spans keep encoded lists: the forged word decodes to garbage, which
// the check as objects leave the span reports.
TEST(HardeningDeathTest, UseAfterFreeWriteOnSpanListIsDetected) {
  // Per-CPU caches refill through chains too: there the forged word may be met as a chain
  // link first, and the fault it causes inside the allocator is what is reported.
  EXPECT_EXIT(UseAfterFreeWriteThenAllocate(8), testing::KilledBySignal(SIGABRT),
              "corrupted free list of size class [0-9]+ \\(8 bytes\\): the free block 0x[0-9a-f]+ links to|"
              "inside the allocator.*a free list was corrupted");
}

// Larger classes keep a span's free blocks as a bitmap: nothing is read from them, so the
// write changes nothing and the program runs on.
TEST(HardeningDeathTest, UseAfterFreeWriteIntoABitmapSpanIsHarmless) {
  EXPECT_EXIT(UseAfterFreeWriteThenAllocate(48), testing::ExitedWithCode(0), "");
}

// The same write into a block still in the thread's own list: the forged link decodes to an
// unpredictable address, so the outcome is an abort or a fault, never the chosen address.
void UseAfterFreeWriteInThreadCache() {
  NoCoreDump();
  // Grow the thread's list for the class first, so the frees below stay in it (a block
  // that reaches its span is kept in a bitmap there, where the write would change nothing).
  static void* warm[256];
  for (int round = 0; round < 4; ++round) {
    for (void*& w : warm) w = malloc(Opaque(size_t{48}));
    for (void* w : warm) free(w);
  }
  void* blocks[8];
  for (auto& b : blocks) b = malloc(Opaque(size_t{48}));
  for (auto& b : blocks) free(b);
  *static_cast<void**>(Opaque(blocks[7])) = g_target;  // the list's head
  for (int i = 0; i < 64; ++i) {
    void* p = malloc(Opaque(size_t{48}));
    if (p >= static_cast<void*>(g_target) && p < static_cast<void*>(g_target + sizeof(g_target))) _exit(1);
    if (p != nullptr) memset(p, 0x5a, 48);
  }
  Flush();
  _exit(0);
}

// A block freed while still in use: the program's next write forges its link in the
// thread's list, and the pop after it faults inside malloc, which is reported as such.
void FreeWhileInUseThenWrite() {
  NoCoreDump();
  // Grow the thread's list for the class first, so the frees below stay in it.
  static void* warm[256];
  for (int round = 0; round < 4; ++round) {
    for (void*& w : warm) w = malloc(Opaque(size_t{64}));
    for (void* w : warm) free(w);
  }
  char* a = static_cast<char*>(malloc(Opaque(size_t{64})));
  char* b = static_cast<char*>(malloc(Opaque(size_t{64})));
  free(b);
  free(a);
  free(Opaque(b));  // double free: b is on the list twice, the list is b a b ...
  char* x = static_cast<char*>(malloc(Opaque(size_t{64})));  // b
  memset(x, 0xa5, 64);  // the program uses it, over b's link word
  for (int i = 0; i < 4; ++i) Opaque(malloc(Opaque(size_t{64})));
  _exit(0);
}

TEST(HardeningDeathTest, FaultOnAForgedLinkInsideMallocIsDiagnosed) {
  if (PerCpuFrontEnd()) GTEST_SKIP() << "per-CPU arrays do not link their blocks";
  EXPECT_EXIT(FreeWhileInUseThenWrite(), testing::KilledBySignal(SIGABRT),
              "fault at pc 0x[0-9a-f]+ (reading 0x[0-9a-f]+ )?inside the allocator.*: a free list was corrupted");
}

bool AbortedOrFaulted(int status) {
  return WIFSIGNALED(status) && (WTERMSIG(status) == SIGABRT || WTERMSIG(status) == SIGSEGV);
}

TEST(HardeningDeathTest, UseAfterFreeWriteInThreadCacheNeverRedirects) {
  if (PerCpuFrontEnd()) GTEST_SKIP() << "per-CPU arrays do not link their blocks";
  EXPECT_EXIT(UseAfterFreeWriteInThreadCache(), AbortedOrFaulted, "");
}

// Registered a second time with TCMALLOC_HARDENED=0 (api_hardening_off): the same interior
// free then goes unnoticed, which is what the switch promises (and shows it is the switch
// that makes the difference in the tests above).
void InteriorFreeUnchecked() {
  NoCoreDump();
  // The switch passes every block of a real class, never class 0: nullptr, large blocks and
  // reallocs still take their own paths.
  free(Opaque(static_cast<void*>(nullptr)));
  free(Opaque(malloc(Opaque(size_t{1} << 20))));
  free(Opaque(realloc(Opaque(malloc(Opaque(size_t{40}))), Opaque(size_t{300000}))));
  char* p = static_cast<char*>(malloc(Opaque(size_t{100})));
  free(Opaque(p + 16));
  Flush();
  _exit(7);
}

TEST(HardeningOffTest, InteriorFreeIsNotCheckedWhenSwitchedOff) {
  size_t hardened = 1;
  ASSERT_TRUE(MallocExtension::instance()->GetNumericProperty("tcmalloc.hardened", &hardened));
  if (hardened != 0) GTEST_SKIP() << "runs under TCMALLOC_HARDENED=0 (ctest api_hardening_off)";
  EXPECT_EXIT(InteriorFreeUnchecked(), testing::ExitedWithCode(7), "");
}

// The death tests above rely on it (see kGuardedSamplingOff).
TEST(HardeningTest, GuardedSamplingIsOff) {
  size_t rate = 1;
  ASSERT_TRUE(kGuardedSamplingOff);
  ASSERT_TRUE(MallocExtension_GetNumericProperty("tcmalloc.guarded_sample_rate", &rate));
  EXPECT_EQ(rate, 0u);
}

TEST(HardeningTest, HeapStillWorksInTheParent) {
  void* p = malloc(Opaque(size_t{100}));
  ASSERT_NE(p, nullptr);
  free(p);
}

}  // namespace
