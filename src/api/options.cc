#include "api/options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "base/log.h"
#include "platform/os.h"

namespace tcm {

#define TCM_OPT(name, kind, field, lo, hi, help) \
  OptionSpec{name, OptionSpec::kind, offsetof(Options, field), lo, hi, help}

static const OptionSpec kTable[] = {
    TCM_OPT("TCMALLOC_SAMPLE_PARAMETER", kInt, sample_parameter, 0, 1e15,
            "average bytes between sampled allocations (0 = off)"),
    TCM_OPT("TCMALLOC_RELEASE_RATE", kDouble, release_rate, 0, 1e6,
            "speed of returning idle memory to the OS (0 = never)"),
    TCM_OPT("TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD", kInt, large_alloc_report_threshold, 0, 9e18,
            "report allocations of at least this many bytes with a stack trace"),
    TCM_OPT("TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES", kInt, max_total_thread_cache_bytes, 0, 1 << 30,
            "bound on the bytes held by all thread caches"),
    TCM_OPT("TCMALLOC_SKIP_MMAP", kBool, skip_mmap, 0, 1, "do not get memory with mmap"),
    TCM_OPT("TCMALLOC_SKIP_SBRK", kBool, skip_sbrk, 0, 1, "do not get memory with sbrk"),
    TCM_OPT("TCMALLOC_DEVMEM_START", kInt, devmem_start_mb, 0, 1e12,
            "physical memory start (MB) for the device source (0 = off)"),
    TCM_OPT("TCMALLOC_DEVMEM_LIMIT", kInt, devmem_limit_mb, 0, 1e12,
            "physical memory limit (MB) for the device source (0 = none)"),
    TCM_OPT("TCMALLOC_DEVMEM_DEVICE", kString, devmem_device, 0, 0, "device of the device source"),
    TCM_OPT("TCMALLOC_MEMFS_MALLOC_PATH", kString, memfs_malloc_path, 0, 0,
            "hugetlbfs/tmpfs directory to take memory from"),
    TCM_OPT("TCMALLOC_MEMFS_LIMIT_MB", kInt, memfs_limit_mb, 0, 1e12, "memfs limit in MB (0 = none)"),
    TCM_OPT("TCMALLOC_MEMFS_ABORT_ON_FAIL", kBool, memfs_abort_on_fail, 0, 1,
            "abort when memfs cannot satisfy a request"),
    TCM_OPT("TCMALLOC_MEMFS_IGNORE_MMAP_FAIL", kBool, memfs_ignore_mmap_fail, 0, 1,
            "treat memfs mmap failures as end of memfs"),
    TCM_OPT("TCMALLOC_MEMFS_MAP_PRIVATE", kBool, memfs_map_private, 0, 1,
            "map memfs files MAP_PRIVATE instead of MAP_SHARED"),
    // The design document's spelling, accepted as a synonym.
    TCM_OPT("TCMALLOC_MEMFS_MAP_PRVIATE", kBool, memfs_map_private, 0, 1,
            "synonym of TCMALLOC_MEMFS_MAP_PRIVATE"),
    TCM_OPT("TCMALLOC_HEAP_LIMIT_MB", kInt, heap_limit_mb, 0, 1e12, "heap size limit in MB (0 = none)"),
    TCM_OPT("TCMALLOC_AGGRESSIVE_DECOMMIT", kBool, aggressive_decommit, 0, 1,
            "release every freed page run at once"),
    TCM_OPT("TCMALLOC_TRANSFER_NUM_OBJ", kInt, transfer_num_obj, 2, 1024,
            "largest batch moved between thread caches and central lists"),
    TCM_OPT("TCMALLOC_DISABLE_MEMORY_RELEASE", kBool, disable_memory_release, 0, 1,
            "never return memory to the OS"),
    TCM_OPT("MALLOCSTATS", kInt, mallocstats, 0, 3, "print statistics at exit (1 = summary, 2 = tables)"),
    TCM_OPT("TCMALLOC_BACKGROUND_RELEASE", kBool, background_release, 0, 1,
            "return idle memory from a background thread too"),
    TCM_OPT("TCMALLOC_GUARDED_SAMPLE_RATE", kInt, guarded_sample_rate, 0, 1e15,
            "average bytes between allocations placed on guarded pages (0 = off)"),
    TCM_OPT("TCMALLOC_HARDENED", kBool, hardened, 0, 1,
            "check pointers and free lists when objects move between caches (0 = off)"),
};

const OptionSpec* OptionTable(size_t* count) {
  *count = sizeof(kTable) / sizeof(kTable[0]);
  return kTable;
}

static bool ParseBool(const char* v, bool* out) {
  static const char* const kTrue[] = {"1", "true", "yes", "on", "t", "y"};
  static const char* const kFalse[] = {"0", "false", "no", "off", "f", "n", ""};
  for (const char* t : kTrue)
    if (strcasecmp(v, t) == 0) return *out = true, true;
  for (const char* f : kFalse)
    if (strcasecmp(v, f) == 0) return *out = false, true;
  return false;
}

const char* ParseOption(const OptionSpec& spec, const char* value, Options* opts) {
  char* field = reinterpret_cast<char*>(opts) + spec.offset;
  switch (spec.kind) {
    case OptionSpec::kBool: {
      bool b;
      if (!ParseBool(value, &b)) return "not a boolean";
      *reinterpret_cast<bool*>(field) = b;
      return nullptr;
    }
    case OptionSpec::kInt: {
      if (*value == '\0') return "empty";
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
      if (n >= 256) return "too long";
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
    case OptionSpec::kInt: p.Printf("%lld", static_cast<long long>(*reinterpret_cast<const int64_t*>(field))); break;
    case OptionSpec::kDouble: p.Printf("%g", *reinterpret_cast<const double*>(field)); break;
    case OptionSpec::kString: p.Printf("\"%s\"", field); break;
  }
}

void LoadOptions(Options* opts) {
  // One pass over the environment: every record is matched against the table.
  struct Ctx {
    Options* opts;
    Options defaults;
  } ctx{opts, Options{}};
  os::ForEachEnv(
      [](const char* record, void* arg) {
        auto* c = static_cast<Ctx*>(arg);
        // Only our variables can match; skip everything else after two compares.
        if (record[0] != 'T' && record[0] != 'M') return;
        for (const OptionSpec& spec : kTable) {
          size_t n = strlen(spec.name);
          if (strncmp(record, spec.name, n) != 0 || record[n] != '=') continue;
          const char* value = record + n + 1;
          if (const char* why = ParseOption(spec, value, c->opts)) {
            char def[64];
            PrintDefault(spec, c->defaults, def, sizeof(def));
            Log("ignoring %s=%s: %s; using the default %s", spec.name, value, why, def);
          }
          return;
        }
      },
      &ctx);
}

}  // namespace tcm
