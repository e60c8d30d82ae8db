// Human-readable heap report in gperftools' "MALLOC: ..." format, written through a
// Printer (never allocates). Used by malloc_stats() and, later, MallocExtension::GetStats.
#ifndef TCMALLOC_MALLOC_STATS_TEXT_H_
#define TCMALLOC_MALLOC_STATS_TEXT_H_

#include "allocation.h"
#include "base/log.h"

namespace tcm {

void PrintHeapSummary(Printer* out, const HeapTotals& t);

}  // namespace tcm

#endif  // TCMALLOC_MALLOC_STATS_TEXT_H_
