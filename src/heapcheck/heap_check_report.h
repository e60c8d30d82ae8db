// Leak reports: grouping leaked objects by allocation stack, the stderr report, the leak
// profile for pprof, and turning return addresses into function names.
//
// Everything here runs after the other threads were resumed and the checker's lock was
// released, so it may take libc locks (dl_iterate_phdr) and even allocate (the C++
// demangler); the profile and report text are still built in fixed buffers.
#ifndef TCMALLOC_HEAP_CHECK_REPORT_H_
#define TCMALLOC_HEAP_CHECK_REPORT_H_

#include <cstddef>
#include <cstdint>

#include "heapcheck/heap_check_memory.h"
#include "heapcheck/heap_check_table.h"

namespace tcm::heapcheck {

struct LeakedObject {
  uintptr_t addr;  // hidden
  uint64_t size;
  uint32_t stack;
};

struct LeakBucket {
  uint64_t count;
  uint64_t bytes;
  const uintptr_t* pcs;  // interned stack: immutable, valid forever
  uint32_t depth;
  uint32_t stack;
  uint32_t first;        // its objects are objects()[first, first + count)
};

class LeakSet {
 public:
  LeakSet() = default;
  LeakSet(const LeakSet&) = delete;
  LeakSet& operator=(const LeakSet&) = delete;

  bool Add(uintptr_t addr, uint64_t size, uint32_t stack) {
    total_bytes_ += size;
    return objects_.Push(LeakedObject{Hide(addr), size, stack});
  }
  // Groups the objects by stack, biggest total first. REQUIRES the lock guarding stacks.
  void Finish(const StackTable& stacks);

  uint64_t total_bytes() const { return total_bytes_; }
  uint64_t total_objects() const { return objects_.size(); }
  bool empty() const { return objects_.empty(); }
  size_t num_buckets() const { return buckets_.size(); }
  const LeakBucket& bucket(size_t i) const { return buckets_[i]; }
  const LeakedObject& object(size_t i) const { return objects_[i]; }

 private:
  MappedArray<LeakedObject> objects_;
  MappedArray<LeakBucket> buckets_;
  uint64_t total_bytes_ = 0;
};

struct ReportOptions {
  const char* check_name;
  const char* profile_path;     // where the leak profile goes
  const char* program_path;     // for the pprof command
  const char* pprof_path;       // PPROF_PATH, "pprof" by default
  int max_leaks;                // stacks printed; <= 0: all
  bool brief;                   // summary line only
  bool identify;                // object addresses in the report and the profile
};

// Writes the stderr report and the profile. Returns false if the profile could not be
// written (the report says so).
bool ReportLeaks(const LeakSet& leaks, const ReportOptions& options);

// The leak profile in the heap-profile text format pprof reads.
bool WriteLeakProfile(const LeakSet& leaks, const char* path, bool identify);

}  // namespace tcm::heapcheck

#endif  // TCMALLOC_HEAP_CHECK_REPORT_H_
