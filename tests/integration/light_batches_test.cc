// A burst, then light traffic that reaches past the CPU's cache (bench/light_batches.c):
// 256 MiB of blocks of 16 sizes from 64 to 3904 bytes allocated and freed, then every
// 10 ms 100 blocks of each size allocated and freed, for 2 s. The transfer caches filled
// in the burst must come down to what the light traffic reaches: before they gave back
// only what nobody touched for a whole maintenance interval, and this traffic touches
// every class's cache, so 3.1-6.1 MiB stayed parked (1.2-1.5 MiB here since) and with it
// the spans.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include <gperftools/malloc_extension.h>
#include "memory_util.h"

namespace {

size_t Prop(const char* name) {
  size_t v = 0;
  EXPECT_TRUE(MallocExtension::instance()->GetNumericProperty(name, &v)) << name;
  return v;
}

TEST(LightBatches, TransferCachesComeDownToWhatLightTrafficReaches) {
  constexpr int kSizes = 16;
  constexpr size_t kPer = 100;
  size_t sizes[kSizes];
  for (int i = 0; i < kSizes; ++i) sizes[i] = 64 + 256 * static_cast<size_t>(i);
  std::vector<void*> objs;
  objs.reserve((256u << 20) / 64);
  for (size_t total = 0; total < (256u << 20);) {
    const size_t s = sizes[objs.size() % kSizes];
    void* p = malloc(s);
    ASSERT_NE(p, nullptr);
    memset(p, 1, s);
    objs.push_back(p);
    total += s;
  }
  for (void* p : objs) free(p);
  const size_t parked_after_burst = Prop("tcmalloc.transfer_cache_free_bytes");
  void* some[kPer];
  for (int round = 0; round < 200; ++round) {
    for (size_t s : sizes) {
      for (void*& p : some) {
        p = malloc(s);
        ASSERT_NE(p, nullptr);
      }
      for (void* p : some) free(p);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const size_t parked = Prop("tcmalloc.transfer_cache_free_bytes");
  printf("transfer caches: %.1f MiB after the burst, %.1f MiB after 2 s of light traffic; RSS %.1f MiB\n",
         MiB(parked_after_burst), MiB(parked), MiB(ResidentBytes()));
  EXPECT_LE(parked, size_t{5} << 19);  // 2.5 MiB
}

}  // namespace
