// The debug build (tcmalloc_minimal_debug, -DTCMALLOC_DEBUG): internal invariant checks on
// every operation, writes after free caught when the block is handed out again, pointers
// into the middle of small blocks refused, and the heap walk after a stress run.
#include <gperftools/malloc_extension.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

void* volatile g_sink;
void* Launder(void* p) {
  g_sink = p;
  return g_sink;
}

TEST(DebugBuildDeathTest, WriteAfterFreeIsCaught) {
  EXPECT_DEATH(
      {
        char* p = static_cast<char*>(malloc(64));
        free(p);
        static_cast<char*>(Launder(p))[20] = 'x';  // the bug
        for (int i = 0; i < 1000; ++i) g_sink = malloc(64);  // ...found when p is reused
      },
      "tcmalloc: heap corruption: 0x[0-9a-f]+ \\(64-byte block\\) was written after it was freed");
}

TEST(DebugBuildDeathTest, FreeInsideASmallBlockIsCaught) {
  EXPECT_DEATH(
      {
        char* p = static_cast<char*>(malloc(100));
        free(Launder(p + 16));
      },
      // The release build's block-start test (on in debug builds too) speaks first.
      "tcmalloc: free\\(\\): invalid pointer 0x[0-9a-f]+ \\((16 bytes into a block of size class [0-9]+, 112 "
      "bytes|not the start of a block)\\)");
}

TEST(DebugBuild, StressThenVerifyTheWholeHeap) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      unsigned seed = 17u + static_cast<unsigned>(t);
      std::vector<std::pair<unsigned char*, size_t>> live;
      for (int i = 0; i < 200000; ++i) {
        seed = seed * 1103515245u + 12345u;
        if (live.size() < 500 || (seed >> 16) % 2 == 0) {
          size_t size = (seed >> 8) % 100 < 95 ? 1 + (seed >> 4) % 1024 : 1 + (seed >> 4) % (1 << 20);
          auto* p = static_cast<unsigned char*>(malloc(size));
          memset(p, static_cast<int>(size & 0xff), size);
          live.emplace_back(p, size);
        } else {
          size_t k = (seed >> 3) % live.size();
          auto [p, size] = live[k];
          for (size_t j = 0; j < size; j += 97) ASSERT_EQ(p[j], size & 0xff);
          free(p);
          live[k] = live.back();
          live.pop_back();
        }
      }
      for (auto& [p, size] : live) free(p);
      EXPECT_TRUE(MallocExtension::instance()->VerifyAllMemory());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(MallocExtension::instance()->VerifyAllMemory());
}

}  // namespace
