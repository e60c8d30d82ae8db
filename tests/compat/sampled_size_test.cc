// With sampling on, GetAllocatedSize(p) (and malloc_usable_size) of every block equals
// nallocx of its request, sampled or not: a sampled block has a page run of its own but
// reports the class size an unsampled allocation would have had (it used to report the
// page-rounded size, e.g. 16384 where nallocx said 9216). 10^6 blocks, with malloc and
// with aligned allocation; run with TCMALLOC_SAMPLE_PARAMETER small so that many are
// sampled, and the test checks that some were.
#include <gperftools/malloc_extension.h>
#include <gperftools/nallocx.h>
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace {

uint64_t g_rng = 88172645463325252ull;
uint64_t Next() {  // xorshift64: deterministic, no allocation
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}

size_t RandomSize() {
  switch (Next() % 4) {
    case 0: return 1 + Next() % 1024;
    case 1: return 1 + Next() % 16384;
    case 2: return 1 + Next() % (256 * 1024);
    default: return 1 + Next() % (1024 * 1024);
  }
}

size_t SampledBlocks() {
  std::string sample;
  MallocExtension::instance()->GetHeapSample(&sample);
  // One line per sampled stack after the header: "count: bytes [count: bytes] @ ...".
  size_t lines = 0;
  for (char c : sample) lines += c == '\n';
  return lines;
}

TEST(SampledSize, GetAllocatedSizeEqualsNallocxForAMillionBlocks) {
  MallocExtension* ext = MallocExtension::instance();
  size_t period = 0;
  ASSERT_TRUE(ext->GetNumericProperty("tcmalloc.sample_parameter", &period));
  ASSERT_GT(period, 0u) << "run with TCMALLOC_SAMPLE_PARAMETER set";

  constexpr int kBlocks = 1000000;
  constexpr int kHeld = 64;  // keep a few alive so the sample has something to show
  void* held[kHeld] = {};
  long mismatches = 0;
  size_t max_sampled_seen = 0;
  for (int i = 0; i < kBlocks; ++i) {
    const size_t size = RandomSize();
    void* p;
    size_t want;
    if (i % 8 == 0) {
      const int lg = 3 + static_cast<int>(Next() % 10);  // 8 B .. 4 KiB
      p = aligned_alloc(size_t{1} << lg, size);
      want = nallocx(size, MALLOCX_LG_ALIGN(lg));
    } else {
      p = malloc(size);
      want = nallocx(size, 0);
    }
    ASSERT_NE(p, nullptr);
    const size_t got = ext->GetAllocatedSize(p);
    if (got != want || malloc_usable_size(p) != want) {
      if (++mismatches <= 5)
        ADD_FAILURE() << "size " << size << ": GetAllocatedSize " << got << ", malloc_usable_size "
                      << malloc_usable_size(p) << ", nallocx " << want;
    }
    static_cast<char*>(p)[want - 1] = 1;  // the whole reported size is usable
    void*& slot = held[i % kHeld];
    free(slot);
    slot = p;
    if (i % 100000 == 99999) {
      const size_t n = SampledBlocks();
      if (n > max_sampled_seen) max_sampled_seen = n;
    }
  }
  for (void* p : held) free(p);
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(max_sampled_seen, 1u) << "nothing was sampled: the test proved nothing";
}

}  // namespace
