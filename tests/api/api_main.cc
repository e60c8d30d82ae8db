// main() for every GoogleTest program in tests/api. Before any test runs it proves that the
// allocator under test serves this process (see OurAllocatorIsActive): in the LD_PRELOAD mode a
// missing or ignored preload would otherwise let every test pass on glibc.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "test_util.h"

TEST(Setup, OurAllocatorIsActive) {
  std::string why;
  EXPECT_TRUE(tcm_test::OurAllocatorIsActive(&why)) << why;
}

int main(int argc, char** argv) {
  // Death tests re-execute the binary instead of forking a possibly multithreaded process.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  testing::InitGoogleTest(&argc, argv);
  std::string why;
  if (!tcm_test::OurAllocatorIsActive(&why)) {
    fprintf(stderr, "FATAL: the allocator under test is not in use: %s\n", why.c_str());
    return 1;
  }
  return RUN_ALL_TESTS();
}
