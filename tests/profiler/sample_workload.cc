// A known heap for the sampling-accuracy test: four functions hold objects of one size each,
// then the program writes MallocExtension::GetHeapSample() to argv[1] and prints, for each
// function, its run-time address and what it really holds:
//   fn <name> <address> <object size> <object count>
// Run it with TCMALLOC_SAMPLE_PARAMETER set. The pointers are kept in static arrays, so the
// only heap objects these functions make are the ones counted.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gperftools/malloc_extension.h"

namespace {
constexpr size_t kTinyCount = 200000, kTinySize = 32;
constexpr size_t kMediumCount = 20000, kMediumSize = 1000;
constexpr size_t kLargeCount = 100, kLargeSize = 100000;
constexpr size_t kHugeCount = 4, kHugeSize = size_t{4} << 20;
void* g_tiny[kTinyCount];
char* g_medium[kMediumCount];
void* g_large[kLargeCount];
void* g_huge[kHugeCount];
}  // namespace

// noinline and extern "C": each is one stack leaf that both the test and pprof can name.
extern "C" __attribute__((noinline)) void hold_tiny() {
  for (auto& p : g_tiny) p = malloc(kTinySize);
}
extern "C" __attribute__((noinline)) void hold_medium() {
  for (auto& p : g_medium) p = new char[kMediumSize];
}
extern "C" __attribute__((noinline)) void hold_large() {
  for (auto& p : g_large) p = malloc(kLargeSize);
}
extern "C" __attribute__((noinline)) void hold_huge() {
  for (auto& p : g_huge) p = malloc(kHugeSize);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <sample output file>\n", argv[0]);
    return 2;
  }
  hold_tiny();
  hold_medium();
  hold_large();
  hold_huge();
  std::string sample;
  MallocExtension::instance()->GetHeapSample(&sample);
  FILE* f = fopen(argv[1], "w");
  if (f == nullptr || fwrite(sample.data(), 1, sample.size(), f) != sample.size() || fclose(f) != 0) {
    perror(argv[1]);
    return 1;
  }
  printf("fn hold_tiny %p %zu %zu\n", reinterpret_cast<void*>(&hold_tiny), kTinySize, kTinyCount);
  printf("fn hold_medium %p %zu %zu\n", reinterpret_cast<void*>(&hold_medium), kMediumSize, kMediumCount);
  printf("fn hold_large %p %zu %zu\n", reinterpret_cast<void*>(&hold_large), kLargeSize, kLargeCount);
  printf("fn hold_huge %p %zu %zu\n", reinterpret_cast<void*>(&hold_huge), kHugeSize, kHugeCount);
  return 0;
}
