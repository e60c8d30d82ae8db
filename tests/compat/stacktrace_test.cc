// gperftools/stacktrace.h from libtcmalloc: the first frame is the caller, skip_count skips
// more, max_depth bounds the result, and GetStackFrames reports frame sizes.
#include <gperftools/stacktrace.h>
#include <gtest/gtest.h>

#include <cstdint>

namespace {

struct Capture {
  void* pcs[32];
  int sizes[32];
  int depth;
  void* my_return_address;  // where Inner returns to, inside Outer
};

enum class Api { kTrace, kTraceContext, kFrames, kFramesContext };

__attribute__((noinline)) void Inner(Capture* c, Api api, int skip) {
  c->my_return_address = __builtin_return_address(0);
  switch (api) {
    case Api::kTrace: c->depth = GetStackTrace(c->pcs, 32, skip); break;
    case Api::kTraceContext: c->depth = GetStackTraceWithContext(c->pcs, 32, skip, nullptr); break;
    case Api::kFrames: c->depth = GetStackFrames(c->pcs, c->sizes, 32, skip); break;
    case Api::kFramesContext: c->depth = GetStackFramesWithContext(c->pcs, c->sizes, 32, skip, nullptr); break;
  }
  __asm__ __volatile__("" ::: "memory");  // no tail call: Inner's frame stays
}

__attribute__((noinline)) void Outer(Capture* c, Api api, int skip) {
  Inner(c, api, skip);
  __asm__ __volatile__("" ::: "memory");
}

bool InsideInner(void* pc) {
  auto p = reinterpret_cast<uintptr_t>(pc), f = reinterpret_cast<uintptr_t>(&Inner);
  return p > f && p < f + 1024;
}

class StackTrace : public ::testing::TestWithParam<Api> {};

TEST_P(StackTrace, FirstFrameIsTheCallerAndSkipCountSkips) {
  Capture c{};
  Outer(&c, GetParam(), 0);
  ASSERT_GE(c.depth, 3);
  EXPECT_TRUE(InsideInner(c.pcs[0])) << c.pcs[0] << " not in Inner at " << reinterpret_cast<void*>(&Inner);
  EXPECT_EQ(c.pcs[1], c.my_return_address);

  Capture skipped{};
  Outer(&skipped, GetParam(), 1);
  ASSERT_GE(skipped.depth, 2);
  EXPECT_EQ(skipped.pcs[0], skipped.my_return_address);
  EXPECT_EQ(skipped.depth, c.depth - 1);
}

TEST_P(StackTrace, FrameSizesArePositiveWhereKnown) {
  if (GetParam() != Api::kFrames && GetParam() != Api::kFramesContext) GTEST_SKIP() << "traces only";
  Capture c{};
  Outer(&c, GetParam(), 0);
  ASSERT_GE(c.depth, 3);
  for (int i = 0; i + 1 < c.depth; ++i) {
    EXPECT_GT(c.sizes[i], 0) << "frame " << i;
    EXPECT_LT(c.sizes[i], 1 << 20) << "frame " << i;
    EXPECT_EQ(c.sizes[i] % 8, 0) << "frame " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllFour, StackTrace,
                         ::testing::Values(Api::kTrace, Api::kTraceContext, Api::kFrames, Api::kFramesContext));

TEST(StackTraceBounds, MaxDepthIsRespectedAndBadArgumentsGiveZero) {
  void* pcs[2];
  int sizes[2];
  EXPECT_EQ(GetStackTrace(pcs, 2, 0), 2);
  EXPECT_EQ(GetStackFrames(pcs, sizes, 1, 0), 1);
  EXPECT_EQ(GetStackTrace(pcs, 0, 0), 0);
  EXPECT_EQ(GetStackTrace(nullptr, 5, 0), 0);
  EXPECT_EQ(GetStackFrames(pcs, nullptr, 2, 0), 0);
}

}  // namespace
