// Helpers for the memory-behaviour tests: resident set size and minor faults of this
// process, read the way an operator would (/proc/self/statm, getrusage).
#ifndef TCMALLOC_TESTS_MEMORY_UTIL_H_
#define TCMALLOC_TESTS_MEMORY_UTIL_H_

#include <sys/resource.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>

inline size_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  if (std::fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
  std::fclose(f);
  return static_cast<size_t>(resident) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// High-water mark of the resident set (VmHWM), 0 if unreadable.
inline size_t PeakResidentBytes() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  unsigned long kib = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr)
    if (std::sscanf(line, "VmHWM: %lu kB", &kib) == 1) break;
  std::fclose(f);
  return static_cast<size_t>(kib) << 10;
}

inline long MinorFaults() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

// Signed difference, so a shrink never wraps around into a huge "drop".
inline long long Drop(size_t before, size_t after) {
  return static_cast<long long>(before) - static_cast<long long>(after);
}

inline double MiB(size_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

#endif  // TCMALLOC_TESTS_MEMORY_UTIL_H_
