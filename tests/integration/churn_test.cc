// No page-fault storms (../shared/spec/study-in-malloc-minor-faults.txt): a program that
// repeatedly allocates, touches and frees one block of 128 KiB, 1 MiB or 4 MiB must settle
// to (near) zero minor faults per iteration — the block's pages stay backed and are reused.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "memory_util.h"

namespace {

double FaultsPerIteration(size_t size, int iterations) {
  for (int i = 0; i < 100; ++i) {  // warm-up
    char* p = static_cast<char*>(malloc(size));
    memset(p, i, size);
    free(p);
  }
  const long before = MinorFaults();
  for (int i = 0; i < iterations; ++i) {
    char* p = static_cast<char*>(malloc(size));
    memset(p, i, size);
    free(p);
  }
  return static_cast<double>(MinorFaults() - before) / iterations;
}

TEST(Churn, LargeBlocksDoNotFaultAfterWarmUp) {
  for (size_t size : {size_t{128} << 10, size_t{1} << 20, size_t{4} << 20}) {
    double faults = FaultsPerIteration(size, 2000);
    printf("%zu KiB block: %.4f minor faults per iteration\n", size >> 10, faults);
    EXPECT_LE(faults, 0.01) << size;
  }
}

}  // namespace
