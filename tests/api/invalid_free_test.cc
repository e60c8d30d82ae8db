// Invalid frees must abort loudly instead of corrupting the heap. Each case runs in a death-test
// child that must die of SIGABRT with our diagnostic on stderr:
//   free() of a stack address, a global, or an address in an mmap'ed region the allocator does
//   not own  ->  "tcmalloc: free(): invalid pointer"
//   double free of a large (> 256 KiB) block  ->  a message containing "double free" or
//   "invalid pointer".
// These messages are OUR allocator's contract, not gperftools': gperftools prints
// "Attempt to free invalid pointer" (and does not detect every case), so against gperftools these
// tests are expected to fail.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "test_util.h"

namespace {

using tcm_test::Opaque;

constexpr char kInvalidPointer[] = "tcmalloc: free\\(\\): invalid pointer";
constexpr char kDoubleFreeOrInvalid[] = "double free|invalid pointer";

alignas(64) char g_global_buffer[4096];

// Death-test children should not leave core files behind.
void NoCoreDump() {
  struct rlimit none = {0, 0};
  setrlimit(RLIMIT_CORE, &none);
}

void FreeStackAddress() {
  NoCoreDump();
  alignas(64) char buffer[256];
  memset(buffer, 1, sizeof(buffer));
  free(Opaque(static_cast<void*>(buffer)));
}

void FreeGlobal() {
  NoCoreDump();
  free(Opaque(static_cast<void*>(g_global_buffer)));
}

void FreeForeignMmapRegion() {
  NoCoreDump();
  const size_t len = 1024 * 1024;
  void* region = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) _exit(99);
  free(Opaque(static_cast<char*>(region) + 8192));
}

void DoubleFreeLarge() {
  NoCoreDump();
  void* p = malloc(Opaque(size_t{1024 * 1024}));
  memset(p, 1, 1024 * 1024);
  free(p);
  free(Opaque(p));
}

// realloc answers a large block that still fits from the length recorded in its first
// page's class-map entry (PageMap::SetLargeLength). A freed block's entry must be cleared,
// and only the first page may carry one: otherwise these two would return p silently.
void ReallocFreedLarge() {
  NoCoreDump();
  char* p = static_cast<char*>(malloc(Opaque(size_t{1024 * 1024})));
  memset(p, 1, 1024 * 1024);
  free(p);
  void* q = realloc(Opaque(p), Opaque(size_t{900 * 1024}));
  fprintf(stderr, "not caught: realloc returned %p\n", q);
}

void ReallocLargeSecondPage() {
  NoCoreDump();
  char* p = static_cast<char*>(malloc(Opaque(size_t{1024 * 1024})));
  memset(p, 1, 1024 * 1024);
  void* q = realloc(Opaque(p + 8192), Opaque(size_t{900 * 1024}));
  fprintf(stderr, "not caught: realloc returned %p\n", q);
}

TEST(InvalidFreeDeathTest, StackAddressAborts) {
  EXPECT_EXIT(FreeStackAddress(), testing::KilledBySignal(SIGABRT), kInvalidPointer);
}

TEST(InvalidFreeDeathTest, GlobalAborts) {
  EXPECT_EXIT(FreeGlobal(), testing::KilledBySignal(SIGABRT), kInvalidPointer);
}

TEST(InvalidFreeDeathTest, PointerIntoForeignMmapRegionAborts) {
  EXPECT_EXIT(FreeForeignMmapRegion(), testing::KilledBySignal(SIGABRT), kInvalidPointer);
}

TEST(InvalidFreeDeathTest, DoubleFreeOfLargeBlockAborts) {
  EXPECT_EXIT(DoubleFreeLarge(), testing::KilledBySignal(SIGABRT), kDoubleFreeOrInvalid);
}

TEST(InvalidFreeDeathTest, ReallocOfAFreedLargeBlockAborts) {
  EXPECT_EXIT(ReallocFreedLarge(), testing::KilledBySignal(SIGABRT), "realloc\\(\\): invalid pointer");
}

TEST(InvalidFreeDeathTest, ReallocOfALargeBlocksSecondPageAborts) {
  EXPECT_EXIT(ReallocLargeSecondPage(), testing::KilledBySignal(SIGABRT), "realloc\\(\\): invalid pointer");
}

TEST(InvalidFreeDeathTest, HeapStillWorksInTheParent) {
  // The death tests above ran in children; this process's heap must be untouched.
  void* p = malloc(Opaque(size_t{1024 * 1024}));
  ASSERT_NE(p, nullptr);
  free(p);
}

}  // namespace
