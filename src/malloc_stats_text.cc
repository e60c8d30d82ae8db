#include "malloc_stats_text.h"

namespace tcm {

static void Line(Printer* out, char op, size_t bytes, const char* what) {
  out->Printf("MALLOC: %c %12zu (%7.1f MiB) %s\n", op, bytes, static_cast<double>(bytes) / 1048576.0, what);
}

void PrintHeapSummary(Printer* out, const HeapTotals& t) {
  const size_t physical = t.in_use_bytes + t.pageheap_free_bytes + t.central_free_bytes +
                          t.transfer_cache_bytes + t.thread_cache_bytes + t.metadata_bytes;
  out->Printf("------------------------------------------------\n");
  Line(out, ' ', t.in_use_bytes, "Bytes in use by application");
  Line(out, '+', t.pageheap_free_bytes, "Bytes in page heap freelist");
  Line(out, '+', t.central_free_bytes, "Bytes in central cache freelist");
  Line(out, '+', t.transfer_cache_bytes, "Bytes in transfer cache freelist");
  Line(out, '+', t.thread_cache_bytes, "Bytes in thread cache freelists");
  Line(out, '+', t.metadata_bytes, "Bytes in malloc metadata");
  out->Printf("MALLOC:   ------------\n");
  Line(out, '=', physical, "Actual memory used (physical + swap)");
  Line(out, '+', t.unmapped_bytes, "Bytes released to OS (aka unmapped)");
  out->Printf("MALLOC:   ------------\n");
  Line(out, '=', physical + t.unmapped_bytes, "Virtual address space used");
  out->Printf("MALLOC:\n");
  out->Printf("MALLOC:   %12zu              Spans in use\n", t.in_use_spans);
  out->Printf("MALLOC:   %12zu              Thread heaps in use\n", t.thread_caches);
  out->Printf("MALLOC:   %12zu              Tcmalloc page size\n", kPageSize);
  out->Printf("------------------------------------------------\n");
}

}  // namespace tcm
