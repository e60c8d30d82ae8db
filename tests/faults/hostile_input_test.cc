// Hostile input: pointers we never returned, double frees, freed pointers passed again,
// absurd sizes and alignments. Each misuse we detect prints one line on stderr and aborts
// (checked in a child process via death tests); the rest returns NULL with errno. The
// README lists what is detected and what is not.
#include <gperftools/malloc_extension.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

void* volatile g_sink;
int g_global;

// Hides where a pointer came from, so the compiler cannot warn or fold the misuse.
void* Launder(void* p) {
  g_sink = p;
  return g_sink;
}

const char kInvalid[] = "tcmalloc: free\\(\\): invalid pointer 0x";

TEST(HostileDeathTest, FreeOfStackGlobalAndForeignMemory) {
  int local;
  EXPECT_DEATH(free(Launder(&local)), kInvalid);
  EXPECT_DEATH(free(Launder(&g_global)), kInvalid);
  void* foreign = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_DEATH(free(Launder(foreign)), kInvalid);
  EXPECT_DEATH(free(Launder(reinterpret_cast<void*>(uintptr_t{1} << 50))), kInvalid);
  EXPECT_DEATH(free(Launder(reinterpret_cast<void*>(0x10))), kInvalid);
  munmap(foreign, 1 << 20);
}

TEST(HostileDeathTest, FreeInsideALargeBlock) {
  char* big = static_cast<char*>(malloc(1 << 20));
  EXPECT_DEATH(free(Launder(big + 16)), kInvalid);
  EXPECT_DEATH(free(Launder(big + 8192)), kInvalid);
  free(big);
}

TEST(HostileDeathTest, DoubleFrees) {
  EXPECT_DEATH(
      {
        void* p = malloc(1 << 20);
        free(p);
        free(Launder(p));
      },
      "tcmalloc: free\\(\\): invalid pointer 0x[0-9a-f]+ \\(double free\\)");
  EXPECT_DEATH(
      {
        void* p = malloc(48);
        free(p);
        free(Launder(p));  // still at the head of this thread's list
      },
      "tcmalloc: free\\(\\): invalid pointer 0x[0-9a-f]+ \\(double free\\)");
}

TEST(HostileDeathTest, ReallocAndUsableSizeOfBadPointers) {
  int local;
  EXPECT_DEATH(g_sink = realloc(Launder(&local), 100), "tcmalloc: realloc\\(\\): invalid pointer 0x");
  EXPECT_DEATH(
      {
        void* p = malloc(1 << 20);
        free(p);
        g_sink = realloc(Launder(p), 100);  // a freed large block
      },
      "tcmalloc: realloc\\(\\): invalid pointer 0x");
  EXPECT_DEATH(g_sink = reinterpret_cast<void*>(malloc_usable_size(Launder(&local))),
               "tcmalloc: malloc_usable_size\\(\\): invalid pointer 0x");
}

TEST(Hostile, AbsurdSizesAndAlignmentsFailCleanly) {
  const size_t sizes[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX / 2, size_t{1} << 62, size_t{1} << 47};
  for (size_t s : sizes) {
    errno = 0;
    EXPECT_EQ(malloc(s), nullptr) << s;
    EXPECT_EQ(errno, ENOMEM) << s;
    errno = 0;
    EXPECT_EQ(calloc(s, 1), nullptr) << s;
    EXPECT_EQ(errno, ENOMEM) << s;
    errno = 0;
    EXPECT_EQ(memalign(64, s), nullptr) << s;
    EXPECT_EQ(errno, ENOMEM);
  }
  const size_t bad_alignments[] = {3, 24, 100, 4097, SIZE_MAX};
  for (size_t a : bad_alignments) {
    errno = 0;
    EXPECT_EQ(aligned_alloc(a, 64), nullptr) << a;
    EXPECT_EQ(errno, EINVAL) << a;
    void* p = nullptr;
    EXPECT_EQ(posix_memalign(&p, a, 64), EINVAL) << a;
  }
  void* p = nullptr;
  EXPECT_EQ(posix_memalign(&p, 4, 64), EINVAL) << "below sizeof(void*)";
  errno = 0;
  EXPECT_EQ(aligned_alloc(size_t{1} << 62, 64), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  volatile size_t half = SIZE_MAX / 2;  // opaque, so the compiler does not reject the call
  EXPECT_EQ(calloc(half, 3), nullptr);
  EXPECT_EQ(reallocarray(nullptr, half, 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_TRUE(MallocExtension::instance()->VerifyAllMemory());
}

}  // namespace
