// Options: every environment flag of both libraries, in one table with three sections
// (allocator, heap profiler, heap checker), parsed once at the first allocation.
//
// Values come from /proc/self/environ (os::ForEachEnv), because the first malloc can run
// before libc has set up `environ`. A value that does not parse, or is out of range, is
// reported once on stderr ("tcmalloc: ignoring NAME=...: <why>; using the default <d>") and
// replaced by the default. An empty value (NAME=) counts as unset. Integers accept a K/M/G
// suffix; booleans are 1/0/true/false/yes/no/on/off, case-insensitive, in every section.
// The profiler and the checker see the parsed values through api/introspection.h, so a
// bad value is reported once per process, not once per reader.
#ifndef TCMALLOC_OPTIONS_H_
#define TCMALLOC_OPTIONS_H_

#include <cstddef>
#include <cstdint>

#include "core/freelist_link.h"

namespace tcm {

// Section "heap profiler" (libtcmalloc): gperftools' names and defaults.
struct HeapProfilerOptions {
  char prefix[1024] = "";                                  // HEAPPROFILE: profile from start-up
  int64_t allocation_interval = int64_t{1} << 30;          // HEAP_PROFILE_ALLOCATION_INTERVAL, 0 = off
  int64_t inuse_interval = int64_t{100} << 20;             // HEAP_PROFILE_INUSE_INTERVAL, 0 = off
  int64_t time_interval = 0;                               // HEAP_PROFILE_TIME_INTERVAL (s), 0 = off
  int64_t deallocation_interval = 0;                       // HEAP_PROFILE_DEALLOCATION_INTERVAL, 0 = off
  bool mmap = false;                                       // HEAP_PROFILE_MMAP: mmap/mremap/sbrk too
  bool only_mmap = false;                                  // HEAP_PROFILE_ONLY_MMAP: not malloc
  bool mmap_log = false;                                   // HEAP_PROFILE_MMAP_LOG: log those calls
  int64_t signal = 0;                                      // HEAPPROFILESIGNAL: dump on it, 0 = off
};

// Section "heap checker" (libtcmalloc): gperftools' names and defaults.
struct HeapCheckerOptions {
  char level[64] = "";                      // HEAPCHECK: minimal/normal/strict/draconian/as-is/local
  bool after_destructors = false;           // HEAP_CHECK_AFTER_DESTRUCTORS
  bool ignore_thread_live = true;           // HEAP_CHECK_IGNORE_THREAD_LIVE
  bool ignore_global_live = true;           // HEAP_CHECK_IGNORE_GLOBAL_LIVE
  int64_t max_leaks = 20;                   // HEAP_CHECK_MAX_LEAKS
  bool identify_leaks = false;              // HEAP_CHECK_IDENTIFY_LEAKS
  bool test_pointer_alignment = false;      // HEAP_CHECK_TEST_POINTER_ALIGNMENT
  int64_t pointer_source_alignment = 8;     // HEAP_CHECK_POINTER_SOURCE_ALIGNMENT: 1, 2, 4 or 8
  int64_t max_pointer_offset = 1024;        // HEAP_CHECK_MAX_POINTER_OFFSET, -1 = anywhere
  int64_t stack_depth = 32;                 // HEAP_CHECK_STACK_DEPTH
  char dump_directory[256] = "/tmp";        // HEAP_CHECK_DUMP_DIRECTORY
  char pprof_path[256] = "pprof";           // PPROF_PATH
  char ignore_libs[1024] = "";              // HEAP_CHECK_IGNORE_LIBS
  int64_t verbose = 0;                      // PERFTOOLS_VERBOSE
};

// Section "allocator", then the other two.
struct Options {
  // Generally useful flags of the design document.
  int64_t sample_parameter = 0;
  double release_rate = 1.0;
  int64_t large_alloc_report_threshold = int64_t{1} << 30;
  int64_t max_total_thread_cache_bytes = 16 << 20;
  // Memory sources.
  bool skip_mmap = false;
  bool skip_sbrk = false;
  int64_t devmem_start_mb = 0;
  int64_t devmem_limit_mb = 0;
  char devmem_device[256] = "/dev/mem";
  char memfs_malloc_path[256] = "";
  int64_t memfs_limit_mb = 0;
  bool memfs_abort_on_fail = false;
  bool memfs_ignore_mmap_fail = false;
  bool memfs_map_private = false;
  // Flags gperftools users rely on.
  int64_t heap_limit_mb = 0;
  bool aggressive_decommit = false;
  bool hugepages = true;  // TCMALLOC_HUGEPAGES: hugepage-aware page heap
  // 0: by front end, kPerThreadBatch with per-thread caches and kPerCpuBatch with per-CPU
  // caches (globals.cc); a value the user sets applies to both.
  int64_t transfer_num_obj = 0;
  bool disable_memory_release = false;
  int64_t mallocstats = 0;
  // Ours.
  bool background_release = false;
  // Hardening (issue 15). Guarded sampling: about one allocation per this many bytes goes
  // on a guarded page (0 = off). 64 MiB keeps it well under 1% CPU for any allocation rate
  // a program sustains (three system calls per guarded block) and bounded in memory
  // (core/guarded_alloc.h), while a long-running service still gets a steady trickle.
  // Read by the slow path each time it re-arms, so SetNumericProperty changes it live.
  // Off by default in a -DTCMALLOC_HARDENED=OFF build.
  int64_t guarded_sample_rate = kHardenedBuild ? int64_t{64} << 20 : 0;
  // The release-build checks of batches reaching the central lists (core/central_freelist.h);
  // off by default in a build with -DTCMALLOC_HARDENED=OFF, which also drops the link
  // encoding (core/freelist_link.h).
  bool hardened = kHardenedBuild;
  bool per_cpu_caches = true;
  int64_t max_per_cpu_cache_size = 3 << 20;

  HeapProfilerOptions heap_profiler;
  HeapCheckerOptions heap_checker;
};

// One row of the table: section, name, kind, where it lands, its range.
struct OptionSpec {
  enum Section { kAllocator, kHeapProfiler, kHeapChecker };
  enum Kind { kBool, kInt, kDouble, kString };
  Section section;
  const char* name;
  Kind kind;
  size_t offset;  // into Options
  size_t size;    // of the field (a string's capacity, with its NUL)
  double min;
  double max;
  const char* help;
};

// The table (for --help-style listings and tests), ordered by section.
const OptionSpec* OptionTable(size_t* count);

// The row named `name`, or nullptr.
const OptionSpec* FindOption(const char* name);

// "allocator", "heap profiler" or "heap checker".
const char* SectionName(OptionSpec::Section section);

// Parses one value into *opts (used by the loader and by tests). Returns nullptr on
// success, or a short reason why the value was rejected.
const char* ParseOption(const OptionSpec& spec, const char* value, Options* opts);

// Applies "NAME=value" records (an environment's entries) to *opts: records naming no
// option are skipped; a bad value is reported once on stderr and leaves the default.
void ApplyOptionRecords(const char* const* records, size_t count, Options* opts);

// Reads every flag from the process's initial environment into *opts, as above.
void LoadOptions(Options* opts);

}  // namespace tcm

#endif  // TCMALLOC_OPTIONS_H_
