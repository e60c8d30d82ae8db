// The heap report of malloc_stats(), MALLOCSTATS and MallocExtension::GetStats, in
// gperftools' "MALLOC: ..." format, written through a Printer (never allocates).
//
//   level 1  totals: bytes in use, free in each tier, metadata, released, overhead; what
//            maintenance did (passes, idle and surplus releases, background thread)
//   level 2  + a per-size-class table (objects in use of span capacity, span bytes, free
//            bytes per tier, fragmentation) and the page heap's free runs by length
#ifndef TCMALLOC_MALLOC_STATS_TEXT_H_
#define TCMALLOC_MALLOC_STATS_TEXT_H_

#include "api/allocation.h"
#include "base/log.h"
#include "core/page_heap.h"
#include "core/size_classes.h"

namespace tcm {

struct ClassStats {
  size_t spans;
  size_t in_use_objects;
  size_t central_free;   // objects
  size_t transfer_free;  // objects
  size_t thread_free;    // objects
};

// Per-class figures (index = class; entry 0 unused). Racy but consistent enough for stats.
void CollectClassStats(ClassStats* out);

// The page heap's huge pages and counters, read together under its lock (GetStats and the
// tcmalloc.hugepage_* properties). `pages` is empty when the heap is not hugepage-aware.
struct HugePageSnapshot {
  bool aware = false;
  HugePageStats pages;
  PageHeapStats heap;
  size_t collapsed_bytes = 0;  // MADV_COLLAPSE'd in all
  size_t collapse_credit = 0;  // what passes on program threads may still collapse
};
HugePageSnapshot TakeHugePageSnapshot();

// The allocator's metadata mappings: the arena's chunks and own mappings (span records,
// slabs, transfer-cache arrays, pagemap nodes) and the class map's leaves; bytes mapped
// and, by mincore, resident. GetStats prints it; a system call per 2 MiB mapped.
struct MetadataResidency {
  size_t mapped = 0;
  size_t resident = 0;
  size_t class_map_mapped = 0;
  size_t class_map_resident = 0;
};
MetadataResidency MeasureMetadata();

void PrintHeapSummary(Printer* out, const HeapTotals& t);
void PrintStats(Printer* out, int level);

}  // namespace tcm

#endif  // TCMALLOC_MALLOC_STATS_TEXT_H_
