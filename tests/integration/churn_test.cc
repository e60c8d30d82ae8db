// No page-fault storms (../shared/spec/study-in-malloc-minor-faults.txt): a program that
// repeatedly allocates, touches and frees one block of 128 KiB, 1 MiB or 4 MiB must settle
// to (near) zero minor faults per iteration — the block's pages stay backed and are reused.
// The same for a working set far above the page heap's surplus trigger, built and freed
// over and over (a batch job's per-request data, a structure rebuilt every frame): after
// the first cycles it is no longer released at every free; once the cycling stops, it
// still goes back.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

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

constexpr size_t kSetBlock = size_t{1} << 20;
constexpr size_t kSetBytes = size_t{48} << 20;  // the trigger: 32 MiB + the bytes in use

// Builds and frees the working set `cycles` times; returns how many cycles faulted more
// than a tenth of its pages in.
int BuildAndFreeWorkingSet(int cycles) {
  std::vector<char*> blocks(kSetBytes / kSetBlock);
  int faulting = 0;
  for (int c = 0; c < cycles; ++c) {
    const long before = MinorFaults();
    for (char*& p : blocks) {
      p = static_cast<char*>(malloc(kSetBlock));
      memset(p, c, kSetBlock);
    }
    for (char* p : blocks) free(p);
    faulting += MinorFaults() - before > static_cast<long>(kSetBytes / 4096 / 10);
  }
  return faulting;
}

TEST(Churn, AWorkingSetAboveTheSurplusTriggerStaysBackedWhileItCycles) {
  const size_t base = ResidentBytes();
  // Warm-up: the surplus rule releases after the first two cycles (nothing tells them from
  // two phases of a program), then sees the pages come back within 100 ms and holds back.
  BuildAndFreeWorkingSet(5);
  constexpr int kCycles = 50;
  const int faulting = BuildAndFreeWorkingSet(kCycles);
  printf("48 MiB working set of 1 MiB blocks: %d of %d cycles faulted it in again\n", faulting, kCycles);
  // Released at every free, every cycle faults 40 MiB back in (10 240 faults: a heap this
  // small is not advised onto huge pages). A cycle the scheduler stretched past 100 ms
  // (another process on both CPUs) is a new program phase and may be released: a few.
  EXPECT_LE(faulting, kCycles / 10);

  // The pattern that would defeat it: the program stops cycling and goes on with light
  // work only (cache hits). The held-back memory is idle now and goes back.
  const size_t held = ResidentBytes();
  size_t now = held;
  LightTraffic(3000, [&] {
    now = ResidentBytes();
    return now <= base + (16u << 20);
  });
  printf("RSS before the cycles %.1f MiB, after them %.1f MiB, after light work %.1f MiB\n", MiB(base), MiB(held),
         MiB(now));
  EXPECT_LE(now, base + (16u << 20)) << "memory held back from the surplus rule was never released";
}

}  // namespace
