/* Shared helpers for the benchmark workloads: clocks, a tiny PRNG, argument parsing and the
 * one-line result format that bench/run.py parses.
 *
 * Every workload uses only the standard malloc API so any allocator can be swapped in with
 * LD_PRELOAD. This header must compile as C11 and as C++20 (stl_mix.cc includes it), so it
 * sticks to the common subset: static inline functions, no designated initialisers, no VLAs.
 *
 * Result format: one line on stdout, `key=value` pairs separated by spaces, always including
 * ops, wall_s and cpu_s of the measured section (setup and teardown excluded) and the process's
 * peak RSS. */
#ifndef BENCH_BENCH_UTIL_H_
#define BENCH_BENCH_UTIL_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static inline double bench_now(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Wall clock for throughput; immune to settimeofday. */
static inline double bench_wall(void) { return bench_now(CLOCK_MONOTONIC); }

/* CPU time of all threads of the process: shows time burnt spinning on contended locks,
 * which wall time on a 2-core machine hides. */
static inline double bench_cpu(void) { return bench_now(CLOCK_PROCESS_CPUTIME_ID); }

static inline long bench_minflt(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

/* Resident set size in bytes, from /proc/self/statm (second field, in pages). Read with
 * open/read into a stack buffer: fopen would allocate, and a workload that checks its RSS
 * while "not allocating" (phase's quiet period) must really not allocate. */
static inline long bench_rss_bytes(void) {
  char buf[256];
  int fd = open("/proc/self/statm", O_RDONLY);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  long size = 0, resident = 0;
  if (sscanf(buf, "%ld %ld", &size, &resident) != 2) return -1;
  return resident * 4096L;
}

/* Peak RSS of this process image in KiB (VmHWM), or -1. The runner cannot take this from
 * wait4's ru_maxrss: Linux carries the exec'ing process's old high-water mark over exec, so
 * every child of a 17 MB Python runner would report at least 17 MB. VmHWM belongs to the new
 * address space alone. Read with open/read into a stack buffer: no allocation. */
static inline long bench_peak_rss_kib(void) {
  char buf[8192];
  int fd = open("/proc/self/status", O_RDONLY);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char *hwm = strstr(buf, "VmHWM:");
  return hwm ? strtol(hwm + 6, NULL, 10) : -1;
}

/* xorshift64*: fast, good enough for picking sizes and slots, and each thread owns its state
 * so the PRNG itself never contends. A zero seed would stick at zero, hence the |1. */
typedef struct {
  uint64_t s;
} bench_rng;

static inline void bench_rng_seed(bench_rng *r, uint64_t seed) {
  r->s = (seed * 0x9E3779B97F4A7C15ull) | 1u;
}

static inline uint64_t bench_rng_next(bench_rng *r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [0, n). The modulo bias is irrelevant for n far below 2^64. */
static inline uint64_t bench_rng_below(bench_rng *r, uint64_t n) { return bench_rng_next(r) % n; }

/* Parses argv[i] as a non-negative integer with an optional K/M/G suffix (powers of 1024), or
 * returns `def` when the argument is absent. Exits with a message on garbage so a typo in a
 * runner command never silently benchmarks the default. */
static inline uint64_t bench_arg(int argc, char **argv, int i, uint64_t def) {
  if (i >= argc) return def;
  char *end = NULL;
  unsigned long long v = strtoull(argv[i], &end, 10);
  int digits = end != argv[i];
  int shift = 0;
  switch (*end) {
    case 'K': case 'k': shift = 10; ++end; break;
    case 'M': case 'm': shift = 20; ++end; break;
    case 'G': case 'g': shift = 30; ++end; break;
    default: break;
  }
  if (!digits || *end != '\0') {
    fprintf(stderr, "%s: argument %d '%s' is not a number\n", argv[0], i, argv[i]);
    exit(2);
  }
  return (uint64_t)v << shift;
}

/* Prints the common fields; the caller appends its own `key=value` pairs and the newline. */
static inline void bench_report(uint64_t ops, double wall_s, double cpu_s) {
  printf("ops=%llu wall_s=%.6f cpu_s=%.6f ops_per_wall_s=%.0f ops_per_cpu_s=%.0f peak_rss_kib=%ld",
         (unsigned long long)ops, wall_s, cpu_s, wall_s > 0 ? (double)ops / wall_s : 0.0,
         cpu_s > 0 ? (double)ops / cpu_s : 0.0, bench_peak_rss_kib());
}

/* Makes `p` escape so the compiler cannot delete a malloc/free pair whose result is unused
 * (GCC does remove `free(malloc(n))` at -O2). Costs no instructions. */
static inline void bench_escape(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

/* Aborts loudly: a workload that sees corrupted memory must not print a figure. */
static inline void bench_die(const char *what) {
  fprintf(stderr, "bench: %s\n", what);
  abort();
}

#endif /* BENCH_BENCH_UTIL_H_ */
