// Helpers for the memory-behaviour tests: resident set size and minor faults of this
// process, read the way an operator would (/proc/self/statm, getrusage).
#ifndef TCMALLOC_TESTS_MEMORY_UTIL_H_
#define TCMALLOC_TESTS_MEMORY_UTIL_H_

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <thread>

// Read with open/read into a stack buffer, never fopen: tests of programs that "make no
// allocator call" must not allocate by measuring.
inline size_t ReadProcFile(const char* path, char* buf, size_t cap) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, cap - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  return static_cast<size_t>(n);
}

inline size_t ResidentBytes() {
  char buf[256];
  if (ReadProcFile("/proc/self/statm", buf, sizeof(buf)) == 0) return 0;
  unsigned long size = 0, resident = 0;
  if (std::sscanf(buf, "%lu %lu", &size, &resident) != 2) return 0;
  return static_cast<size_t>(resident) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// High-water mark of the resident set (VmHWM), 0 if unreadable.
inline size_t PeakResidentBytes() {
  char buf[4096];
  if (ReadProcFile("/proc/self/status", buf, sizeof(buf)) == 0) return 0;
  const char* hwm = std::strstr(buf, "VmHWM:");
  return hwm == nullptr ? 0 : static_cast<size_t>(std::strtoul(hwm + 6, nullptr, 10)) << 10;
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

// The tests' pseudo-random sequence (xorshift64): advances *x and returns it.
inline uint64_t NextRandom(uint64_t* x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

inline double MiB(size_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// What a program does after its burst: light work that only ever hits the allocator's
// caches, one malloc/free pair of 64..575 bytes a millisecond, `pairs` pairs or until
// done() holds (asked after each). Maintenance that waits for a slow path never runs here.
template <typename Done>
void LightTraffic(int pairs, Done done) {
  unsigned seed = 7;
  for (int i = 0; i < pairs; ++i) {
    seed = seed * 1103515245u + 12345u;
    void* p = malloc(64 + (seed >> 16) % 512);
    static_cast<volatile char*>(p)[0] = 1;
    free(p);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (done()) return;
  }
}
inline void LightTraffic(int pairs) {
  LightTraffic(pairs, [] { return false; });
}

#endif  // TCMALLOC_TESTS_MEMORY_UTIL_H_
