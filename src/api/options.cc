#include "api/options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "base/log.h"
#include "platform/os.h"
#include "platform/stack_trace.h"

namespace tcm {

#define TCM_OPT(section, name, kind, field, lo, hi, help)                                       \
  OptionSpec{OptionSpec::section, name, OptionSpec::kind, offsetof(Options, field),                 \
             sizeof(static_cast<Options*>(nullptr)->field), lo, hi, help}
#define TCM_ALLOC(...) TCM_OPT(kAllocator, __VA_ARGS__)
#define TCM_PROF(...) TCM_OPT(kHeapProfiler, __VA_ARGS__)
#define TCM_HEAPCHECK(...) TCM_OPT(kHeapChecker, __VA_ARGS__)

static const OptionSpec kTable[] = {
    // ---- allocator ----
    TCM_ALLOC("TCMALLOC_SAMPLE_PARAMETER", kInt, sample_parameter, 0, 1e15,
              "average bytes between sampled allocations (0 = off)"),
    TCM_ALLOC("TCMALLOC_RELEASE_RATE", kDouble, release_rate, 0, 1e6,
              "speed of returning idle memory to the OS (0 = never)"),
    TCM_ALLOC("TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD", kInt, large_alloc_report_threshold, 0, 9e18,
              "report allocations of at least this many bytes with a stack trace"),
    TCM_ALLOC("TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES", kInt, max_total_thread_cache_bytes, 0, 1 << 30,
              "bound on the bytes held by all thread caches"),
    TCM_ALLOC("TCMALLOC_SKIP_MMAP", kBool, skip_mmap, 0, 1, "do not get memory with mmap"),
    TCM_ALLOC("TCMALLOC_SKIP_SBRK", kBool, skip_sbrk, 0, 1, "do not get memory with sbrk"),
    TCM_ALLOC("TCMALLOC_DEVMEM_START", kInt, devmem_start_mb, 0, 1e12,
              "physical memory start (MB) for the device source (0 = off)"),
    TCM_ALLOC("TCMALLOC_DEVMEM_LIMIT", kInt, devmem_limit_mb, 0, 1e12,
              "physical memory limit (MB) for the device source (0 = none)"),
    TCM_ALLOC("TCMALLOC_DEVMEM_DEVICE", kString, devmem_device, 0, 0, "device of the device source"),
    TCM_ALLOC("TCMALLOC_MEMFS_MALLOC_PATH", kString, memfs_malloc_path, 0, 0,
              "hugetlbfs/tmpfs directory to take memory from"),
    TCM_ALLOC("TCMALLOC_MEMFS_LIMIT_MB", kInt, memfs_limit_mb, 0, 1e12, "memfs limit in MB (0 = none)"),
    TCM_ALLOC("TCMALLOC_MEMFS_ABORT_ON_FAIL", kBool, memfs_abort_on_fail, 0, 1,
              "abort when memfs cannot satisfy a request"),
    TCM_ALLOC("TCMALLOC_MEMFS_IGNORE_MMAP_FAIL", kBool, memfs_ignore_mmap_fail, 0, 1,
              "treat memfs mmap failures as end of memfs"),
    TCM_ALLOC("TCMALLOC_MEMFS_MAP_PRIVATE", kBool, memfs_map_private, 0, 1,
              "map memfs files MAP_PRIVATE instead of MAP_SHARED"),
    // The design document's spelling, accepted as a synonym.
    TCM_ALLOC("TCMALLOC_MEMFS_MAP_PRVIATE", kBool, memfs_map_private, 0, 1,
              "synonym of TCMALLOC_MEMFS_MAP_PRIVATE"),
    TCM_ALLOC("TCMALLOC_HEAP_LIMIT_MB", kInt, heap_limit_mb, 0, 1e12, "heap size limit in MB (0 = none)"),
    TCM_ALLOC("TCMALLOC_AGGRESSIVE_DECOMMIT", kBool, aggressive_decommit, 0, 1,
              "release every freed page run at once"),
    TCM_ALLOC("TCMALLOC_HUGEPAGES", kBool, hugepages, 0, 1,
              "hugepage-aware page heap: 2 MiB units advised MADV_HUGEPAGE, whole huge pages released first"),
    TCM_ALLOC("TCMALLOC_TRANSFER_NUM_OBJ", kInt, transfer_num_obj, 2, 1024,
              "largest batch moved between the front end and the central lists (default: 32 with "
              "per-thread caches, as gperftools; 128 with per-CPU caches)"),
    TCM_ALLOC("TCMALLOC_DISABLE_MEMORY_RELEASE", kBool, disable_memory_release, 0, 1,
              "never return memory to the OS"),
    TCM_ALLOC("MALLOCSTATS", kInt, mallocstats, 0, 3, "print statistics at exit (1 = summary, 2 = tables)"),
    TCM_ALLOC("TCMALLOC_BACKGROUND_RELEASE", kBool, background_release, 0, 1,
              "return idle memory from a background thread too"),
    TCM_ALLOC("TCMALLOC_PER_CPU_CACHES", kBool, per_cpu_caches, 0, 1,
              "cache per CPU (rseq) instead of per thread where the kernel supports it"),
    TCM_ALLOC("TCMALLOC_MAX_PER_CPU_CACHE_SIZE", kInt, max_per_cpu_cache_size, 0, 1 << 30,
              "bound on the bytes each CPU's cache holds"),
    TCM_ALLOC("TCMALLOC_GUARDED_SAMPLE_RATE", kInt, guarded_sample_rate, 0, 1e15,
              "average bytes between allocations placed on guarded pages, and at least rate/10 ns apart (0 = off)"),
    TCM_ALLOC("TCMALLOC_HARDENED", kBool, hardened, 0, 1,
              "check pointers and free lists when objects move between caches (0 = off)"),
    // ---- heap profiler ----
    TCM_PROF("HEAPPROFILE", kString, heap_profiler.prefix, 0, 0,
             "profile from start-up into <prefix>.NNNN.heap"),
    TCM_PROF("HEAP_PROFILE_ALLOCATION_INTERVAL", kInt, heap_profiler.allocation_interval, 0, 9e18,
             "dump after this many bytes allocated since the last dump (0 = off)"),
    TCM_PROF("HEAP_PROFILE_INUSE_INTERVAL", kInt, heap_profiler.inuse_interval, 0, 9e18,
             "dump when in-use bytes exceed the high-water mark by this much (0 = off)"),
    TCM_PROF("HEAP_PROFILE_TIME_INTERVAL", kInt, heap_profiler.time_interval, 0, 9e18,
             "dump after this many seconds since the last dump (0 = off)"),
    TCM_PROF("HEAP_PROFILE_DEALLOCATION_INTERVAL", kInt, heap_profiler.deallocation_interval, 0, 9e18,
             "dump after this many bytes freed since the last dump (0 = off)"),
    TCM_PROF("HEAP_PROFILE_MMAP", kBool, heap_profiler.mmap, 0, 1,
             "profile the program's mmap, mremap and sbrk regions too"),
    TCM_PROF("HEAP_PROFILE_ONLY_MMAP", kBool, heap_profiler.only_mmap, 0, 1,
             "profile only mmap, mremap and sbrk regions, not malloc"),
    TCM_PROF("HEAP_PROFILE_MMAP_LOG", kBool, heap_profiler.mmap_log, 0, 1,
             "log every mmap, munmap, mremap and sbrk call"),
    TCM_PROF("HEAPPROFILESIGNAL", kInt, heap_profiler.signal, 0, 64,
             "dump when this signal arrives (0 = never)"),
    // ---- heap checker ----
    TCM_HEAPCHECK("HEAPCHECK", kString, heap_checker.level, 0, 0,
              "minimal, normal, strict, draconian, as-is or local (unset = off)"),
    TCM_HEAPCHECK("HEAP_CHECK_AFTER_DESTRUCTORS", kBool, heap_checker.after_destructors, 0, 1,
              "as-is: check after global destructors"),
    TCM_HEAPCHECK("HEAP_CHECK_IGNORE_THREAD_LIVE", kBool, heap_checker.ignore_thread_live, 0, 1,
              "as-is: thread stacks and registers are roots"),
    TCM_HEAPCHECK("HEAP_CHECK_IGNORE_GLOBAL_LIVE", kBool, heap_checker.ignore_global_live, 0, 1,
              "as-is: global data are roots"),
    TCM_HEAPCHECK("HEAP_CHECK_MAX_LEAKS", kInt, heap_checker.max_leaks, -2147483648.0, 2147483647.0,
              "leak stacks printed (<= 0: all)"),
    TCM_HEAPCHECK("HEAP_CHECK_IDENTIFY_LEAKS", kBool, heap_checker.identify_leaks, 0, 1,
              "print each leaked object's address"),
    TCM_HEAPCHECK("HEAP_CHECK_TEST_POINTER_ALIGNMENT", kBool, heap_checker.test_pointer_alignment, 0, 1,
              "when leaks are found, check again with alignment 1"),
    TCM_HEAPCHECK("HEAP_CHECK_POINTER_SOURCE_ALIGNMENT", kInt, heap_checker.pointer_source_alignment, 1, 8,
              "where pointers may sit in memory: 1, 2, 4 or 8"),
    TCM_HEAPCHECK("HEAP_CHECK_MAX_POINTER_OFFSET", kInt, heap_checker.max_pointer_offset, -1, 9e18,
              "how far inside an object a pointer may point (-1: anywhere)"),
    TCM_HEAPCHECK("HEAP_CHECK_STACK_DEPTH", kInt, heap_checker.stack_depth, 1, os::kMaxStackDepth,
              "frames recorded per allocation"),
    TCM_HEAPCHECK("HEAP_CHECK_DUMP_DIRECTORY", kString, heap_checker.dump_directory, 0, 0,
              "where leak profiles are written"),
    TCM_HEAPCHECK("PPROF_PATH", kString, heap_checker.pprof_path, 0, 0, "the pprof named in the suggested command"),
    TCM_HEAPCHECK("HEAP_CHECK_IGNORE_LIBS", kString, heap_checker.ignore_libs, 0, 0,
              "library path substrings whose allocations are roots"),
    TCM_HEAPCHECK("PERFTOOLS_VERBOSE", kInt, heap_checker.verbose, -2147483648.0, 2147483647.0,
              "> 0: statistics of each check"),
};

#undef TCM_HEAPCHECK
#undef TCM_PROF
#undef TCM_ALLOC
#undef TCM_OPT

const OptionSpec* OptionTable(size_t* count) {
  *count = sizeof(kTable) / sizeof(kTable[0]);
  return kTable;
}

const OptionSpec* FindOption(const char* name) {
  for (const OptionSpec& spec : kTable)
    if (strcmp(spec.name, name) == 0) return &spec;
  return nullptr;
}

const char* SectionName(OptionSpec::Section section) {
  switch (section) {
    case OptionSpec::kAllocator: return "allocator";
    case OptionSpec::kHeapProfiler: return "heap profiler";
    case OptionSpec::kHeapChecker: return "heap checker";
  }
  return "?";
}

// The one boolean syntax of every section.
static bool ParseBool(const char* v, bool* out) {
  static const char* const kTrue[] = {"1", "true", "yes", "on"};
  static const char* const kFalse[] = {"0", "false", "no", "off"};
  for (const char* t : kTrue)
    if (strcasecmp(v, t) == 0) return *out = true, true;
  for (const char* f : kFalse)
    if (strcasecmp(v, f) == 0) return *out = false, true;
  return false;
}

const char* ParseOption(const OptionSpec& spec, const char* value, Options* opts) {
  char* field = reinterpret_cast<char*>(opts) + spec.offset;
  if (*value == '\0') return nullptr;  // NAME= is unset: the default stays
  switch (spec.kind) {
    case OptionSpec::kBool: {
      bool b;
      if (!ParseBool(value, &b)) return "not a boolean";
      *reinterpret_cast<bool*>(field) = b;
      return nullptr;
    }
    case OptionSpec::kInt: {
      errno = 0;
      char* end = nullptr;
      long long v = strtoll(value, &end, 10);
      if (end == value || errno == ERANGE) return "not an integer";
      long long mult = 1;
      if (*end == 'k' || *end == 'K') mult = 1LL << 10, ++end;
      else if (*end == 'm' || *end == 'M') mult = 1LL << 20, ++end;
      else if (*end == 'g' || *end == 'G') mult = 1LL << 30, ++end;
      if (*end != '\0') return "not an integer";
      if (__builtin_mul_overflow(v, mult, &v)) return "out of range";
      if (static_cast<double>(v) < spec.min || static_cast<double>(v) > spec.max) return "out of range";
      *reinterpret_cast<int64_t*>(field) = v;
      return nullptr;
    }
    case OptionSpec::kDouble: {
      errno = 0;
      char* end = nullptr;
      double v = strtod(value, &end);
      if (end == value || *end != '\0' || errno == ERANGE || std::isnan(v)) return "not a number";
      if (v < spec.min || v > spec.max) return "out of range";
      *reinterpret_cast<double*>(field) = v;
      return nullptr;
    }
    case OptionSpec::kString: {
      size_t n = strlen(value);
      if (n >= spec.size) return "too long";
      memcpy(field, value, n + 1);
      return nullptr;
    }
  }
  return "unknown kind";
}

static void PrintDefault(const OptionSpec& spec, const Options& defaults, char* buf, size_t len) {
  const char* field = reinterpret_cast<const char*>(&defaults) + spec.offset;
  Printer p(buf, len);
  switch (spec.kind) {
    case OptionSpec::kBool: p.Printf("%s", *reinterpret_cast<const bool*>(field) ? "true" : "false"); break;
    case OptionSpec::kInt: {
      // A default below the accepted range means "chosen by the library" (the help says how).
      const int64_t v = *reinterpret_cast<const int64_t*>(field);
      if (static_cast<double>(v) < spec.min) {
        p.Printf("(automatic)");
      } else {
        p.Printf("%lld", static_cast<long long>(v));
      }
      break;
    }
    case OptionSpec::kDouble: p.Printf("%g", *reinterpret_cast<const double*>(field)); break;
    case OptionSpec::kString: p.Printf("\"%s\"", field); break;
  }
}

// Matches one "NAME=value" record against the table; warns about a bad value.
static void ApplyRecord(const char* record, Options* opts, const Options& defaults) {
  // Every name starts with one of these: most of the environment is skipped at once.
  if (record[0] != 'T' && record[0] != 'M' && record[0] != 'H' && record[0] != 'P') return;
  for (const OptionSpec& spec : kTable) {
    size_t n = strlen(spec.name);
    if (strncmp(record, spec.name, n) != 0 || record[n] != '=') continue;
    const char* value = record + n + 1;
    if (const char* why = ParseOption(spec, value, opts)) {
      char def[64];
      PrintDefault(spec, defaults, def, sizeof(def));
      Log("ignoring %s=%s: %s; using the default %s", spec.name, value, why, def);
    }
    return;
  }
}

void ApplyOptionRecords(const char* const* records, size_t count, Options* opts) {
  const Options defaults;
  for (size_t i = 0; i < count; ++i) ApplyRecord(records[i], opts, defaults);
}

void LoadOptions(Options* opts) {
  // One pass over the environment: every record is matched against the table.
  struct Ctx {
    Options* opts;
    Options defaults;
  } ctx{opts, Options{}};
  os::ForEachEnv([](const char* record, void* arg) {
    auto* c = static_cast<Ctx*>(arg);
    ApplyRecord(record, c->opts, c->defaults);
  }, &ctx);
}

}  // namespace tcm
