// Options: every environment flag, in one table, read once at the first allocation.
//
// Values come from /proc/self/environ (os::GetEnv), because the first malloc can run before
// libc has set up `environ`. A value that does not parse, or is out of range, is reported
// once on stderr ("tcmalloc: ignoring TCMALLOC_X=...: <why>; using the default <d>") and
// replaced by the default. Integers accept a K/M/G suffix; booleans accept
// 1/0/true/false/yes/no/on/off.
#ifndef TCMALLOC_OPTIONS_H_
#define TCMALLOC_OPTIONS_H_

#include <cstddef>
#include <cstdint>

#include "core/freelist_link.h"

namespace tcm {

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
  int64_t transfer_num_obj = 32;
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
};

// One row of the table: name, kind, where it lands, its range.
struct OptionSpec {
  enum Kind { kBool, kInt, kDouble, kString };
  const char* name;
  Kind kind;
  size_t offset;  // into Options
  double min;
  double max;
  const char* help;
};

// The table (for --help-style listings and tests).
const OptionSpec* OptionTable(size_t* count);

// Parses one value into *opts (used by the loader and by tests). Returns nullptr on
// success, or a short reason why the value was rejected.
const char* ParseOption(const OptionSpec& spec, const char* value, Options* opts);

// Reads every flag from the environment into *opts, warning on bad values.
void LoadOptions(Options* opts);

}  // namespace tcm

#endif  // TCMALLOC_OPTIONS_H_
